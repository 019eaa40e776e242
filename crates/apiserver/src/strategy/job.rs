//! Job: unless `manualSelector` is set, the server picks the selector (the
//! Job's own uid) and labels the pod template to match, as Kubernetes' Job
//! strategy does, so two Jobs never claim each other's pods.

use minik8s_validation::FieldError;
use serde_json::{json, Value};

pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn prepare_for_create(&self, _ctx: &super::Context, job: &mut Value) -> Result<(), FieldError> {
        if job.pointer("/spec/manualSelector") == Some(&Value::Bool(true)) {
            return Ok(());
        }
        let uid = job.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
        let name = job
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null);
        let generated = json!({"matchLabels": {CONTROLLER_UID: uid}});
        match job.pointer("/spec/selector").filter(|s| !s.is_null()) {
            Some(given) if *given != generated => {
                return Err(FieldError::invalid(
                    "spec.selector",
                    given,
                    "`selector` will be auto-generated",
                ))
            }
            _ => {}
        }
        let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        spec.insert("selector".into(), generated);
        let template = spec.entry("template").or_insert(json!({}));
        if !template["metadata"].is_object() {
            template["metadata"] = json!({});
        }
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        let labels = &mut template["metadata"]["labels"];
        for (k, v) in [
            (CONTROLLER_UID, &uid),
            ("controller-uid", &uid),
            (JOB_NAME, &name),
            ("job-name", &name),
        ] {
            labels[k] = v.clone();
        }
        Ok(())
    }
}
