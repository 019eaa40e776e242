//! PersistentVolume, PersistentVolumeClaim (core/v1) and StorageClass,
//! CSIStorageCapacity (storage.k8s.io/v1): Kubernetes'
//! ValidatePersistentVolume, ValidatePersistentVolumeClaim(Update),
//! ValidateStorageClass(Update) and ValidateCSIStorageCapacity, with their
//! messages and field paths, on the typed objects.

use super::*;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use minik8s_api::quantity::Quantity;
use serde_json::json;

/// The access modes Kubernetes knows, in its error message's order.
pub const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// The volume sources a PersistentVolume names, by their field names (the
/// ones served here first), with whether `spec` sets each.
fn sources(spec: &PersistentVolumeSpec) -> [(&'static str, bool); 22] {
    [
        ("hostPath", spec.host_path.is_some()),
        ("local", spec.local.is_some()),
        ("nfs", spec.nfs.is_some()),
        ("csi", spec.csi.is_some()),
        ("iscsi", spec.iscsi.is_some()),
        ("fc", spec.fc.is_some()),
        ("rbd", spec.rbd.is_some()),
        ("cephfs", spec.cephfs.is_some()),
        ("cinder", spec.cinder.is_some()),
        ("gcePersistentDisk", spec.gce_persistent_disk.is_some()),
        (
            "awsElasticBlockStore",
            spec.aws_elastic_block_store.is_some(),
        ),
        ("azureDisk", spec.azure_disk.is_some()),
        ("azureFile", spec.azure_file.is_some()),
        ("glusterfs", spec.glusterfs.is_some()),
        ("flexVolume", spec.flex_volume.is_some()),
        ("vsphereVolume", spec.vsphere_volume.is_some()),
        ("portworxVolume", spec.portworx_volume.is_some()),
        ("scaleIO", spec.scale_io.is_some()),
        ("storageos", spec.storageos.is_some()),
        ("quobyte", spec.quobyte.is_some()),
        (
            "photonPersistentDisk",
            spec.photon_persistent_disk.is_some(),
        ),
        ("flocker", spec.flocker.is_some()),
    ]
}

/// The volume source of a PersistentVolume, which no update may change: the
/// spec with everything else left out.
fn source_only(spec: &PersistentVolumeSpec) -> PersistentVolumeSpec {
    PersistentVolumeSpec {
        access_modes: None,
        capacity: None,
        claim_ref: None,
        mount_options: None,
        node_affinity: None,
        persistent_volume_reclaim_policy: None,
        storage_class_name: None,
        volume_attributes_class_name: None,
        volume_mode: None,
        ..spec.clone()
    }
}

fn access_modes(modes: Option<&[String]>, path: &str, errs: &mut Errors) {
    let modes = modes.unwrap_or_default();
    if modes.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
        return;
    }
    for m in modes {
        if !ACCESS_MODES.contains(&m.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{path}.accessModes"),
                &json!(m),
                ACCESS_MODES,
            ));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        errs.push(FieldError::forbidden(
            format!("{path}.accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

/// A storage size: a valid quantity above zero.
fn storage_size(value: Option<&ApiQuantity>, path: &str, errs: &mut Errors) {
    let Some(ApiQuantity(text)) = value else {
        return;
    };
    let v = &json!(text);
    match Quantity::parse(text) {
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

fn volume_mode(mode: Option<&str>, path: &str, errs: &mut Errors) {
    if let Some(m) = mode {
        if !matches!(m, "Filesystem" | "Block") {
            errs.push(FieldError::not_supported(
                format!("{path}.volumeMode"),
                &json!(m),
                &["Block", "Filesystem"],
            ));
        }
    }
}

fn class_name(name: Option<&str>, path: &str, errs: &mut Errors) {
    if let Some(name) = name.filter(|s| !s.is_empty()) {
        if let Some(msg) = name_error(NameRule::Subdomain, name) {
            errs.push(FieldError::invalid(
                format!("{path}.storageClassName"),
                &json!(name),
                msg,
            ));
        }
    }
}

fn absolute_path(value: &str, path: &str, errs: &mut Errors) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !value.starts_with('/') {
        errs.push(FieldError::invalid(
            path,
            &json!(value),
            "must be an absolute path",
        ));
    } else if value.split('/').any(|e| e == "..") {
        errs.push(FieldError::invalid(
            path,
            &json!(value),
            "must not contain '..'",
        ));
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
pub fn validate_pv(pv: &PersistentVolume, old: Option<&PersistentVolume>, errs: &mut Errors) {
    let empty = PersistentVolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&empty);
    match spec.capacity.as_ref().filter(|c| !c.is_empty()) {
        None => errs.push(FieldError::required("spec.capacity", "")),
        Some(cap) => {
            for (k, v) in cap {
                if k != "storage" {
                    errs.push(FieldError::not_supported(
                        "spec.capacity",
                        &json!(k),
                        &["storage"],
                    ));
                } else {
                    storage_size(Some(v), "spec.capacity[storage]", errs);
                }
            }
        }
    }
    access_modes(spec.access_modes.as_deref(), "spec", errs);
    volume_mode(spec.volume_mode.as_deref(), "spec", errs);
    class_name(spec.storage_class_name.as_deref(), "spec", errs);
    if let Some(p) = spec.persistent_volume_reclaim_policy.as_deref() {
        if !matches!(p, "Delete" | "Recycle" | "Retain") {
            errs.push(FieldError::not_supported(
                "spec.persistentVolumeReclaimPolicy",
                &json!(p),
                &["Delete", "Recycle", "Retain"],
            ));
        }
    }
    let set: Vec<&str> = sources(spec)
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
    match set.as_slice() {
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
    if let Some(hp) = &spec.host_path {
        absolute_path(&hp.path, "spec.hostPath.path", errs);
    }
    if let Some(local) = &spec.local {
        absolute_path(&local.path, "spec.local.path", errs);
        if spec.node_affinity.is_none() {
            errs.push(FieldError::required(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if let Some(nfs) = &spec.nfs {
        if nfs.server.is_empty() {
            errs.push(FieldError::required("spec.nfs.server", ""));
        }
        absolute_path(&nfs.path, "spec.nfs.path", errs);
    }
    let Some(old_spec) = old.map(|o| o.spec.as_ref().unwrap_or(&empty)) else {
        return;
    };
    if source_only(spec) != source_only(old_spec) {
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            "spec.persistentvolumesource is immutable after creation",
        ));
    }
    if old_spec.node_affinity.is_some() && old_spec.node_affinity != spec.node_affinity {
        errs.push(FieldError::forbidden(
            "spec.nodeAffinity",
            "field is immutable once set",
        ));
    }
    if spec.volume_mode != old_spec.volume_mode {
        errs.push(FieldError::invalid(
            "spec.volumeMode",
            &json!(spec.volume_mode),
            "field is immutable",
        ));
    }
}

/// ValidatePersistentVolumeClaim (and its update rules when `old` is given).
pub fn validate_pvc(
    pvc: &PersistentVolumeClaim,
    old: Option<&PersistentVolumeClaim>,
    errs: &mut Errors,
) {
    let empty = PersistentVolumeClaimSpec::default();
    let spec = pvc.spec.as_ref().unwrap_or(&empty);
    validate_claim_spec(spec, "spec", errs);
    if let Some(old) = old {
        validate_pvc_update(spec, old, errs);
    }
}

/// The storage request or limit of a claim.
fn storage_of(spec: &PersistentVolumeClaimSpec, limits: bool) -> Option<&ApiQuantity> {
    let r = spec.resources.as_ref()?;
    let list = if limits { &r.limits } else { &r.requests };
    list.as_ref()?.get("storage")
}

/// A claim's spec at `path` (a claim's own, or a StatefulSet's or
/// LeaderWorkerSet's claim template's).
pub fn validate_claim_spec(spec: &PersistentVolumeClaimSpec, path: &str, errs: &mut Errors) {
    access_modes(spec.access_modes.as_deref(), path, errs);
    volume_mode(spec.volume_mode.as_deref(), path, errs);
    class_name(spec.storage_class_name.as_deref(), path, errs);
    let requests = storage_of(spec, false);
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
        storage_of(spec, true),
        &format!("{path}.resources.limits[storage]"),
        errs,
    );
    if let Some(sel) = &spec.selector {
        if minik8s_api::selector::Selector::from_label_selector(sel).is_err() {
            errs.push(FieldError::invalid(
                format!("{path}.selector"),
                &json!(sel),
                "invalid selector",
            ));
        }
    }
}

/// [`validate_claim_spec`] on a claim template's spec in its JSON form (a
/// StatefulSet's or LeaderWorkerSet's, whose rules are still written on the
/// JSON form); one that does not decode is answered 400 when stored.
pub fn validate_claim_spec_json(spec: &Value, path: &str, errs: &mut Errors) {
    let spec = if spec.is_null() {
        Some(Default::default())
    } else {
        typed(spec)
    };
    if let Some(spec) = spec {
        validate_claim_spec(&spec, path, errs);
    }
}

fn validate_pvc_update(
    spec: &PersistentVolumeClaimSpec,
    old: &PersistentVolumeClaim,
    errs: &mut Errors,
) {
    let empty = PersistentVolumeClaimSpec::default();
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    // Only the size may change, of a bound claim; the binder fills volumeName
    // once, and a claim without a class may get the default one later.
    let unset = |v: &Option<String>| v.as_deref().unwrap_or_default().is_empty();
    let comparable = |s: &PersistentVolumeClaimSpec| {
        let mut s = s.clone();
        if let Some(r) = s.resources.as_mut() {
            r.requests = None;
        }
        if unset(&old_spec.volume_name) {
            s.volume_name = None;
        }
        if unset(&old_spec.storage_class_name) {
            s.storage_class_name = None;
        }
        s
    };
    let bound = old
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Bound");
    let requests = storage_of(spec, false);
    let before = storage_of(old_spec, false);
    let size_changed = requests != before;
    if comparable(spec) != comparable(old_spec) || (size_changed && !bound) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
        return;
    }
    let size = |q: Option<&ApiQuantity>| q.and_then(|q| Quantity::parse(&q.0).ok()).map(|q| q.0);
    if let (Some(new), Some(prev)) = (size(requests), size(before)) {
        if new < prev {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        }
    }
}

/// ValidateStorageClass (and its update rules when `old` is given).
pub fn validate_storage_class(class: &StorageClass, old: Option<&StorageClass>, errs: &mut Errors) {
    let p = class.provisioner.as_str();
    if p.is_empty() {
        errs.push(FieldError::required("provisioner", ""));
    } else {
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
                &json!(p),
                "a provisioner name must consist of alphanumeric characters, '-', '.', '_' and '/'",
            ));
        }
    }
    if let Some(p) = class.reclaim_policy.as_deref() {
        if !matches!(p, "Delete" | "Retain") {
            errs.push(FieldError::not_supported(
                "reclaimPolicy",
                &json!(p),
                &["Delete", "Retain"],
            ));
        }
    }
    match class.volume_binding_mode.as_deref() {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(m) if !matches!(m, "Immediate" | "WaitForFirstConsumer") => {
            errs.push(FieldError::not_supported(
                "volumeBindingMode",
                &json!(m),
                &["Immediate", "WaitForFirstConsumer"],
            ))
        }
        Some(_) => {}
    }
    let Some(old) = old else {
        return;
    };
    if class.parameters != old.parameters {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if class.provisioner != old.provisioner {
        errs.push(FieldError::forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if class.reclaim_policy != old.reclaim_policy {
        errs.push(FieldError::forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    if class.volume_binding_mode != old.volume_binding_mode {
        errs.push(FieldError::invalid(
            "volumeBindingMode",
            &json!(class.volume_binding_mode),
            "field is immutable",
        ));
    }
}

/// A CSIStorageCapacity (what a CSI driver publishes of its free space per
/// topology segment): a valid storage class name, a valid node topology
/// selector, and non-negative quantities, as Kubernetes validates it.
pub fn validate_csi_storage_capacity(
    capacity: &CSIStorageCapacity,
    _old: Option<&CSIStorageCapacity>,
    errs: &mut Errors,
) {
    let name = capacity.storage_class_name.as_str();
    if name.is_empty() {
        errs.push(FieldError::required("storageClassName", ""));
    } else if let Some(msg) = minik8s_api::names::dns1123_subdomain_error(name) {
        errs.push(FieldError::invalid("storageClassName", &json!(name), msg));
    }
    if let Some(sel) = &capacity.node_topology {
        super::network_policy::selector_errors(sel, "nodeTopology", errs);
    }
    for (field, q) in [
        ("capacity", &capacity.capacity),
        ("maximumVolumeSize", &capacity.maximum_volume_size),
    ] {
        let Some(ApiQuantity(text)) = q else {
            continue;
        };
        match minik8s_api::amount::Amount::parse(text) {
            None => errs.push(FieldError::invalid(
                field,
                &json!(text),
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )),
            Some(a) if a.is_negative() => errs.push(FieldError::invalid(
                field,
                &json!(text),
                "must be greater than or equal to 0",
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded<T: serde::de::DeserializeOwned>(v: &Value) -> T {
        serde_json::from_value(v.clone()).unwrap()
    }

    fn pvc(v: &Value, old: Option<&Value>, errs: &mut Errors) {
        let old = old.map(decoded);
        validate_pvc(&decoded(v), old.as_ref(), errs);
    }

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
        pvc(&claim("1Gi", json!(["ReadWriteOnce"])), None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut errs = Vec::new();
        pvc(&claim("0", json!([])), None, &mut errs);
        assert_eq!(
            messages(&errs),
            [
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources.requests[storage]: Invalid value: \"0\": must be greater than zero"
            ]
        );
        let mut errs = Vec::new();
        pvc(&claim("lots", json!(["Sometimes"])), None, &mut errs);
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
        pvc(
            &claim("2Gi", json!(["ReadWriteOnce"])),
            Some(&old),
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        pvc(
            &claim("512Mi", json!(["ReadWriteOnce"])),
            Some(&old),
            &mut errs,
        );
        assert_eq!(
            messages(&errs),
            ["spec.resources.requests.storage: Forbidden: field can not be less than previous value"]
        );
        let mut errs = Vec::new();
        pvc(
            &claim("1Gi", json!(["ReadWriteMany"])),
            Some(&old),
            &mut errs,
        );
        assert!(messages(&errs)[0].starts_with("spec: Forbidden: spec is immutable"));
        // The binder's volumeName is allowed once.
        let mut bound = claim("1Gi", json!(["ReadWriteOnce"]));
        bound["spec"]["volumeName"] = json!("pv1");
        let mut errs = Vec::new();
        pvc(&bound, Some(&old), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn volumes_need_one_source_and_local_ones_a_node() {
        let mut errs = Vec::new();
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "local": {"path": "/mnt/disk"}}});
        validate_pv(&decoded(&pv), None, &mut errs);
        assert_eq!(
            messages(&errs),
            ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
        );
        let mut errs = Vec::new();
        let pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "hostPath": {"path": "/a"}, "nfs": {"server": "x", "path": "/b"}}});
        validate_pv(&decoded(&pv), None, &mut errs);
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
        validate_storage_class(&decoded(&sc), None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut grown = sc.clone();
        grown["allowVolumeExpansion"] = json!(true);
        validate_storage_class(&decoded(&grown), Some(&decoded(&sc)), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        grown["reclaimPolicy"] = json!("Retain");
        validate_storage_class(&decoded(&grown), Some(&decoded(&sc)), &mut errs);
        assert_eq!(
            messages(&errs),
            ["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."]
        );
    }

    #[test]
    fn csi_storage_capacities_name_a_class_and_hold_quantities() {
        let check = |obj: Value| {
            let mut errs = Vec::new();
            validate_csi_storage_capacity(&decoded(&obj), None, &mut errs);
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
