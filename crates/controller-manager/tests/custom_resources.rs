//! Controllers on custom resources: the HPA finds a CRD's kind through
//! discovery and reads it through its `scale` subresource (the CRD's
//! specReplicasPath), as it does on Kubernetes.

mod common;

use common::{cluster, until};
use minik8s_api::registry;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hpa_reads_a_custom_resources_scale() {
    let (_server, client) = cluster("cr", 1).await;
    let crds = client.dynamic(
        registry::by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition").unwrap(),
        None,
    );
    crds.create(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workers.example.minik8s.io"},
        "spec": {"group": "example.minik8s.io", "scope": "Namespaced",
            "names": {"plural": "workers", "kind": "Worker"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"size": {"type": "integer"}, "selector": {"type": "string"}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.size", "labelSelectorPath": ".status.selector"}}}]}}))
        .await
        .unwrap();
    let info = until("the Worker kind is served", 10, || async {
        match client
            .resource_for_kind("example.minik8s.io/v1", "Worker")
            .await
        {
            Ok(Some(info)) => Ok(info),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let api = client.dynamic(info, Some("default"));
    api.create(
        &json!({"apiVersion": "example.minik8s.io/v1", "kind": "Worker",
        "metadata": {"name": "w"}, "spec": {"size": 1}}),
    )
    .await
    .unwrap();
    let hpas = client.dynamic(
        registry::by_kind("autoscaling/v2", "HorizontalPodAutoscaler").unwrap(),
        Some("default"),
    );
    hpas.create(&json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "w"},
        "spec": {"scaleTargetRef": {"apiVersion": "example.minik8s.io/v1", "kind": "Worker", "name": "w"},
            "minReplicas": 3, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}))
        .await
        .unwrap();
    // The HPA reads the Worker through its /scale (spec.size, status.size).
    // Hollow pods have no metrics, so it does not rescale: that is shown with
    // real pods in kubelet/tests/autoscaling.rs; here, what matters is that
    // the custom kind was found and its scale read.
    let status: Value = until("the HPA read the Worker's scale", 30, || async {
        let h = hpas.get("w").await.map_err(|e| e.to_string())?;
        let able = h["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "AbleToScale"))
            .cloned();
        match able {
            Some(c) if c["status"] == "True" && h["status"]["currentReplicas"] == 1 => {
                Ok(h["status"].clone())
            }
            _ => Err(h["status"].to_string()),
        }
    })
    .await;
    assert_eq!(
        status["conditions"][0]["reason"], "SucceededGetScale",
        "{status}"
    );
}
