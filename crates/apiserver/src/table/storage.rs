//! Table cells of the storage kinds: PersistentVolume, PersistentVolumeClaim
//! and StorageClass, as kubectl's printers lay them out.

use super::{age, arr};
use minik8s_api::meta::is_deleting;
use serde_json::{json, Value};

/// `RWO,ROX,RWX,RWOP`: the modes in kubectl's fixed order, each once.
fn access_modes(o: &Value, pointer: &str) -> String {
    let modes: Vec<&str> = arr(o, pointer).iter().filter_map(Value::as_str).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// A string field as kubectl's storage printers show it: empty when unset.
fn s(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("").to_string()
}

fn phase(o: &Value) -> String {
    if is_deleting(o) {
        return "Terminating".into();
    }
    s(o.pointer("/status/phase"))
}

fn volume_mode(o: &Value) -> String {
    o.pointer("/spec/volumeMode")
        .and_then(Value::as_str)
        .unwrap_or("Filesystem")
        .to_string()
}

/// PersistentVolume: capacity, modes, reclaim policy, phase, its claim.
pub fn persistent_volume(o: &Value) -> Vec<Value> {
    let claim = o
        .pointer("/spec/claimRef")
        .map(|c| format!("{}/{}", s(c.get("namespace")), s(c.get("name"))));
    vec![
        json!(s(o.pointer("/spec/capacity/storage"))),
        json!(access_modes(o, "/spec/accessModes")),
        json!(s(o.pointer("/spec/persistentVolumeReclaimPolicy"))),
        json!(phase(o)),
        json!(claim.unwrap_or_default()),
        json!(s(o.pointer("/spec/storageClassName"))),
        json!(o
            .pointer("/spec/volumeAttributesClassName")
            .and_then(Value::as_str)
            .unwrap_or("<unset>")),
        json!(s(o.pointer("/status/reason"))),
        json!(age(o)),
        json!(volume_mode(o)),
    ]
}

/// PersistentVolumeClaim: phase, volume, and what the bound volume gives.
pub fn persistent_volume_claim(o: &Value) -> Vec<Value> {
    vec![
        json!(phase(o)),
        json!(s(o.pointer("/spec/volumeName"))),
        json!(s(o.pointer("/status/capacity/storage"))),
        json!(access_modes(o, "/status/accessModes")),
        json!(s(o.pointer("/spec/storageClassName"))),
        json!(o
            .pointer("/spec/volumeAttributesClassName")
            .and_then(Value::as_str)
            .unwrap_or("<unset>")),
        json!(age(o)),
        json!(volume_mode(o)),
    ]
}

/// The annotation that makes a StorageClass the default one.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// CSIStorageCapacity: STORAGECLASSNAME, CAPACITY (`<unset>` when the driver
/// does not say), as kubectl's printer.
pub fn csi_storage_capacity(o: &Value) -> Vec<Value> {
    let capacity = match o.get("capacity") {
        Some(Value::String(c)) => c.clone(),
        _ => "<unset>".into(),
    };
    vec![json!(s(o.get("storageClassName"))), json!(capacity)]
}

/// StorageClass: the name (marked `(default)`), provisioner and policies.
pub fn storage_class(o: &Value) -> Vec<Value> {
    let mut name = s(o.pointer("/metadata/name"));
    if is_default_class(o) {
        name.push_str(" (default)");
    }
    vec![
        json!(name),
        json!(s(o.get("provisioner"))),
        json!(o
            .get("reclaimPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Delete")),
        json!(o
            .get("volumeBindingMode")
            .and_then(Value::as_str)
            .unwrap_or("Immediate")),
        json!(o
            .get("allowVolumeExpansion")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
        json!(age(o)),
    ]
}

/// `storageclass.kubernetes.io/is-default-class: "true"` (or the beta annotation).
pub fn is_default_class(o: &Value) -> bool {
    let a = |k: &str| {
        o.pointer("/metadata/annotations")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            == Some("true")
    };
    a(DEFAULT_CLASS_ANNOTATION) || a("storageclass.beta.kubernetes.io/is-default-class")
}
