//! Namespace: created Active; deleting one marks it Terminating (always, even
//! without finalizers) until the namespace controller has emptied it and
//! cleared `spec.finalizers` through `namespaces/{name}/finalize`; the system
//! namespaces cannot be deleted.

use super::Context;
use minik8s_validation::{FieldError, NameRule};
use serde_json::{json, Value};

pub struct Lifecycle;

const PROTECTED: [&str; 3] = ["default", "kube-system", "kube-public"];

impl super::Strategy for Lifecycle {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn prepare_for_create(&self, _ctx: &Context, obj: &mut Value) -> Result<(), FieldError> {
        obj["status"] = json!({"phase": "Active"});
        Ok(())
    }

    fn delete_collection(&self) -> bool {
        false
    }

    fn check_delete(&self, name: &str) -> Result<(), &'static str> {
        if PROTECTED.contains(&name) {
            return Err("this namespace may not be deleted");
        }
        Ok(())
    }

    fn two_phase_delete(&self) -> bool {
        true
    }

    fn mark_deleting(&self, obj: &mut Value) {
        obj["status"]["phase"] = json!("Terminating");
    }

    fn deletion_started(&self, ctx: &Context, name: &str) {
        // Refuse new content at once, before the watch cache hears of it.
        // (The controller manager's namespace controller empties it.)
        ctx.namespaces.set(name, true);
    }

    fn finalizers_pending(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }

    fn extra_subresources(&self) -> &'static [&'static str] {
        &["finalize"]
    }
}
