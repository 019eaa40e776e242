//! Deployment: a write to its status keeps its labels (Kubernetes' status
//! strategy resets `metadata.labels` with the spec), so a controller's status
//! update cannot change which ReplicaSets select it.

use serde_json::Value;

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        match old.pointer("/metadata/labels") {
            Some(labels) => meta.insert("labels".into(), labels.clone()),
            None => meta.remove("labels"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::Strategy;
    use serde_json::json;

    #[test]
    fn a_status_write_keeps_the_labels() {
        let old = json!({"metadata": {"labels": {"app": "web"}}});
        let mut new = json!({"metadata": {"labels": {"app": "other"}, "annotations": {"a": "b"}}});
        super::Lifecycle.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(new["metadata"]["annotations"], json!({"a": "b"}));
    }
}
