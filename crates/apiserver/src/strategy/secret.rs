//! Secret: `stringData` is a write-only convenience. Its values are merged
//! into `data` (base64, overriding keys of the same name) before validation
//! and storage, as Kubernetes' v1 conversion does; it is never stored.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use serde_json::Value;

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn default(&self, obj: &mut Value) {
        if obj.get("stringData").is_none_or(Value::is_null) {
            return;
        }
        let Ok(mut secret) = serde_json::from_value::<Secret>(obj.clone()) else {
            return;
        };
        let strings = secret.string_data.take().unwrap_or_default();
        let data = secret.data.get_or_insert_with(Default::default);
        for (k, v) in strings {
            data.insert(k, ByteString(v.into_bytes()));
        }
        if let Ok(v) = serde_json::to_value(&secret) {
            *obj = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Strategy;
    use serde_json::json;

    #[test]
    fn string_data_lands_in_data_as_base64() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                           "data": {"user": "b2xk", "keep": "eA=="}, "stringData": {"user": "admin"}});
        super::Lifecycle.default(&mut s);
        assert_eq!(s["data"]["user"], "YWRtaW4=", "stringData wins");
        assert_eq!(s["data"]["keep"], "eA==");
        assert!(s.get("stringData").is_none());
    }
}
