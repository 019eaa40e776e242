//! RuntimeClass (`node.k8s.io/v1`) and the RuntimeClass admission, as
//! Kubernetes has them: a pod naming a class must name one that exists; it
//! gets the class's `overhead.podFixed` as its `spec.overhead` (a different
//! overhead of its own is refused) and the class's scheduling constraints
//! (nodeSelector merged, tolerations added). The kubelet runs the pod's
//! sandbox and containers with the class's `handler` as Docker's runtime.
//!
//! ```text
//!  pod runtimeClassName: gvisor ──admission──▶ spec.overhead, nodeSelector, tolerations from the class
//!                                ──kubelet───▶ docker run --runtime <handler>
//!  pod runtimeClassName: gone   ──admission──▶ 403 pod rejected: RuntimeClass "gone" not found
//! ```

use super::Context;
use k8s_openapi::api::node::v1::RuntimeClass;
use minik8s_api::registry;
use serde_json::{json, Value};

async fn named(ctx: &Context<'_>, name: &str) -> Option<Value> {
    let key = registry::of::<RuntimeClass>().key(None, name);
    let kv = ctx.store.get(&key).await.ok()??;
    serde_json::from_slice(&kv.value).ok()
}

/// The RuntimeClass admission of a pod on create.
pub(super) async fn admit_pod(ctx: &Context<'_>, pod: &mut Value) -> Result<(), String> {
    let Some(name) = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
    else {
        return Ok(());
    };
    let class = named(ctx, &name)
        .await
        .ok_or_else(|| format!("pod rejected: RuntimeClass \"{name}\" not found"))?;
    apply_class(&class, pod)
}

/// What a class gives a pod: its overhead and scheduling constraints.
pub fn apply_class(class: &Value, pod: &mut Value) -> Result<(), String> {
    let spec = &mut pod["spec"];
    if let Some(overhead) = class.pointer("/overhead/podFixed").filter(|o| !o.is_null()) {
        match spec.get("overhead").filter(|o| !o.is_null()) {
            Some(own) if !same_amounts(own, overhead) => {
                return Err(
                    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
                        .into(),
                )
            }
            _ => spec["overhead"] = overhead.clone(),
        }
    }
    if let Some(selector) = class
        .pointer("/scheduling/nodeSelector")
        .and_then(Value::as_object)
    {
        for (k, v) in selector {
            match spec.pointer(&format!("/nodeSelector/{}", k.replace('~', "~0").replace('/', "~1"))) {
                Some(own) if own != v => {
                    return Err(format!(
                        "pod rejected: conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                        v.as_str().unwrap_or_default(),
                        own.as_str().unwrap_or_default()
                    ))
                }
                Some(_) => {}
                None => {
                    if !spec.get("nodeSelector").is_some_and(Value::is_object) {
                        spec["nodeSelector"] = json!({});
                    }
                    spec["nodeSelector"][k] = v.clone();
                }
            }
        }
    }
    if let Some(tolerations) = class
        .pointer("/scheduling/tolerations")
        .and_then(Value::as_array)
    {
        if !spec.get("tolerations").is_some_and(Value::is_array) {
            spec["tolerations"] = json!([]);
        }
        if let Some(own) = spec["tolerations"].as_array_mut() {
            for t in tolerations {
                if !own.contains(t) {
                    own.push(t.clone());
                }
            }
        }
    }
    Ok(())
}

fn same_amounts(a: &Value, b: &Value) -> bool {
    minik8s_api::quota::resource_list(Some(a)) == minik8s_api::quota::resource_list(Some(b))
        && a.as_object().map(|m| m.len()) == b.as_object().map(|m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_gives_its_overhead_and_scheduling() {
        let class = json!({"handler": "runc", "overhead": {"podFixed": {"cpu": "250m"}},
            "scheduling": {"nodeSelector": {"sandboxed": "yes"},
                           "tolerations": [{"key": "sandboxed", "operator": "Exists"}]}});
        let mut pod = json!({"spec": {"containers": [], "nodeSelector": {"zone": "a"}}});
        apply_class(&class, &mut pod).unwrap();
        assert_eq!(pod["spec"]["overhead"], json!({"cpu": "250m"}));
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"zone": "a", "sandboxed": "yes"})
        );
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "sandboxed");
        let mut other = json!({"spec": {"overhead": {"cpu": "1"}}});
        assert_eq!(
            apply_class(&class, &mut other).unwrap_err(),
            "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        );
        let mut conflicting = json!({"spec": {"nodeSelector": {"sandboxed": "no"}}});
        assert!(apply_class(&class, &mut conflicting)
            .unwrap_err()
            .contains("conflict: runtimeClass.scheduling.nodeSelector[sandboxed] = yes"));
    }
}
