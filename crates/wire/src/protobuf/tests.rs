//! Round trips against the `k8s-pb` crate's own prost types: what they
//! encode we decode to the JSON Kubernetes shows, and what we encode they
//! decode to the same fields.

use super::*;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

fn wrap(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn unwrap<M: Message + Default>(body: &[u8]) -> M {
    let unknown = Unknown::decode(body.strip_prefix(b"k8s\0").expect("magic")).unwrap();
    M::decode(unknown.raw.unwrap().as_slice()).unwrap()
}

/// As Go marshals what `kubectl create deployment web --image=nginx --replicas=0`
/// builds: every non-pointer field is on the wire, zero or not.
fn kubectl_deployment(replicas: i32) -> apps::Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())].into();
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            namespace: Some(String::new()),
            labels: labels.clone(),
            creation_timestamp: Some(meta::Time::default()),
            generation: Some(0),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(replicas),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels,
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx".into()),
                        resources: Some(core::ResourceRequirements::default()),
                        termination_message_path: Some(String::new()),
                        ..Default::default()
                    }],
                    restart_policy: Some(String::new()),
                    host_network: Some(false),
                    node_name: Some(String::new()),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy::default()),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

#[test]
fn a_kubectl_deployment_decodes_to_the_json_kubernetes_shows() {
    let body = wrap(
        "apps/v1",
        "Deployment",
        kubectl_deployment(0).encode_to_vec(),
    );
    let got = decode_object(&body).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                // A pointer in Go: 0 is a value, not "unset".
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
    let three = decode_object(&wrap(
        "apps/v1",
        "Deployment",
        kubectl_deployment(3).encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(three["spec"]["replicas"], 3);
}

#[test]
fn json_encodes_to_what_k8s_pb_decodes() {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                     "creationTimestamp": "2026-11-24T10:20:30Z",
                     "annotations": {"deployment.kubernetes.io/revision": "2"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]}}
        },
        "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True",
                   "lastUpdateTime": "2026-11-24T10:20:31Z"}]}
    });
    let body = encode_object(&deployment)
        .unwrap()
        .expect("Deployment has a message");
    let d: apps::Deployment = unwrap(&body);
    let m = d.metadata.as_ref().unwrap();
    assert_eq!(m.name.as_deref(), Some("web"));
    assert_eq!(
        m.creation_timestamp.as_ref().unwrap().seconds,
        Some(1_795_515_630)
    );
    assert_eq!(m.annotations["deployment.kubernetes.io/revision"], "2");
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let ru = spec
        .strategy
        .as_ref()
        .unwrap()
        .rolling_update
        .as_ref()
        .unwrap();
    assert_eq!(
        ru.max_surge,
        Some(IntOrString {
            r#type: Some(1),
            int_val: None,
            str_val: Some("25%".into())
        })
    );
    assert_eq!(ru.max_unavailable.as_ref().unwrap().int_val, Some(0));
    let c = &spec
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(c.ports[0].container_port, Some(80));
    assert_eq!(
        c.resources.as_ref().unwrap().limits["cpu"],
        Quantity {
            string: Some("500m".into())
        }
    );
    // And back: the same JSON (numbers, strings, times, int-or-strings).
    assert_eq!(decode_object(&body).unwrap(), deployment);
}

#[test]
fn secret_bytes_are_base64_in_json() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: Some("s".into()),
            ..Default::default()
        }),
        data: [
            ("password".to_string(), b"hunter2".to_vec()),
            ("empty".to_string(), vec![]),
        ]
        .into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let json = decode_object(&wrap("v1", "Secret", secret.encode_to_vec())).unwrap();
    assert_eq!(
        json["data"],
        json!({"empty": "", "password": "aHVudGVyMg=="})
    );
    let back: core::Secret = unwrap(&encode_object(&json).unwrap().unwrap());
    assert_eq!(back.data, secret.data);
}

#[test]
fn kinds_without_a_message_stay_json() {
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"});
    assert_eq!(encode_object(&lws).unwrap(), None);
    let body = wrap("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", vec![]);
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::UnknownKind { .. })
    ));
}

#[test]
fn bad_bodies_are_errors_not_panics() {
    assert_eq!(decode_object(b"{\"kind\":1}"), Err(ProtobufError::NoMagic));
    let good = wrap(
        "v1",
        "Namespace",
        core::Namespace {
            metadata: Some(meta::ObjectMeta {
                name: Some("x".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    assert_eq!(decode_object(&good).unwrap()["metadata"]["name"], "x");
    for cut in 4..good.len() {
        let _ = decode_object(&good[..cut]);
    }
    for i in 4..good.len() {
        let mut flipped = good.clone();
        flipped[i] ^= 0xff;
        let _ = decode_object(&flipped);
    }
    assert!(decode_object(b"k8s\0").is_err(), "no typeMeta");
    // A message nested without end.
    let mut deep = Vec::new();
    for _ in 0..200 {
        let mut outer = Vec::new();
        put_bytes(&mut outer, 1, &deep);
        deep = outer;
    }
    let _ = decode_object(&wrap("v1", "Namespace", deep));
}

#[test]
fn zero_value_list_names_real_fields() {
    convert::zero_value_fields_exist(Schema::get()).unwrap();
}

#[test]
fn protobuf_is_preferred_only_when_asked_first() {
    assert!(preferred("application/vnd.kubernetes.protobuf, */*"));
    assert!(preferred(
        "application/vnd.kubernetes.protobuf,application/json"
    ));
    assert!(!preferred(
        "application/json, application/vnd.kubernetes.protobuf"
    ));
    assert!(!preferred(
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"
    ));
    assert!(!preferred(""));
}

#[test]
fn volume_sources_are_inline_in_json_and_nested_in_protobuf() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {}}],
                 "volumes": [
                     {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                     {"name": "scratch", "emptyDir": {}},
                     {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}
                 ]},
    });
    let body = encode_object(&pod).unwrap().expect("Pod has a message");
    let p: core::Pod = unwrap(&body);
    let volumes = &p.spec.as_ref().unwrap().volumes;
    let source = |i: usize| volumes[i].volume_source.as_ref().unwrap();
    assert_eq!(
        source(0)
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .claim_name
            .as_deref(),
        Some("data-web-0")
    );
    assert!(source(1).empty_dir.is_some());
    assert!(source(2).downward_api.is_some());
    assert_eq!(decode_object(&body).unwrap(), pod);
    let pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/srv/pv", "type": "DirectoryOrCreate"}},
    });
    let body = encode_object(&pv)
        .unwrap()
        .expect("PersistentVolume has a message");
    let v: core::PersistentVolume = unwrap(&body);
    let spec = v.spec.as_ref().unwrap();
    let host = spec
        .persistent_volume_source
        .as_ref()
        .unwrap()
        .host_path
        .as_ref()
        .unwrap();
    assert_eq!(host.path.as_deref(), Some("/srv/pv"));
    assert_eq!(decode_object(&body).unwrap(), pv);
}

/// `kubectl create ingress` sends protobuf, where a rule's `http` sits in
/// a nested IngressRuleValue message; in JSON it is the rule's own field.
#[test]
fn an_ingress_rules_http_is_inline_in_json() {
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "apps"},
        "spec": {"rules": [{"host": "*.apps.minik8s", "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]},
    });
    let body = encode_object(&ingress)
        .unwrap()
        .expect("Ingress has a message");
    assert_eq!(decode_object(&body).unwrap(), ingress);
}

#[test]
fn a_pod_with_runtime_class_and_overhead_round_trips() {
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"runtimeClassName": "plain", "overhead": {"cpu": "10m"}, "nodeName": "n",
                 "containers": [{"name": "c", "image": "busybox"}]}});
    let bytes = encode_object(&pod).unwrap().unwrap();
    let back = decode_object(&bytes).unwrap();
    assert_eq!(back["spec"]["overhead"], pod["spec"]["overhead"]);
    assert_eq!(back["spec"]["runtimeClassName"], "plain");
}
