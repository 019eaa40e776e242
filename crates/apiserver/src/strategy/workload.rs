//! The Workload API (`scheduling.k8s.io/v1beta1`): Workload and PodGroup,
//! validated as Kubernetes 1.37 validates them
//! (`minik8s_validation::scheduling`). The scheduler gangs a PodGroup's
//! pods; a Workload is the template its controller copies PodGroups from.

use minik8s_validation::{scheduling, Errors};
use serde_json::Value;

pub struct Workload;

impl super::Strategy for Workload {
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        let mut errs = Vec::new();
        scheduling::validate_workload(obj, old, &mut errs);
        errs
    }
}

pub struct PodGroup;

impl super::Strategy for PodGroup {
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        let mut errs = Vec::new();
        scheduling::validate_pod_group(obj, old, &mut errs);
        errs
    }
}
