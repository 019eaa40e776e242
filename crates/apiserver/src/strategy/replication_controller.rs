//! ReplicationController: its selector is a plain label map, which the
//! `scale` view shows as a selector string.

use serde_json::Value;

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn scale_selector(&self, obj: &Value) -> String {
        obj.pointer("/spec/selector")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    }
}
