//! PriorityClass (`scheduling.k8s.io/v1`) and the Priority admission, as
//! Kubernetes has them: the two built-in classes, user values up to one
//! billion, `value` and `preemptionPolicy` fixed once created, at most one
//! `globalDefault`, and pods given the `priority` and `preemptionPolicy` of
//! their `priorityClassName` (or of the default class) on create.
//!
//! ```text
//!  pod priorityClassName: high ──admission──▶ spec.priority = 1000, spec.preemptionPolicy = PreemptLowerPriority
//!  pod (none)                  ──admission──▶ the globalDefault class's, else priority 0
//!  pod priorityClassName: gone ──admission──▶ 403 no PriorityClass with name gone was found
//! ```

use super::Context;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use minik8s_api::registry;
use serde_json::{json, Value};

/// The built-in classes as objects, for the apiserver to create at start.
pub fn system_classes() -> Vec<Value> {
    minik8s_validation::SYSTEM_PRIORITY_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": name}, "value": value, "description": description})
        })
        .collect()
}

/// Every PriorityClass, from the apiserver's followed copy (a pod create
/// reads no store for it).
fn all(ctx: &Context) -> Vec<Value> {
    ctx.priority_classes
        .all()
        .iter()
        .map(|c| (**c).clone())
        .collect()
}

/// One class by name: the followed copy, else the store (a class created
/// a moment ago may not have reached the copy yet).
async fn named(ctx: &Context<'_>, name: &str) -> Option<Value> {
    if let Some(c) = all(ctx)
        .into_iter()
        .find(|c| minik8s_api::meta::name(c) == name)
    {
        return Some(c);
    }
    let key = registry::of::<PriorityClass>().key(None, name);
    let kv = ctx.store.get(&key).await.ok()??;
    serde_json::from_slice(&kv.value).ok()
}

/// The Priority admission of a pod on create.
pub(super) async fn admit_pod(ctx: &Context<'_>, pod: &mut Value) -> Result<(), String> {
    let asked = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let class = match &asked {
        Some(name) => Some(
            self::named(ctx, name)
                .await
                .ok_or_else(|| format!("no PriorityClass with name {name} was found"))?,
        ),
        None => all(ctx).into_iter().find(|c| c["globalDefault"] == true),
    };
    let class = class.as_ref();
    let value = class.and_then(|c| c["value"].as_i64()).unwrap_or(0);
    if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64) {
        if given != value {
            return Err(format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ));
        }
    }
    let spec = &mut pod["spec"];
    spec["priority"] = json!(value);
    if let Some(c) = class {
        spec["priorityClassName"] = json!(minik8s_api::meta::name(c));
        let policy = c["preemptionPolicy"]
            .as_str()
            .unwrap_or("PreemptLowerPriority");
        spec["preemptionPolicy"] = json!(policy);
    }
    Ok(())
}

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    /// At most one default class.
    fn admit_create<'a>(
        &'a self,
        ctx: &'a Context<'a>,
        class: &'a mut Value,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if class["globalDefault"] != true {
                return Ok(());
            }
            match all(ctx).iter().find(|c| c["globalDefault"] == true) {
                Some(other) => Err(format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    minik8s_api::meta::name(other)
                )),
                None => Ok(()),
            }
        })
    }

    /// An update may not make a second default class either.
    fn admit(&self, ctx: &Context, class: &Value, old: Option<&Value>) -> Result<(), String> {
        if old.is_none() || class["globalDefault"] != true {
            return Ok(());
        }
        let name = minik8s_api::meta::name(class);
        match all(ctx)
            .iter()
            .find(|c| c["globalDefault"] == true && minik8s_api::meta::name(c) != name)
        {
            Some(other) => Err(format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                minik8s_api::meta::name(other)
            )),
            None => Ok(()),
        }
    }

    fn check_delete(&self, name: &str) -> Result<(), &'static str> {
        match name {
            "system-node-critical" => Err("the priority class system-node-critical is a system priority class and cannot be deleted"),
            "system-cluster-critical" => Err("the priority class system-cluster-critical is a system priority class and cannot be deleted"),
            _ => Ok(()),
        }
    }
}
