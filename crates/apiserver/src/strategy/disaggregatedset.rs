//! DisaggregatedSet and DisaggregatedSetRoleScaler: upstream's CRD defaults
//! and webhook validation (`minik8s_api::disaggregatedset`,
//! `minik8s_validation::disaggregatedset`), served as the upstream CRDs
//! are (no strategic merge patch; object names are DNS subdomains); and
//! Volcano's PodGroup (`minik8s_api::podgroup`), built in for gang scheduling.

use minik8s_api::disaggregatedset as ds;
use minik8s_validation::disaggregatedset as rules;
use minik8s_validation::Errors;
use serde_json::Value;

pub struct Set;

impl super::Strategy for Set {
    fn default(&self, obj: &mut Value) {
        ds::default(obj);
    }

    /// The CRD schema's rules, on the object as sent; the webhook's run on
    /// the typed object (the kind's `KindRules`).
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        rules::validate_schema(obj)
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        rules::warnings(obj)
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }
}

pub struct RoleScaler;

impl super::Strategy for RoleScaler {
    fn default(&self, obj: &mut Value) {
        ds::default_scaler(obj);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        rules::validate_scaler(obj)
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }

    /// The scale subresource's selector is `.status.selector`.
    fn scale_selector(&self, obj: &Value) -> String {
        obj.pointer("/status/selector")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
}

/// Volcano's PodGroup, served as its CRD is.
pub struct PodGroup;

impl super::Strategy for PodGroup {
    fn served_as_custom_resource(&self) -> bool {
        true
    }
}
