//! Dynamic Resource Allocation on 100 hollow nodes, each publishing two fake
//! GPUs (`--fake-gpus 2`): the scheduler allocates devices by DeviceClass
//! and CEL selectors, claims from templates are made and released with
//! their pods, a shared claim is reserved for every pod using it, and the
//! real kubectl shows claims as Kubernetes prints them.

mod common;

use common::{cluster_with_gpus, events_about, kubectl, kubectl_ok, table_line, until};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams};
use serde_json::{json, Value};

const NODES: usize = 100;
const RESOURCE: &str = "resource.k8s.io/v1";

fn api(client: &Client, kind: &str) -> DynamicApi {
    let info = registry::by_kind(RESOURCE, kind)
        .or_else(|| registry::by_kind("v1", kind))
        .unwrap();
    client.dynamic(info, Some("default"))
}

fn pod(name: &str, claims: Value, containers_claim: Value, node: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"resourceClaims": claims,
                 "containers": [{"name": "c", "image": "busybox", "resources": {"claims": containers_claim}}]}});
    if let Some(n) = node {
        p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": n});
    }
    p
}

fn gpus(count: i64, selector: &str) -> Value {
    json!({"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.minik8s.io",
        "count": count, "selectors": [{"cel": {"expression": selector}}]}}]}})
}

async fn get(api: &DynamicApi, name: &str) -> Value {
    api.get(name).await.unwrap()
}

async fn node_of(pods: &DynamicApi, name: &str) -> String {
    until(&format!("{name} bound"), 60, || async {
        let p = get(pods, name).await;
        p["spec"]["nodeName"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{name}: {}", p["status"]))
    })
    .await
}

/// `kubectl create -f` of `manifest`: its output, which must be a refusal.
fn refused(server: &str, manifest: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.json");
    std::fs::write(&file, manifest.to_string()).unwrap();
    let (ok, out) = kubectl(server, &["create", "-f", file.to_str().unwrap()]);
    assert!(!ok, "created: {out}");
    out
}

/// Malformed CEL, an unknown class, a field minik8s does not act on, a
/// container naming no claim of its pod: 422s naming the field.
fn refuses_bad_claims(server: &str) {
    let claim = |spec: Value| {
        json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
                                     "metadata": {"name": "bad"}, "spec": spec})
    };
    let out = refused(server, &claim(gpus(1, "device.driver ==")));
    assert!(out.contains("The ResourceClaim \"bad\" is invalid: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"), "{out}");
    let out = refused(
        server,
        &claim(
            json!({"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "nope"}}]}}),
        ),
    );
    assert!(
        out.contains("spec.devices.requests[0].exactly.deviceClassName: Not found: \"nope\""),
        "{out}"
    );
    let out = refused(
        server,
        &claim(
            json!({"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.minik8s.io",
        "tolerations": [{"key": "k", "operator": "Exists"}]}}]}}),
        ),
    );
    assert!(out.contains("spec.devices.requests[0].exactly.tolerations: Forbidden: device taints and tolerations (Kubernetes 1.37) is not supported by minik8s"), "{out}");
    let out = refused(
        server,
        &pod(
            "bad",
            json!([{"name": "gpu", "resourceClaimName": "x"}]),
            json!([{"name": "tpu"}]),
            None,
        ),
    );
    assert!(out.contains("spec.containers[0].resources.claims[0]: Not found: \"tpu\": must be one of the names in pod.spec.resourceClaims: gpu"), "{out}");
    let template = json!({"apiVersion": RESOURCE, "kind": "ResourceClaimTemplate", "metadata": {"name": "bad"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.minik8s.io", "allocationMode": "All", "count": 2}}]}}}});
    let out = refused(server, &template);
    assert!(out.contains("spec.spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"), "{out}");
}

fn allocated_devices(claim: &Value) -> Vec<(String, String)> {
    claim
        .pointer("/status/allocation/devices/results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["pool"].as_str().unwrap_or("").to_string(),
                r["device"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn devices_are_allocated_by_class_and_selector_on_hollow_nodes() {
    let (server, client) = cluster_with_gpus("dra", NODES, 2).await;
    let slices = client.dynamic(registry::by_kind(RESOURCE, "ResourceSlice").unwrap(), None);
    until("every hollow node published its GPUs", 60, || async {
        let n = slices.list(&ListParams::default()).await.unwrap()["items"]
            .as_array()
            .map_or(0, Vec::len);
        (n == NODES).then_some(()).ok_or(format!("{n} slices"))
    })
    .await;
    // kubectl shows a slice as Kubernetes prints it.
    let out = kubectl_ok(
        &server.url,
        &["get", "resourceslices", "dra-7-gpu.minik8s.io"],
    );
    assert_eq!(
        table_line(&out, 0),
        ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    );
    assert_eq!(
        &table_line(&out, 1)[..4],
        ["dra-7-gpu.minik8s.io", "dra-7", "gpu.minik8s.io", "dra-7"]
    );

    // The class every fake GPU belongs to (as dra-example-driver ships one).
    let classes = client.dynamic(registry::by_kind(RESOURCE, "DeviceClass").unwrap(), None);
    classes
        .create(&json!({"apiVersion": RESOURCE, "kind": "DeviceClass", "metadata": {"name": "gpu.minik8s.io"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.minik8s.io'"}}]}}))
        .await
        .unwrap();
    let claims = api(&client, "ResourceClaim");
    let pods = api(&client, "Pod");
    refuses_bad_claims(&server.url);
    let fake = "device.attributes['gpu.minik8s.io'].model == 'minik8s-fake-gpu' && \
                device.capacity['gpu.minik8s.io'].memory.compareTo(quantity('16Gi')) >= 0";

    // One GPU taken on every node but dra-42 (each pod pinned to its node):
    // then the only place with two free GPUs of the model is dra-42.
    for i in (0..NODES).filter(|i| *i != 42) {
        claims
            .create(&json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
                "metadata": {"name": format!("one-{i}")}, "spec": gpus(1, fake)}))
            .await
            .unwrap();
        let node = format!("dra-{i}");
        pods.create(&pod(
            &format!("one-{i}"),
            json!([{"name": "gpu", "resourceClaimName": format!("one-{i}")}]),
            json!([{"name": "gpu"}]),
            Some(&node),
        ))
        .await
        .unwrap();
    }
    until("99 single-GPU pods bound", 120, || async {
        let items = pods.list(&ListParams::default()).await.unwrap()["items"].clone();
        let bound = items
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count();
        (bound == NODES - 1)
            .then_some(())
            .ok_or(format!("{bound} bound"))
    })
    .await;
    claims
        .create(&json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
            "metadata": {"name": "two"}, "spec": gpus(2, fake)}))
        .await
        .unwrap();
    pods.create(&pod(
        "two",
        json!([{"name": "gpu", "resourceClaimName": "two"}]),
        json!([{"name": "gpu"}]),
        None,
    ))
    .await
    .unwrap();
    assert_eq!(node_of(&pods, "two").await, "dra-42");
    let two = get(&claims, "two").await;
    let devices = allocated_devices(&two);
    assert_eq!(
        devices,
        [
            ("dra-42".into(), "gpu-0".into()),
            ("dra-42".into(), "gpu-1".into())
        ]
    );
    assert_eq!(two["status"]["reservedFor"][0]["name"], "two");
    assert!(two["metadata"]["finalizers"]
        .to_string()
        .contains("resource.kubernetes.io/delete-protection"));
    // kubectl: allocated and reserved.
    let out = kubectl_ok(&server.url, &["get", "resourceclaim", "two"]);
    assert_eq!(table_line(&out, 0), ["NAME", "STATE", "AGE"]);
    assert_eq!(table_line(&out, 1)[1], "allocated,reserved");

    // No node has three free GPUs: the pod waits with the scheduler's words.
    claims
        .create(&json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
            "metadata": {"name": "three"}, "spec": gpus(3, fake)}))
        .await
        .unwrap();
    pods.create(&pod(
        "three",
        json!([{"name": "gpu", "resourceClaimName": "three"}]),
        json!([]),
        None,
    ))
    .await
    .unwrap();
    let message = until("three unschedulable", 60, || async {
        let p = get(&pods, "three").await;
        let c = &p["status"]["conditions"][0];
        (c["reason"] == "Unschedulable")
            .then(|| c["message"].as_str().unwrap_or("").to_string())
            .ok_or(format!("{}", p["status"]))
    })
    .await;
    let expected = format!("0/{NODES} nodes are available: {NODES} cannot allocate all claims.");
    assert!(message.starts_with(&expected), "{message}");
    assert!(get(&claims, "three").await["status"]["allocation"].is_null());

    // A claim shared by two pods: allocated once, reserved for both, on one node.
    claims
        .create(&json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
            "metadata": {"name": "shared"}, "spec": gpus(1, "true")}))
        .await
        .unwrap();
    for name in ["share-a", "share-b"] {
        pods.create(&pod(
            name,
            json!([{"name": "gpu", "resourceClaimName": "shared"}]),
            json!([{"name": "gpu"}]),
            None,
        ))
        .await
        .unwrap();
    }
    let (a, b) = (
        node_of(&pods, "share-a").await,
        node_of(&pods, "share-b").await,
    );
    assert_eq!(a, b, "a shared claim's pods land where its devices are");
    let shared = get(&claims, "shared").await;
    let reserved: Vec<&str> = shared["status"]["reservedFor"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    assert!(reserved.contains(&"share-a") && reserved.contains(&"share-b"));
    assert_eq!(allocated_devices(&shared).len(), 1);
    // One pod gone: its reservation goes, the allocation stays for the other.
    pods.delete("share-a", &Default::default()).await.unwrap();
    until("share-a's reservation released", 60, || async {
        let c = get(&claims, "shared").await;
        let n = c["status"]["reservedFor"].as_array().map_or(0, Vec::len);
        (n == 1 && !c["status"]["allocation"].is_null())
            .then_some(())
            .ok_or(format!("{}", c["status"]))
    })
    .await;

    // An opaque configuration for the example driver, which has nothing to
    // configure: the pod is placed but does not start, and an event says why.
    let mut configured = gpus(1, "true");
    configured["devices"]["config"] = json!([{"opaque": {"driver": "gpu.minik8s.io",
        "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}]);
    claims
        .create(&json!({"apiVersion": RESOURCE, "kind": "ResourceClaim",
            "metadata": {"name": "configured"}, "spec": configured}))
        .await
        .unwrap();
    pods.create(&pod(
        "configured",
        json!([{"name": "gpu", "resourceClaimName": "configured"}]),
        json!([{"name": "gpu"}]),
        None,
    ))
    .await
    .unwrap();
    node_of(&pods, "configured").await;
    until("FailedPrepareDynamicResources", 60, || async {
        let events = events_about(&client, "default", "involvedObject.name=configured").await;
        events
            .iter()
            .any(|(r, m)| {
                r == "FailedPrepareDynamicResources" && m.contains("takes no opaque configuration")
            })
            .then_some(())
            .ok_or(format!("{events:?}"))
    })
    .await;
    assert_ne!(get(&pods, "configured").await["status"]["phase"], "Running");

    // A claim from a template: made for the pod, named in its status, gone with it.
    let templates = api(&client, "ResourceClaimTemplate");
    templates
        .create(
            &json!({"apiVersion": RESOURCE, "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"}, "spec": {"spec": gpus(1, "true")}}),
        )
        .await
        .unwrap();
    pods.create(&pod(
        "templated",
        json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
        json!([{"name": "gpu"}]),
        None,
    ))
    .await
    .unwrap();
    node_of(&pods, "templated").await;
    let made = get(&pods, "templated").await["status"]["resourceClaimStatuses"][0].clone();
    assert_eq!(made["name"], "gpu");
    let made_name = made["resourceClaimName"].as_str().unwrap().to_string();
    assert!(made_name.starts_with("templated-gpu-"), "{made_name}");
    let claim = get(&claims, &made_name).await;
    assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], "templated");
    assert_eq!(
        claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"],
        "gpu"
    );
    assert_eq!(allocated_devices(&claim).len(), 1);
    pods.delete("templated", &Default::default()).await.unwrap();
    until("the template's claim deleted with its pod", 60, || async {
        match claims.get(&made_name).await {
            Err(e) if e.is_not_found() => Ok(()),
            Ok(c) => Err(format!(
                "still there: {} {}",
                c["metadata"]["finalizers"], c["status"]
            )),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;

    // A template naming a class that does not exist: no claim, an event says why.
    pods.create(&pod(
        "no-template",
        json!([{"name": "gpu", "resourceClaimTemplateName": "missing"}]),
        json!([]),
        None,
    ))
    .await
    .unwrap();
    until("FailedResourceClaimCreation", 30, || async {
        let events = events_about(&client, "default", "involvedObject.name=no-template").await;
        events
            .iter()
            .any(|(r, m)| r == "FailedResourceClaimCreation" && m.contains("\"missing\" not found"))
            .then_some(())
            .ok_or(format!("{events:?}"))
    })
    .await;
    let (ok, out) = kubectl(
        &server.url,
        &[
            "get",
            "pod",
            "no-template",
            "-o",
            "jsonpath={.spec.nodeName}",
        ],
    );
    assert!(
        ok && out.is_empty(),
        "a pod without its claim is not scheduled: {out}"
    );
}

/// Per-group claims (lws#444) with a Workload API gang (`spec.scheduling`):
/// three hollow nodes with one fake GPU each and four groups of two, each
/// group sharing one GPU claim. Each of three groups is bound whole on the
/// node of its GPU, its claim reserved for both pods; the fourth is bound
/// nowhere (no half group holds a GPU), its PodGroup says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_claims_are_allocated_with_their_gang() {
    let (server, client) = cluster_with_gpus("dg", 3, 1).await;
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dra/lws-group-gpus.yaml"
    ))
    .unwrap();
    let manifest = example.replace(
        "  replicas: 2\n  leaderWorkerTemplate:",
        "  replicas: 4\n  scheduling: {}\n  leaderWorkerTemplate:",
    );
    assert_ne!(manifest, example);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gang-gpus.yaml");
    std::fs::write(&file, manifest).unwrap();
    kubectl_ok(&server.url, &["apply", "-f", file.to_str().unwrap()]);
    let pods = api(&client, "Pod");
    let claims = api(&client, "ResourceClaim");
    let placed = until("three whole groups bound, one held", 60, || async {
        let mut bound = Vec::new();
        let mut held = Vec::new();
        for g in 0..4 {
            let leader = pods
                .get(&format!("inference-{g}"))
                .await
                .map_err(|e| e.to_string())?;
            let worker = pods
                .get(&format!("inference-{g}-1"))
                .await
                .map_err(|e| e.to_string())?;
            let nodes = [&leader, &worker]
                .map(|p| p["spec"]["nodeName"].as_str().unwrap_or("").to_string());
            match (nodes[0].is_empty(), nodes[1].is_empty()) {
                (false, false) => bound.push((g, nodes)),
                (true, true) => held.push(g),
                _ => return Err(format!("group {g} half bound: {nodes:?}")),
            }
        }
        if bound.len() == 3 && held.len() == 1 {
            Ok((bound, held[0]))
        } else {
            Err(format!("bound {bound:?}, held {held:?}"))
        }
    })
    .await;
    let (bound, held) = placed;
    let mut gpus = Vec::new();
    for (g, nodes) in &bound {
        assert_eq!(nodes[0], nodes[1], "group {g} is on its GPU's node");
        let claim = get(&claims, &format!("inference-{g}-gpu")).await;
        let devices = allocated_devices(&claim);
        assert_eq!(devices.len(), 1, "{claim}");
        assert_eq!(devices[0].0, nodes[0], "the GPU is on the group's node");
        let reserved = claim["status"]["reservedFor"].as_array().map(Vec::len);
        assert_eq!(reserved, Some(2), "both pods of group {g} hold the claim");
        gpus.push(devices[0].clone());
    }
    gpus.sort();
    gpus.dedup();
    assert_eq!(gpus.len(), 3, "each group its own GPU");
    // The held group's gang: its PodGroup and its pods say why.
    let leader = get(&pods, &format!("inference-{held}")).await;
    let group = leader["spec"]["schedulingGroup"]["podGroupName"]
        .as_str()
        .unwrap()
        .to_string();
    let pg = until("the held gang's PodGroup says why", 30, || async {
        let out = kubectl_ok(
            &server.url,
            &["get", "podgroups.scheduling.k8s.io", &group, "-o", "json"],
        );
        let pg: Value = serde_json::from_str(&out).unwrap();
        match pg["status"]["conditions"][0]["reason"].as_str() {
            Some("Unschedulable") => Ok(pg),
            _ => Err(pg["status"].to_string()),
        }
    })
    .await;
    let message = pg["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("gang {group}: 0 of 2 pods fit")),
        "{message}"
    );
    let claim = get(&claims, &format!("inference-{held}-gpu")).await;
    assert!(
        allocated_devices(&claim).is_empty(),
        "a held group holds no GPU: {claim}"
    );
}
