//! minik8s' serverless kinds (`serverless.minik8s.io/v1alpha1`): Function,
//! Workflow and WorkflowRun, built in but served as custom resources are (no
//! strategic merge patch). A Workflow's functions and a run's Workflow must
//! exist when they are written (422 `NotFound` with the field path).

use super::Reference;
use minik8s_api::registry;
use minik8s_api::serverless;
use minik8s_api::workflow;
use minik8s_validation::Errors;
use serde_json::{json, Value};

pub struct Function;

impl super::Strategy for Function {
    fn default(&self, obj: &mut Value) {
        minik8s_api::serverless::default(obj);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        minik8s_validation::serverless::validate_function(obj)
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }
}

pub struct Workflow;

impl super::Strategy for Workflow {
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        minik8s_validation::workflow::validate_workflow(obj)
    }

    /// Every step's function exists (checked when the steps change).
    fn references(&self, obj: &Value, old: Option<&Value>) -> Vec<Reference> {
        if old.is_some_and(|old| old.get("spec") == obj.get("spec")) {
            return Vec::new();
        }
        let spec = obj.get("spec").cloned().unwrap_or(json!({}));
        workflow::functions(&spec)
            .into_iter()
            .map(|(i, f)| Reference {
                field: format!("spec.steps[{i}].function"),
                info: registry::of::<serverless::Function>(),
                name: f,
            })
            .collect()
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }
}

pub struct WorkflowRun;

impl super::Strategy for WorkflowRun {
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        minik8s_validation::workflow::validate_run(obj, old)
    }

    /// The Workflow exists when the run is made (it may go later: the run then fails).
    fn references(&self, obj: &Value, old: Option<&Value>) -> Vec<Reference> {
        match obj.pointer("/spec/workflow").and_then(Value::as_str) {
            Some(w) if old.is_none() && !w.is_empty() => vec![Reference {
                field: "spec.workflow".into(),
                info: registry::of::<workflow::Workflow>(),
                name: w.to_string(),
            }],
            _ => Vec::new(),
        }
    }

    /// A run is labelled with its Workflow, so `kubectl get wfr -l` finds a workflow's runs.
    fn default(&self, obj: &mut Value) {
        let Some(w) = obj
            .pointer("/spec/workflow")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            let labels = meta.entry("labels").or_insert(json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.entry(workflow::WORKFLOW_LABEL).or_insert(json!(w));
            }
        }
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }
}
