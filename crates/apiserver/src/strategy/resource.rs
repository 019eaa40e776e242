//! Dynamic Resource Allocation kinds (`resource.k8s.io/v1`), as Kubernetes'
//! `pkg/registry/resource/*/strategy.go`: a claim's requests are defaulted
//! (one device, `ExactCount`), the DeviceClasses a claim or template names
//! must exist (a 422 naming the field, rather than a pod that never
//! schedules), and `adminAccess` needs a namespace labelled for it.

use super::Context;
use super::Reference;
use k8s_openapi::api::resource::v1::DeviceClass;
use minik8s_api::dra::ADMIN_ACCESS_LABEL;
use minik8s_api::registry;
use serde_json::{json, Value};

/// Each request (and subrequest) asks for one device unless it says otherwise.
fn default_requests(devices: Option<&mut Value>) {
    let Some(requests) = devices
        .and_then(|d| d.get_mut("requests"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let default_one = |r: &mut Value| {
        if !r.is_object() {
            return;
        }
        if r.get("allocationMode").is_none_or(Value::is_null) {
            r["allocationMode"] = json!("ExactCount");
        }
        if r["allocationMode"] == "ExactCount" && r.get("count").is_none_or(Value::is_null) {
            r["count"] = json!(1);
        }
        for t in r
            .get_mut("tolerations")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if t.get("operator").is_none_or(Value::is_null) {
                t["operator"] = json!("Equal");
            }
        }
    };
    for r in requests {
        if let Some(exactly) = r.get_mut("exactly") {
            default_one(exactly);
        }
        for sub in r
            .get_mut("firstAvailable")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            default_one(sub);
        }
    }
}

/// The DeviceClasses the requests under `prefix` (`spec` or `spec.spec`) name.
fn class_references(devices: Option<&Value>, prefix: &str) -> Vec<Reference> {
    let mut refs = Vec::new();
    let requests = devices
        .and_then(|d| d.get("requests"))
        .and_then(Value::as_array);
    let class_ref = |field: String, name: &str| Reference {
        field,
        info: registry::of::<DeviceClass>(),
        name: name.to_string(),
    };
    for (i, r) in requests.into_iter().flatten().enumerate() {
        let at = format!("{prefix}.devices.requests[{i}]");
        if let Some(c) = r
            .pointer("/exactly/deviceClassName")
            .and_then(Value::as_str)
        {
            refs.push(class_ref(format!("{at}.exactly.deviceClassName"), c));
        }
        let subs = r.get("firstAvailable").and_then(Value::as_array);
        for (j, s) in subs.into_iter().flatten().enumerate() {
            if let Some(c) = s.get("deviceClassName").and_then(Value::as_str) {
                refs.push(class_ref(
                    format!("{at}.firstAvailable[{j}].deviceClassName"),
                    c,
                ));
            }
        }
    }
    refs.retain(|r| !r.name.is_empty());
    refs
}

/// Does any request ask for admin access?
fn asks_admin_access(devices: Option<&Value>) -> bool {
    devices
        .and_then(|d| d.get("requests"))
        .and_then(Value::as_array)
        .is_some_and(|rs| {
            rs.iter()
                .any(|r| r.pointer("/exactly/adminAccess") == Some(&json!(true)))
        })
}

/// Kubernetes' check for `adminAccess`: the namespace must allow it.
fn admit_admin_access(ctx: &Context, obj: &Value, devices: Option<&Value>) -> Result<(), String> {
    if !asks_admin_access(devices) {
        return Ok(());
    }
    let ns = minik8s_api::meta::namespace(obj).unwrap_or("default");
    let labelled = ctx
        .namespaces
        .labels(ns)
        .is_some_and(|l| l.get(ADMIN_ACCESS_LABEL).and_then(Value::as_str) == Some("true"));
    if labelled {
        Ok(())
    } else {
        Err(format!(
            "admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
        ))
    }
}

/// A kind holding a claim spec: a ResourceClaim (`spec`) or a
/// ResourceClaimTemplate (`spec.spec`); `devices` points at its `devices`,
/// `path` names the spec in field errors.
pub struct ClaimSpec {
    devices: &'static str,
    path: &'static str,
}

pub const CLAIM: ClaimSpec = ClaimSpec {
    devices: "/spec/devices",
    path: "spec",
};
pub const TEMPLATE: ClaimSpec = ClaimSpec {
    devices: "/spec/spec/devices",
    path: "spec.spec",
};

impl super::Strategy for ClaimSpec {
    fn default(&self, obj: &mut Value) {
        default_requests(obj.pointer_mut(self.devices));
    }
    fn references(&self, obj: &Value, old: Option<&Value>) -> Vec<Reference> {
        // The spec is immutable: its classes are checked once, at creation.
        match old {
            None => class_references(obj.pointer(self.devices), self.path),
            Some(_) => Vec::new(),
        }
    }
    fn admit(&self, ctx: &Context, obj: &Value, old: Option<&Value>) -> Result<(), String> {
        match old {
            None => admit_admin_access(ctx, obj, obj.pointer(self.devices)),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_default_to_one_device_and_name_their_classes() {
        let mut claim = json!({"spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu"}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "c", "firstAvailable": [{"name": "big", "deviceClassName": "big-gpu"}]}]}}});
        default_requests(claim.pointer_mut("/spec/devices"));
        assert_eq!(
            claim.pointer("/spec/devices/requests/0/exactly/count"),
            Some(&json!(1))
        );
        assert_eq!(
            claim.pointer("/spec/devices/requests/0/exactly/allocationMode"),
            Some(&json!("ExactCount"))
        );
        assert_eq!(
            claim.pointer("/spec/devices/requests/1/exactly/count"),
            None
        );
        assert_eq!(
            claim.pointer("/spec/devices/requests/2/firstAvailable/0/count"),
            Some(&json!(1))
        );
        let refs: Vec<(String, String)> = class_references(claim.pointer("/spec/devices"), "spec")
            .into_iter()
            .map(|r| (r.field, r.name))
            .collect();
        assert_eq!(
            refs,
            [
                (
                    "spec.devices.requests[0].exactly.deviceClassName".to_string(),
                    "gpu".to_string()
                ),
                (
                    "spec.devices.requests[1].exactly.deviceClassName".into(),
                    "gpu".into()
                ),
                (
                    "spec.devices.requests[2].firstAvailable[0].deviceClassName".into(),
                    "big-gpu".into()
                ),
            ]
        );
    }
}
