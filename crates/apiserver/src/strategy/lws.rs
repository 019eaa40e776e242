//! LeaderWorkerSet: upstream's defaults and validation (`minik8s_validation::lws`,
//! the kind's `KindRules`, run on the typed object), served with the
//! upstream CRD's behaviour (no strategic merge patch; the `Scale` selector
//! is the status' `hpaPodSelector`).

use minik8s_validation::NameRule;
use serde_json::Value;

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035
    }

    fn served_as_custom_resource(&self) -> bool {
        true
    }

    fn scale_selector(&self, obj: &Value) -> String {
        obj.pointer("/status/hpaPodSelector")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
}
