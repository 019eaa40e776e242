//! admissionregistration.k8s.io/v1 kinds: webhook configurations,
//! Validating- and MutatingAdmissionPolicies with their bindings (defaults and rules from
//! `minik8s_validation::admission`; what they do is in `admission/`).

use minik8s_validation::{self as validation, Errors};
use serde_json::Value;

/// MutatingWebhookConfiguration.
pub struct Mutating;
/// ValidatingWebhookConfiguration.
pub struct Validating;
/// ValidatingAdmissionPolicy.
pub struct Policy;
/// ValidatingAdmissionPolicyBinding.
pub struct Binding;
/// MutatingAdmissionPolicy.
pub struct MutatingPolicy;
/// MutatingAdmissionPolicyBinding.
pub struct MutatingBinding;

impl super::Strategy for MutatingPolicy {
    fn default(&self, obj: &mut Value) {
        validation::default_mutating_policy(obj);
    }
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_mutating_policy(obj)
    }
}

impl super::Strategy for MutatingBinding {
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_mutating_binding(obj)
    }
}

impl super::Strategy for Mutating {
    fn default(&self, obj: &mut Value) {
        validation::default_webhooks(obj, true);
    }
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_webhook_configuration(obj, true)
    }
}

impl super::Strategy for Validating {
    fn default(&self, obj: &mut Value) {
        validation::default_webhooks(obj, false);
    }
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_webhook_configuration(obj, false)
    }
}

impl super::Strategy for Policy {
    fn default(&self, obj: &mut Value) {
        validation::default_policy(obj);
    }
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_policy(obj)
    }
}

impl super::Strategy for Binding {
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Errors {
        validation::validate_binding(obj)
    }
}
