//! PersistentVolumeClaim and PersistentVolume: what Kubernetes' admission
//! plugins add on the write path. A new claim gets the default StorageClass
//! (DefaultStorageClass) and, like a new volume, its protection finalizer
//! (StorageObjectInUseProtection), so neither is removed while in use; a
//! claim grows only where its class allows expansion
//! (PersistentVolumeClaimResize).

use super::Context;
use crate::table::storage::is_default_class;
use minik8s_api::quantity::Quantity;
use minik8s_validation::FieldError;
use serde_json::{json, Value};

/// Keeps a claim while a pod uses it (removed by the controller manager).
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// Keeps a volume while it is bound to a claim.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let meta = &mut obj["metadata"];
    if !meta["finalizers"].is_array() {
        meta["finalizers"] = json!([]);
    }
    if let Some(list) = meta["finalizers"].as_array_mut() {
        if !list.iter().any(|f| f == finalizer) {
            list.push(json!(finalizer));
        }
    }
}

/// The default StorageClass's name: the newest class marked default, as
/// Kubernetes picks when several are.
pub fn default_class(ctx: &Context) -> Option<String> {
    ctx.storage_classes
        .all()
        .into_iter()
        .filter(|c| is_default_class(c))
        .max_by(|a, b| {
            let created = |o: &Value| {
                o.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            created(a)
                .cmp(&created(b))
                .then_with(|| minik8s_api::meta::name(b).cmp(minik8s_api::meta::name(a)))
        })
        .map(|c| minik8s_api::meta::name(&c).to_string())
}

pub struct Claim;

impl super::Strategy for Claim {
    fn prepare_for_create(&self, ctx: &Context, obj: &mut Value) -> Result<(), FieldError> {
        // Unset (not "") takes the default class; "" asks for no class.
        if obj
            .pointer("/spec/storageClassName")
            .is_none_or(Value::is_null)
        {
            if let Some(class) = default_class(ctx) {
                obj["spec"]["storageClassName"] = json!(class);
            }
        }
        add_finalizer(obj, PVC_PROTECTION);
        obj["status"] = json!({"phase": "Pending"});
        Ok(())
    }

    fn admit(&self, ctx: &Context, obj: &Value, old: Option<&Value>) -> Result<(), String> {
        let Some(old) = old else {
            return Ok(());
        };
        let size = |o: &Value| {
            o.pointer("/spec/resources/requests/storage")
                .and_then(Value::as_str)
                .and_then(|s| Quantity::parse(s).ok())
                .map(|q| q.0)
                .unwrap_or(0.0)
        };
        if size(obj) <= size(old) {
            return Ok(());
        }
        let class = obj
            .pointer("/spec/storageClassName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let expandable = ctx.storage_classes.all().iter().any(|c| {
            minik8s_api::meta::name(c) == class
                && c.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true)
        });
        if expandable {
            Ok(())
        } else {
            Err("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize".into())
        }
    }
}

pub struct Volume;

impl super::Strategy for Volume {
    fn prepare_for_create(&self, _ctx: &Context, obj: &mut Value) -> Result<(), FieldError> {
        add_finalizer(obj, PV_PROTECTION);
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": minik8s_api::meta::now_rfc3339()});
        Ok(())
    }
}
