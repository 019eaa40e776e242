//! Fields of Kubernetes 1.37 that minik8s does not act on, refused rather
//! than accepted and ignored (a user must never see success while the
//! workload runs differently from its spec).
//!
//! They are the alpha and beta fields of 1.36 and 1.37 that the kubelet,
//! scheduler and controllers here do not implement, and that the protobuf
//! messages of `k8s-pb` (Kubernetes 1.35's) cannot carry either, so serving
//! them would also lose them on the protobuf wire. The protobuf round-trip
//! test (`tests/protobuf_round_trip.rs`) checks this table covers every
//! field that protobuf would drop. A field leaves the table when it is
//! implemented (and its protobuf tag known).

use super::{Errors, FieldError};
use serde_json::Value;

/// A refused field: the last segments of its path (list indices left out),
/// the kinds it is refused in (empty: any kind, as pod templates sit in many),
/// and what it would have done.
struct Unsupported {
    path: &'static [&'static str],
    kinds: &'static [&'static str],
    what: &'static str,
}

const fn field(path: &'static [&'static str], what: &'static str) -> Unsupported {
    Unsupported {
        path,
        kinds: &[],
        what,
    }
}

/// The Dynamic Resource Allocation kinds.
const DRA: &[&str] = &[
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
];

const fn dra(path: &'static [&'static str], what: &'static str) -> Unsupported {
    Unsupported {
        path,
        kinds: DRA,
        what,
    }
}

const UNSUPPORTED: &[Unsupported] = &[
    field(
        &["httpGet", "protocol"],
        "HTTP probe and hook protocol selection",
    ),
    field(&["grpc", "mode"], "gRPC probe modes"),
    field(&["volumeMounts", "bindMountOptions"], "bind mount options"),
    field(&["spec", "evictionResponders"], "eviction responders"),
    field(&["configMap", "defaultUser"], "volume file ownership"),
    field(&["secret", "defaultUser"], "volume file ownership"),
    field(&["downwardAPI", "defaultUser"], "volume file ownership"),
    field(&["projected", "defaultUser"], "volume file ownership"),
    field(&["items", "user"], "volume file ownership"),
    field(&["clusterTrustBundle", "user"], "volume file ownership"),
    field(&["podCertificate", "user"], "volume file ownership"),
    field(&["serviceAccountToken", "user"], "volume file ownership"),
    field(&["emptyDir", "mode"], "emptyDir modes"),
    field(&["status", "volumeHealth"], "volume health reporting"),
    field(
        &["status", "nodeAllocatableResourceClaimStatuses"],
        "node-allocatable resource claims",
    ),
    field(&["volumeMounts", "volumeStatus"], "volume health reporting"),
    field(
        &["allocatedResourcesStatus", "resources", "message"],
        "device health messages",
    ),
    Unsupported {
        path: &["nodeInfo", "runningInUserNamespace"],
        kinds: &["Node"],
        what: "nodes in user namespaces",
    },
    Unsupported {
        path: &["spec", "podPreemptionPolicy"],
        kinds: &["Node"],
        what: "per-node preemption policies",
    },
    // A claim's, also in a StatefulSet's claim templates.
    field(&["status", "healthStatus"], "volume health reporting"),
    Unsupported {
        path: &["spec", "scheduling"],
        kinds: &["Job", "CronJob"],
        what: "workload scheduling of Jobs",
    },
    // Dynamic Resource Allocation: the alpha and beta features beyond
    // structured parameters, node-local and node-selected pools, selectors,
    // ExactCount/All, firstAvailable, matchAttribute and adminAccess.
    dra(
        &["exactly", "derivedAttributes"],
        "derived device attributes",
    ),
    dra(
        &["firstAvailable", "derivedAttributes"],
        "derived device attributes",
    ),
    dra(&["exactly", "capacity"], "consumable device capacity"),
    dra(
        &["firstAvailable", "capacity"],
        "consumable device capacity",
    ),
    dra(&["exactly", "tolerations"], "device taints and tolerations"),
    dra(
        &["firstAvailable", "tolerations"],
        "device taints and tolerations",
    ),
    dra(
        &["constraints", "distinctAttribute"],
        "distinct-attribute constraints",
    ),
    dra(
        &["spec", "extendedResourceName"],
        "extended resources backed by DRA",
    ),
    dra(
        &["devices", "allowMultipleAllocations"],
        "consumable device capacity",
    ),
    dra(&["requestPolicy"], "consumable device capacity"),
    dra(
        &["devices", "bindingConditions"],
        "device binding conditions",
    ),
    dra(
        &["devices", "bindingFailureConditions"],
        "device binding conditions",
    ),
    dra(&["devices", "bindsToNode"], "device binding conditions"),
    dra(&["devices", "taints"], "device taints and tolerations"),
    dra(&["devices", "consumesCounters"], "partitionable devices"),
    dra(&["spec", "sharedCounters"], "partitionable devices"),
    dra(&["spec", "partitionTypeAttribute"], "partitionable devices"),
    dra(
        &["devices", "nodeAllocatableResources"],
        "node-allocatable devices",
    ),
    dra(&["spec", "skipNodeOperations"], "skipping node operations"),
    dra(
        &["results", "skipNodeOperations"],
        "skipping node operations",
    ),
    dra(
        &["spec", "perDeviceNodeSelection"],
        "per-device node selection",
    ),
    dra(&["devices", "nodeName"], "per-device node selection"),
    dra(&["devices", "nodeSelector"], "per-device node selection"),
    dra(&["devices", "allNodes"], "per-device node selection"),
    dra(&["bools"], "list-valued device attributes"),
    dra(&["ints"], "list-valued device attributes"),
    dra(&["strings"], "list-valued device attributes"),
    dra(&["versions"], "list-valued device attributes"),
    Unsupported {
        path: &["conditions", "observedGeneration"],
        kinds: &["HorizontalPodAutoscaler"],
        what: "observed generations on autoscaler conditions",
    },
];

/// Forbidden errors for every unsupported field set (non-null) in `obj`.
pub fn validate_unsupported(kind: &str, obj: &Value, errs: &mut Errors) {
    let table: Vec<&Unsupported> = UNSUPPORTED
        .iter()
        .filter(|u| u.kinds.is_empty() || u.kinds.contains(&kind))
        .collect();
    walk(obj, &mut Vec::new(), &mut String::new(), &table, errs);
}

/// Walks `v`: `keys` are the object keys on the way (no indices), `path`
/// the rendered path (`spec.containers[0]`).
fn walk<'a>(
    v: &'a Value,
    keys: &mut Vec<&'a str>,
    path: &mut String,
    table: &[&Unsupported],
    errs: &mut Errors,
) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                // Unset, or false (every refused flag's default).
                if child.is_null() || *child == Value::Bool(false) {
                    continue;
                }
                keys.push(k);
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                if let Some(u) = table.iter().find(|u| keys.ends_with(u.path)) {
                    errs.push(FieldError::forbidden(
                        path.clone(),
                        format!("{} (Kubernetes 1.37) is not supported by minik8s", u.what),
                    ));
                } else if child.is_object() || child.is_array() {
                    walk(child, keys, path, table, errs);
                }
                path.truncate(len);
                keys.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, keys, path, table, errs);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unsupported_fields_are_named_by_their_path_in_any_template() {
        let deploy = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "readinessProbe": {"httpGet": {"port": 80, "protocol": "HTTP2"}}}],
            "volumes": [{"name": "v", "emptyDir": {"mode": "x"}}, {"name": "w", "emptyDir": {}}]}}}});
        let mut errs = Vec::new();
        validate_unsupported("Deployment", &deploy, &mut errs);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.template.spec.containers[0].readinessProbe.httpGet.protocol",
                "spec.template.spec.volumes[0].emptyDir.mode"
            ]
        );
        assert!(errs[0].to_string().contains("Forbidden"), "{}", errs[0]);
        // Kind-specific entries apply to their kind only; null is unset.
        let hpa =
            json!({"status": {"conditions": [{"type": "AbleToScale", "observedGeneration": 2}]}});
        let mut errs = Vec::new();
        validate_unsupported("HorizontalPodAutoscaler", &hpa, &mut errs);
        assert_eq!(errs.len(), 1);
        let mut errs = Vec::new();
        validate_unsupported("Pod", &hpa, &mut errs);
        validate_unsupported(
            "Pod",
            &json!({"spec": {"evictionResponders": null}}),
            &mut errs,
        );
        assert!(errs.is_empty());
    }
}
