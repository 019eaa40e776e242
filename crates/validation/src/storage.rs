//! PersistentVolume, PersistentVolumeClaim (core/v1) and StorageClass
//! (storage.k8s.io/v1): Kubernetes' ValidatePersistentVolume,
//! ValidatePersistentVolumeClaim(Update) and ValidateStorageClass(Update),
//! with their messages and field paths, for the volume types minik8s serves.

use super::*;
use minik8s_api::quantity::Quantity;

/// The access modes Kubernetes knows, in its error message's order.
pub const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// The volume sources a PersistentVolume may name (the ones served here first).
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "local",
    "nfs",
    "csi",
    "iscsi",
    "fc",
    "rbd",
    "cephfs",
    "cinder",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "glusterfs",
    "flexVolume",
    "vsphereVolume",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "quobyte",
    "photonPersistentDisk",
    "flocker",
];

fn access_modes(spec: &Value, path: &str, errs: &mut Errors) {
    let modes: Vec<&Value> = spec
        .get("accessModes")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    if modes.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
        return;
    }
    for m in &modes {
        if !m.as_str().is_some_and(|s| ACCESS_MODES.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("{path}.accessModes"),
                m,
                ACCESS_MODES,
            ));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m.as_str() == Some("ReadWriteOncePod")) {
        errs.push(FieldError::forbidden(
            format!("{path}.accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

/// A storage size: a valid quantity above zero.
fn storage_size(value: Option<&Value>, path: &str, errs: &mut Errors) {
    let Some(v) = value else {
        return;
    };
    let text = v
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    // Quantities are shown as strings (a YAML 0 is the quantity "0").
    let v = &Value::from(text.as_str());
    match Quantity::parse(&text) {
        Err(e) => errs.push(FieldError::invalid(path, v, e.to_string())),
        Ok(q) if q.0 < 0.0 => errs.push(FieldError::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        )),
        Ok(q) if q.0 == 0.0 => errs.push(FieldError::invalid(path, v, "must be greater than zero")),
        Ok(_) => {}
    }
}

fn volume_mode(spec: &Value, path: &str, errs: &mut Errors) {
    if let Some(m) = spec.get("volumeMode").filter(|m| !m.is_null()) {
        if !matches!(m.as_str(), Some("Filesystem" | "Block")) {
            errs.push(FieldError::not_supported(
                format!("{path}.volumeMode"),
                m,
                &["Block", "Filesystem"],
            ));
        }
    }
}

fn class_name(spec: &Value, path: &str, errs: &mut Errors) {
    if let Some(name) = spec
        .get("storageClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        if let Some(msg) = name_error(NameRule::Subdomain, name) {
            errs.push(FieldError::invalid(
                format!("{path}.storageClassName"),
                &Value::from(name),
                msg,
            ));
        }
    }
}

fn absolute_path(v: &Value, field: &str, path: &str, errs: &mut Errors) {
    match v
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        None => errs.push(FieldError::required(format!("{path}.{field}"), "")),
        Some(p) if !p.starts_with('/') => errs.push(FieldError::invalid(
            format!("{path}.{field}"),
            &Value::from(p),
            "must be an absolute path",
        )),
        Some(p) if p.split('/').any(|e| e == "..") => errs.push(FieldError::invalid(
            format!("{path}.{field}"),
            &Value::from(p),
            "must not contain '..'",
        )),
        Some(_) => {}
    }
}

/// A pod template's spec as its pods will have it: each claim template of
/// `templates` (a StatefulSet's or LWS's `volumeClaimTemplates`) becomes a
/// volume of its name, so mounts of it are valid.
pub fn with_template_volumes(pod_spec: &Value, templates: Option<&Value>) -> Value {
    let mut spec = pod_spec.clone();
    let names: Vec<Value> = templates
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/metadata/name").cloned())
        .collect();
    if names.is_empty() || !spec.is_object() {
        return spec;
    }
    if !spec["volumes"].is_array() {
        spec["volumes"] = Value::Array(Vec::new());
    }
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.retain(|v| !names.contains(&v["name"]));
        for name in names {
            volumes.push(
                serde_json::json!({"name": name, "persistentVolumeClaim": {"claimName": name}}),
            );
        }
    }
    spec
}

/// ValidatePersistentVolume (and its update rules when `old` is given).
pub fn validate_pv(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match spec.get("capacity").and_then(Value::as_object) {
        None => errs.push(FieldError::required("spec.capacity", "")),
        Some(cap) if cap.is_empty() => errs.push(FieldError::required("spec.capacity", "")),
        Some(cap) => {
            for (k, v) in cap {
                if k != "storage" {
                    errs.push(FieldError::not_supported(
                        "spec.capacity",
                        &Value::from(k.as_str()),
                        &["storage"],
                    ));
                } else {
                    storage_size(Some(v), "spec.capacity[storage]", errs);
                }
            }
        }
    }
    access_modes(spec, "spec", errs);
    volume_mode(spec, "spec", errs);
    class_name(spec, "spec", errs);
    if let Some(p) = spec
        .get("persistentVolumeReclaimPolicy")
        .filter(|p| !p.is_null())
    {
        if !matches!(p.as_str(), Some("Delete" | "Recycle" | "Retain")) {
            errs.push(FieldError::not_supported(
                "spec.persistentVolumeReclaimPolicy",
                p,
                &["Delete", "Recycle", "Retain"],
            ));
        }
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|s| spec.get(*s).is_some_and(|v| !v.is_null()))
        .collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required("spec", "must specify a volume type")),
        [_, more @ ..] => {
            for s in more {
                errs.push(FieldError::forbidden(
                    format!("spec.{s}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    if let Some(hp) = spec.get("hostPath").filter(|v| !v.is_null()) {
        absolute_path(hp, "path", "spec.hostPath", errs);
    }
    if let Some(local) = spec.get("local").filter(|v| !v.is_null()) {
        absolute_path(local, "path", "spec.local", errs);
        if spec.get("nodeAffinity").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if let Some(nfs) = spec.get("nfs").filter(|v| !v.is_null()) {
        if nfs
            .get("server")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errs.push(FieldError::required("spec.nfs.server", ""));
        }
        absolute_path(nfs, "path", "spec.nfs", errs);
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        let source = |s: &Value| -> Vec<Value> {
            PV_SOURCES
                .iter()
                .map(|k| s.get(*k).cloned().unwrap_or(Value::Null))
                .collect()
        };
        if source(spec) != source(old_spec) {
            errs.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                "spec.persistentvolumesource is immutable after creation",
            ));
        }
        let old_affinity = old_spec.get("nodeAffinity").filter(|v| !v.is_null());
        if old_affinity.is_some() && old_affinity != spec.get("nodeAffinity") {
            errs.push(FieldError::forbidden(
                "spec.nodeAffinity",
                "field is immutable once set",
            ));
        }
        if spec.get("volumeMode") != old_spec.get("volumeMode") {
            errs.push(FieldError::invalid(
                "spec.volumeMode",
                spec.get("volumeMode").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

/// ValidatePersistentVolumeClaim (and its update rules when `old` is given).
pub fn validate_pvc(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    validate_claim_spec(spec, "spec", errs);
    if let Some(old) = old {
        validate_pvc_update(spec, old, errs);
    }
}

/// A claim's spec at `path` (a claim's own, or a StatefulSet's or
/// LeaderWorkerSet's claim template's).
pub fn validate_claim_spec(spec: &Value, path: &str, errs: &mut Errors) {
    access_modes(spec, path, errs);
    volume_mode(spec, path, errs);
    class_name(spec, path, errs);
    let requests = spec.pointer("/resources/requests/storage");
    if requests.is_none() {
        errs.push(FieldError::required(
            format!("{path}.resources[storage]"),
            "",
        ));
    }
    storage_size(
        requests,
        &format!("{path}.resources.requests[storage]"),
        errs,
    );
    storage_size(
        spec.pointer("/resources/limits/storage"),
        &format!("{path}.resources.limits[storage]"),
        errs,
    );
    if let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) {
        if serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>(
            sel.clone(),
        )
        .ok()
        .and_then(|ls| minik8s_api::selector::Selector::from_label_selector(&ls).ok())
        .is_none()
        {
            errs.push(FieldError::invalid(
                format!("{path}.selector"),
                sel,
                "invalid selector",
            ));
        }
    }
}

fn validate_pvc_update(spec: &Value, old: &Value, errs: &mut Errors) {
    let requests = spec.pointer("/resources/requests/storage");
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    // Only the size may change, of a bound claim; the binder fills volumeName
    // once, and a claim without a class may get the default one later.
    let comparable = |s: &Value, other: &Value| {
        let mut s = s.clone();
        if let Some(m) = s.as_object_mut() {
            if m.get("resources").is_some() {
                if let Some(r) = m.get_mut("resources").and_then(Value::as_object_mut) {
                    r.remove("requests");
                }
            }
            let unset = |k: &str| other.get(k).is_none_or(|v| v.is_null() || v == "");
            if unset("volumeName") {
                m.remove("volumeName");
            }
            if unset("storageClassName") {
                m.remove("storageClassName");
            }
        }
        s
    };
    let bound = old
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .is_some_and(|p| p == "Bound");
    let size_changed = requests != old_spec.pointer("/resources/requests/storage");
    if comparable(spec, old_spec) != comparable(old_spec, old_spec) || (size_changed && !bound) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
        return;
    }
    let size = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|s| Quantity::parse(s).ok())
            .map(|q| q.0)
    };
    if let (Some(new), Some(prev)) = (
        size(requests),
        size(old_spec.pointer("/resources/requests/storage")),
    ) {
        if new < prev {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        }
    }
}

/// ValidateStorageClass (and its update rules when `old` is given).
pub fn validate_storage_class(obj: &Value, old: Option<&Value>, errs: &mut Errors) {
    match obj.get("provisioner").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("provisioner", "")),
        Some(p) => {
            if p.len() > 63 {
                errs.push(FieldError::too_long("provisioner", 63));
            }
            let ok = p.split('/').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            });
            if !ok {
                errs.push(FieldError::invalid(
                    "provisioner",
                    &Value::from(p),
                    "a provisioner name must consist of alphanumeric characters, '-', '.', '_' and '/'",
                ));
            }
        }
    }
    if let Some(p) = obj.get("reclaimPolicy").filter(|v| !v.is_null()) {
        if !matches!(p.as_str(), Some("Delete" | "Retain")) {
            errs.push(FieldError::not_supported(
                "reclaimPolicy",
                p,
                &["Delete", "Retain"],
            ));
        }
    }
    match obj.get("volumeBindingMode").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(m) if !matches!(m.as_str(), Some("Immediate" | "WaitForFirstConsumer")) => {
            errs.push(FieldError::not_supported(
                "volumeBindingMode",
                m,
                &["Immediate", "WaitForFirstConsumer"],
            ))
        }
        Some(_) => {}
    }
    if let Some(old) = old {
        let same = |k: &str| obj.get(k) == old.get(k);
        if !same("parameters") {
            errs.push(FieldError::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        if !same("provisioner") {
            errs.push(FieldError::forbidden(
                "provisioner",
                "updates to provisioner are forbidden.",
            ));
        }
        if !same("reclaimPolicy") {
            errs.push(FieldError::forbidden(
                "reclaimPolicy",
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        if !same("volumeBindingMode") {
            errs.push(FieldError::invalid(
                "volumeBindingMode",
                obj.get("volumeBindingMode").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

/// A CSIStorageCapacity (what a CSI driver publishes of its free space per
/// topology segment): a valid storage class name, a valid node topology
/// selector, and non-negative quantities, as Kubernetes validates it.
pub fn validate_csi_storage_capacity(obj: &Value, errs: &mut Errors) {
    match obj.get("storageClassName").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("storageClassName", "")),
        Some(name) => {
            if let Some(msg) = minik8s_api::names::dns1123_subdomain_error(name) {
                errs.push(FieldError::invalid(
                    "storageClassName",
                    &serde_json::json!(name),
                    msg,
                ));
            }
        }
    }
    if let Some(sel) = obj.get("nodeTopology").filter(|v| !v.is_null()) {
        super::network_policy::selector_errors(sel, "nodeTopology", errs);
    }
    for field in ["capacity", "maximumVolumeSize"] {
        let Some(v) = obj.get(field).filter(|v| !v.is_null()) else {
            continue;
        };
        let text = v
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string());
        match minik8s_api::amount::Amount::parse(&text) {
            None => errs.push(FieldError::invalid(
                field,
                v,
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )),
            Some(a) if a.is_negative() => errs.push(FieldError::invalid(
                field,
                v,
                "must be greater than or equal to 0",
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    fn claim(size: &str, modes: Value) -> Value {
        json!({"spec": {"accessModes": modes, "resources": {"requests": {"storage": size}}}})
    }

    #[test]
    fn claims_need_modes_and_a_positive_size() {
        let mut errs = Vec::new();
        validate_pvc(&claim("1Gi", json!(["ReadWriteOnce"])), None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut errs = Vec::new();
        validate_pvc(&claim("0", json!([])), None, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources.requests[storage]: Invalid value: \"0\": must be greater than zero"
            ]
        );
        let mut errs = Vec::new();
        validate_pvc(&claim("lots", json!(["Sometimes"])), None, &mut errs);
        let m = messages(&errs);
        assert!(m[0].starts_with("spec.accessModes: Unsupported value: \"Sometimes\""));
        assert!(m[1].starts_with(
            "spec.resources.requests[storage]: Invalid value: \"lots\": quantities must match"
        ));
    }

    #[test]
    fn a_bound_claim_may_only_grow() {
        let mut old = claim("1Gi", json!(["ReadWriteOnce"]));
        old["status"] = json!({"phase": "Bound"});
        let mut errs = Vec::new();
        validate_pvc(
            &claim("2Gi", json!(["ReadWriteOnce"])),
            Some(&old),
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        validate_pvc(
            &claim("512Mi", json!(["ReadWriteOnce"])),
            Some(&old),
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            ["spec.resources.requests.storage: Forbidden: field can not be less than previous value"]
        );
        let mut errs = Vec::new();
        validate_pvc(
            &claim("1Gi", json!(["ReadWriteMany"])),
            Some(&old),
            &mut errs,
        );
        assert!(messages(&errs)[0].starts_with("spec: Forbidden: spec is immutable"));
        // The binder's volumeName is allowed once.
        let mut bound = claim("1Gi", json!(["ReadWriteOnce"]));
        bound["spec"]["volumeName"] = json!("pv1");
        let mut errs = Vec::new();
        validate_pvc(&bound, Some(&old), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn volumes_need_one_source_and_local_ones_a_node() {
        let mut errs = Vec::new();
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "local": {"path": "/mnt/disk"}}});
        validate_pv(&pv, None, &mut errs);
        assert_eq!(
            messages(&errs),
            ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
        );
        let mut errs = Vec::new();
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "hostPath": {"path": "/a"}, "nfs": {"server": "x", "path": "/b"}}});
        validate_pv(&pv, None, &mut errs);
        assert_eq!(
            messages(&errs),
            ["spec.nfs: Forbidden: may not specify more than 1 volume type"]
        );
    }

    #[test]
    fn storage_classes_are_immutable_but_for_expansion() {
        let sc = json!({"provisioner": "minik8s.io/local-path", "reclaimPolicy": "Delete",
                        "volumeBindingMode": "WaitForFirstConsumer"});
        let mut errs = Vec::new();
        validate_storage_class(&sc, None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut grown = sc.clone();
        grown["allowVolumeExpansion"] = json!(true);
        validate_storage_class(&grown, Some(&sc), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        grown["reclaimPolicy"] = json!("Retain");
        validate_storage_class(&grown, Some(&sc), &mut errs);
        assert_eq!(
            messages(&errs),
            ["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."]
        );
    }

    #[test]
    fn csi_storage_capacities_name_a_class_and_hold_quantities() {
        let check = |obj: Value| {
            let mut errs = Vec::new();
            validate_csi_storage_capacity(&obj, &mut errs);
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        assert!(check(json!({"storageClassName": "fast", "capacity": "10Gi",
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "a"}}}))
        .is_empty());
        assert_eq!(check(json!({})), ["storageClassName: Required value"]);
        assert_eq!(
            check(json!({"storageClassName": "fast", "capacity": "-1Gi"})),
            ["capacity: Invalid value: \"-1Gi\": must be greater than or equal to 0"]
        );
    }
}
