//! CustomResourceDefinition: Kubernetes' defaults and rules for the
//! definition itself (`minik8s_validation::crd`), and its deletion: the
//! first DELETE adds the `customresourcecleanup.apiextensions.k8s.io`
//! finalizer and the Terminating condition; the CRD controller (`crd.rs`)
//! deletes every object of the kind, then removes the finalizer.

use minik8s_api::meta::now_rfc3339;
use minik8s_validation::{self as validation, Errors};
use serde_json::{json, Value};

/// The finalizer that holds a deleted CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn default(&self, obj: &mut Value) {
        validation::default_crd(obj);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        validation::validate_crd(obj, old)
    }

    fn two_phase_delete(&self) -> bool {
        true
    }

    fn mark_deleting(&self, obj: &mut Value) {
        let m = minik8s_api::meta::metadata_mut(obj);
        let fin = m.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = fin.as_array_mut() {
            if !list.iter().any(|f| f == CLEANUP_FINALIZER) {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
        set_condition(
            obj,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; instance deletion pending",
        );
    }

    fn finalizers_pending(&self, obj: &Value) -> bool {
        minik8s_api::meta::finalizers(obj)
            .iter()
            .any(|f| f == CLEANUP_FINALIZER)
    }
}

/// Sets one status condition, keeping its transition time when its status is unchanged.
pub fn set_condition(obj: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let conds = obj["status"]
        .as_object_mut()
        .expect("status is an object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("conditions is a list");
    let now = now_rfc3339();
    match list.iter_mut().find(|c| c["type"] == kind) {
        Some(c) => {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        None => list.push(json!({"type": kind, "status": status, "reason": reason,
                                 "message": message, "lastTransitionTime": now})),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Strategy;
    use super::*;

    #[test]
    fn deleting_a_crd_waits_for_its_objects() {
        let mut crd = json!({"metadata": {"name": "as.x.io"}, "status": {"conditions": [
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": ""}]}});
        assert!(!Lifecycle.finalizers_pending(&crd));
        Lifecycle.mark_deleting(&mut crd);
        assert!(Lifecycle.finalizers_pending(&crd));
        assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        let conds = crd["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[1]["type"], "Terminating");
        assert_eq!(conds[1]["reason"], "InstanceDeletionPending");
    }
}
