//! Dynamic Resource Allocation kinds (`resource.k8s.io/v1`): DeviceClass,
//! ResourceClaim (and the claim spec of a ResourceClaimTemplate) and
//! ResourceSlice, with Kubernetes' rules and messages. Typed: each object is
//! read as its k8s-openapi type (the strategy has already decoded it once).

use super::{name_check, Errors, FieldError};
use k8s_openapi::api::resource::v1::{
    Device, DeviceClaim, DeviceClass, DeviceSelector, ExactDeviceRequest,
    OpaqueDeviceConfiguration, ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate,
    ResourceSlice,
};
use minik8s_api::names::{dns1123_label_error, dns1123_subdomain_error};
use minik8s_cel::device::Selector;
use serde_json::{json, Value};
use std::collections::HashSet;

/// Kubernetes' bounds (`pkg/apis/resource/types.go`).
const MAX_REQUESTS: usize = 32;
const MAX_SUBREQUESTS: usize = 8;
const MAX_SELECTORS: usize = 32;
const MAX_CONSTRAINTS: usize = 32;
const MAX_CONFIGS: usize = 32;
const MAX_DEVICES_PER_SLICE: usize = 128;
const MAX_ATTRIBUTES_AND_CAPACITY: usize = 32;

fn selectors(errs: &mut Errors, path: &str, list: Option<&Vec<DeviceSelector>>) {
    let list = list.map(Vec::as_slice).unwrap_or(&[]);
    if list.len() > MAX_SELECTORS {
        errs.push(FieldError::too_many(path, list.len(), MAX_SELECTORS));
    }
    for (i, s) in list.iter().enumerate() {
        let Some(cel) = &s.cel else {
            errs.push(FieldError::required(format!("{path}[{i}].cel"), ""));
            continue;
        };
        let at = format!("{path}[{i}].cel.expression");
        if cel.expression.is_empty() {
            errs.push(FieldError::required(at, ""));
        } else if let Err(e) = Selector::compile(&cel.expression) {
            errs.push(FieldError::invalid(at, &json!(cel.expression), e));
        }
    }
}

/// `allocationMode` and `count` of a request or subrequest.
fn allocation_mode(errs: &mut Errors, path: &str, mode: Option<&str>, count: Option<i64>) {
    match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            if count.unwrap_or(1) <= 0 {
                errs.push(FieldError::invalid(
                    format!("{path}.count"),
                    &json!(count),
                    "must be greater than zero",
                ));
            }
        }
        "All" => {
            if let Some(c) = count.filter(|c| *c != 0) {
                errs.push(FieldError::invalid(
                    format!("{path}.count"),
                    &json!(c),
                    "must not be specified when allocationMode is 'All'",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.allocationMode"),
            &json!(other),
            &["All", "ExactCount"],
        )),
    }
}

fn exact_request(errs: &mut Errors, path: &str, r: &ExactDeviceRequest) {
    name_check(
        errs,
        format!("{path}.deviceClassName"),
        &r.device_class_name,
        dns1123_subdomain_error,
    );
    selectors(errs, &format!("{path}.selectors"), r.selectors.as_ref());
    allocation_mode(errs, path, r.allocation_mode.as_deref(), r.count);
}

/// The requests of a claim, with the names (`req` and `req/sub`) they define.
fn requests(errs: &mut Errors, path: &str, claim: &DeviceClaim) -> HashSet<String> {
    let mut names = HashSet::new();
    let list = claim.requests.as_deref().unwrap_or(&[]);
    if list.len() > MAX_REQUESTS {
        errs.push(FieldError::too_many(path, list.len(), MAX_REQUESTS));
    }
    for (i, r) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        name_check(errs, format!("{at}.name"), &r.name, dns1123_label_error);
        if !names.insert(r.name.clone()) {
            errs.push(FieldError::duplicate(format!("{at}.name"), &json!(r.name)));
        }
        match (&r.exactly, &r.first_available) {
            (Some(_), Some(f)) if !f.is_empty() => errs.push(FieldError::invalid(
                at.clone(),
                &Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )),
            (Some(e), _) => exact_request(errs, &format!("{at}.exactly"), e),
            (None, Some(subs)) if !subs.is_empty() => {
                let sub_path = format!("{at}.firstAvailable");
                if subs.len() > MAX_SUBREQUESTS {
                    errs.push(FieldError::too_many(&sub_path, subs.len(), MAX_SUBREQUESTS));
                }
                let mut seen = HashSet::new();
                for (j, s) in subs.iter().enumerate() {
                    let sp = format!("{sub_path}[{j}]");
                    name_check(errs, format!("{sp}.name"), &s.name, dns1123_label_error);
                    if !seen.insert(s.name.clone()) {
                        errs.push(FieldError::duplicate(format!("{sp}.name"), &json!(s.name)));
                    }
                    names.insert(format!("{}/{}", r.name, s.name));
                    name_check(
                        errs,
                        format!("{sp}.deviceClassName"),
                        &s.device_class_name,
                        dns1123_subdomain_error,
                    );
                    selectors(errs, &format!("{sp}.selectors"), s.selectors.as_ref());
                    allocation_mode(errs, &sp, s.allocation_mode.as_deref(), s.count);
                }
            }
            _ => errs.push(FieldError::required(
                at.clone(),
                "exactly one of `exactly` or `firstAvailable` is required",
            )),
        }
    }
    names
}

fn request_refs(
    errs: &mut Errors,
    path: &str,
    refs: Option<&Vec<String>>,
    known: &HashSet<String>,
) {
    for (i, name) in refs.into_iter().flatten().enumerate() {
        if !known.contains(name) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                &json!(name),
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
    }
}

fn opaque_config(errs: &mut Errors, path: &str, opaque: Option<&OpaqueDeviceConfiguration>) {
    let Some(opaque) = opaque else {
        errs.push(FieldError::required(
            path,
            "exactly one of `opaque` is required",
        ));
        return;
    };
    name_check(
        errs,
        format!("{path}.opaque.driver"),
        &opaque.driver,
        dns1123_subdomain_error,
    );
    if !opaque.parameters.0.is_object() {
        errs.push(FieldError::invalid(
            format!("{path}.opaque.parameters"),
            &opaque.parameters.0,
            "parameters must be a valid JSON object",
        ));
    }
}

/// A claim's spec (`spec` of a ResourceClaim, `spec.spec` of a template).
pub fn validate_claim_spec(errs: &mut Errors, path: &str, devices: Option<&DeviceClaim>) {
    let Some(devices) = devices else {
        return;
    };
    let known = requests(errs, &format!("{path}.devices.requests"), devices);
    let constraints = devices.constraints.as_deref().unwrap_or(&[]);
    let cpath = format!("{path}.devices.constraints");
    if constraints.len() > MAX_CONSTRAINTS {
        errs.push(FieldError::too_many(
            &cpath,
            constraints.len(),
            MAX_CONSTRAINTS,
        ));
    }
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("{cpath}[{i}]");
        request_refs(errs, &format!("{at}.requests"), c.requests.as_ref(), &known);
        match c.match_attribute.as_deref() {
            None | Some("") => errs.push(FieldError::required(format!("{at}.matchAttribute"), "")),
            Some(a) if !a.contains('/') => errs.push(FieldError::invalid(
                format!("{at}.matchAttribute"),
                &json!(a),
                "must include a domain",
            )),
            Some(_) => {}
        }
    }
    let configs = devices.config.as_deref().unwrap_or(&[]);
    let fpath = format!("{path}.devices.config");
    if configs.len() > MAX_CONFIGS {
        errs.push(FieldError::too_many(&fpath, configs.len(), MAX_CONFIGS));
    }
    for (i, c) in configs.iter().enumerate() {
        let at = format!("{fpath}[{i}]");
        request_refs(errs, &format!("{at}.requests"), c.requests.as_ref(), &known);
        opaque_config(errs, &at, c.opaque.as_ref());
    }
}

fn immutable(
    errs: &mut Errors,
    path: &str,
    new: &impl serde::Serialize,
    old: &impl serde::Serialize,
) {
    let (n, o) = (
        serde_json::to_value(new).ok(),
        serde_json::to_value(old).ok(),
    );
    if n != o {
        errs.push(FieldError::invalid(
            path,
            n.as_ref().unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

fn claim_status(
    errs: &mut Errors,
    status: &ResourceClaimStatus,
    old: Option<&ResourceClaimStatus>,
    known: &HashSet<String>,
) {
    let reserved = status.reserved_for.as_deref().unwrap_or(&[]);
    if reserved.len() > minik8s_api::dra::RESERVED_FOR_MAX {
        errs.push(FieldError::too_many(
            "status.reservedFor",
            reserved.len(),
            minik8s_api::dra::RESERVED_FOR_MAX,
        ));
    }
    let mut uids = HashSet::new();
    for (i, r) in reserved.iter().enumerate() {
        let at = format!("status.reservedFor[{i}]");
        for (field, value) in [
            ("resource", &r.resource),
            ("name", &r.name),
            ("uid", &r.uid),
        ] {
            if value.is_empty() {
                errs.push(FieldError::required(format!("{at}.{field}"), ""));
            }
        }
        if !uids.insert(r.uid.clone()) {
            errs.push(FieldError::duplicate(format!("{at}.uid"), &json!(r.uid)));
        }
    }
    if !reserved.is_empty() && status.allocation.is_none() {
        errs.push(FieldError::forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
    }
    if let (Some(new), Some(old)) = (
        status.allocation.as_ref(),
        old.and_then(|o| o.allocation.as_ref()),
    ) {
        immutable(errs, "status.allocation", new, old);
    }
    let results = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref());
    for (i, r) in results.into_iter().flatten().enumerate() {
        if !known.contains(&r.request) {
            errs.push(FieldError::invalid(
                format!("status.allocation.devices.results[{i}].request"),
                &json!(r.request),
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
    }
}

pub fn validate_resource_claim(
    claim: &ResourceClaim,
    old: Option<&ResourceClaim>,
    errs: &mut Errors,
) {
    let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    validate_claim_spec(errs, "spec", devices);
    if let Some(old) = old {
        immutable(errs, "spec", &claim.spec, &old.spec);
    }
    let known = requests(
        &mut Vec::new(),
        "",
        devices.unwrap_or(&DeviceClaim::default()),
    );
    if let Some(status) = &claim.status {
        claim_status(errs, status, old.and_then(|o| o.status.as_ref()), &known);
    }
}

pub fn validate_resource_claim_template(
    template: &ResourceClaimTemplate,
    old: Option<&ResourceClaimTemplate>,
    errs: &mut Errors,
) {
    let devices = template
        .spec
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.devices.as_ref());
    validate_claim_spec(errs, "spec.spec", devices);
    if let Some(old) = old {
        immutable(errs, "spec", &template.spec, &old.spec);
    }
}

pub fn validate_device_class(class: &DeviceClass, _old: Option<&DeviceClass>, errs: &mut Errors) {
    let spec = class.spec.clone().unwrap_or_default();
    selectors(errs, "spec.selectors", spec.selectors.as_ref());
    let configs = spec.config.as_deref().unwrap_or(&[]);
    if configs.len() > MAX_CONFIGS {
        errs.push(FieldError::too_many(
            "spec.config",
            configs.len(),
            MAX_CONFIGS,
        ));
    }
    for (i, c) in configs.iter().enumerate() {
        opaque_config(errs, &format!("spec.config[{i}]"), c.opaque.as_ref());
    }
}

/// An attribute or capacity name: `id` or `domain/id`, the id a C identifier
/// of at most 32 characters and the domain a DNS subdomain of at most 63.
fn qualified_name_error(name: &str) -> Option<String> {
    let (domain, id) = match name.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, name),
    };
    let c_identifier = !id.is_empty()
        && id.len() <= 32
        && id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !c_identifier {
        return Some("a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (regex used for validation is '[A-Za-z_][A-Za-z0-9_]*'), and be at most 32 characters".into());
    }
    domain.and_then(|d| {
        if d.len() > 63 {
            Some("must be no more than 63 bytes".into())
        } else {
            dns1123_subdomain_error(d)
        }
    })
}

pub fn validate_resource_slice(
    slice: &ResourceSlice,
    old: Option<&ResourceSlice>,
    errs: &mut Errors,
) {
    let spec = &slice.spec;
    name_check(
        errs,
        "spec.driver".into(),
        &spec.driver,
        dns1123_subdomain_error,
    );
    if spec.pool.name.is_empty() {
        errs.push(FieldError::required("spec.pool.name", ""));
    }
    if spec.pool.generation < 0 {
        errs.push(FieldError::invalid(
            "spec.pool.generation",
            &json!(spec.pool.generation),
            "must be greater than or equal to 0",
        ));
    }
    if spec.pool.resource_slice_count <= 0 {
        errs.push(FieldError::invalid(
            "spec.pool.resourceSliceCount",
            &json!(spec.pool.resource_slice_count),
            "must be greater than zero",
        ));
    }
    let placement = [
        spec.node_name.as_deref().is_some_and(|n| !n.is_empty()),
        spec.node_selector.is_some(),
        spec.all_nodes == Some(true),
        spec.per_device_node_selection == Some(true),
    ];
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match placement.iter().filter(|p| **p).count() {
        0 => errs.push(FieldError::required("spec", ONE_OF)),
        1 => {}
        _ => errs.push(FieldError::invalid(
            "spec",
            &Value::Null,
            format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
    let devices = spec.devices.as_deref().unwrap_or(&[]);
    if devices.len() > MAX_DEVICES_PER_SLICE {
        errs.push(FieldError::too_many(
            "spec.devices",
            devices.len(),
            MAX_DEVICES_PER_SLICE,
        ));
    }
    let mut names = HashSet::new();
    for (i, d) in devices.iter().enumerate() {
        let at = format!("spec.devices[{i}]");
        name_check(errs, format!("{at}.name"), &d.name, dns1123_label_error);
        if !names.insert(d.name.clone()) {
            errs.push(FieldError::duplicate(format!("{at}.name"), &json!(d.name)));
        }
        validate_device_attributes(d, &at, errs);
    }
    if let Some(old) = old {
        if old.spec.node_name != spec.node_name {
            immutable(errs, "spec.nodeName", &spec.node_name, &old.spec.node_name);
        }
        if old.spec.driver != spec.driver {
            immutable(errs, "spec.driver", &spec.driver, &old.spec.driver);
        }
    }
}

/// A device's attributes (one typed value each, a semver version) and
/// capacities (quantities), under qualified names and within their bound.
fn validate_device_attributes(d: &Device, at: &str, errs: &mut Errors) {
    let attributes = d.attributes.as_ref();
    let capacity = d.capacity.as_ref();
    let total = attributes.map_or(0, |a| a.len()) + capacity.map_or(0, |c| c.len());
    if total > MAX_ATTRIBUTES_AND_CAPACITY {
        errs.push(FieldError::too_many(
            format!("{at}.attributes"),
            total,
            MAX_ATTRIBUTES_AND_CAPACITY,
        ));
    }
    for (name, a) in attributes.into_iter().flatten() {
        let apath = format!("{at}.attributes[{name}]");
        if let Some(e) = qualified_name_error(name) {
            errs.push(FieldError::invalid(apath.clone(), &json!(name), e));
        }
        let set = [
            a.bool.is_some(),
            a.int.is_some(),
            a.string.is_some(),
            a.version.is_some(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if set != 1 {
            errs.push(FieldError::invalid(
                apath.clone(),
                &Value::Null,
                "exactly one value must be specified",
            ));
        }
        if let Some(v) = &a.version {
            if minik8s_cel::device::Semver::parse(v).is_none() {
                errs.push(FieldError::invalid(
                    format!("{apath}.version"),
                    &json!(v),
                    "must be a string compatible with semver.org spec 2.0.0",
                ));
            }
        }
    }
    for (name, c) in capacity.into_iter().flatten() {
        let cpath = format!("{at}.capacity[{name}]");
        if let Some(e) = qualified_name_error(name) {
            errs.push(FieldError::invalid(cpath.clone(), &json!(name), e));
        }
        if let Err(e) = minik8s_api::quantity::Quantity::parse(&c.value.0) {
            errs.push(FieldError::invalid(
                format!("{cpath}.value"),
                &json!(c.value.0),
                e.to_string(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(devices: Value) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "c", "namespace": "default"},
               "spec": {"devices": devices}})
    }

    fn decoded<T: serde::de::DeserializeOwned>(v: &Value) -> T {
        serde_json::from_value(v.clone()).unwrap()
    }

    fn messages(errs: &Errors) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn claims_with_bad_selectors_modes_and_references_are_refused() {
        let mut errs = Vec::new();
        validate_resource_claim(
            &decoded(&claim(json!({"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.minik8s.io",
                    "selectors": [{"cel": {"expression": "device.driver =="}}]}},
                {"name": "gpu", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}},
                {"name": "both"},
                {"name": "mode", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}}],
              "constraints": [{"requests": ["nope"], "matchAttribute": "model"}]}))),
            None,
            &mut errs,
        );
        let m = messages(&errs);
        assert!(m[0].starts_with("spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"), "{m:?}");
        assert!(
            m.contains(&"spec.devices.requests[1].name: Duplicate value: \"gpu\"".to_string()),
            "{m:?}"
        );
        assert!(m.contains(&"spec.devices.requests[1].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'".to_string()), "{m:?}");
        assert!(m.contains(&"spec.devices.requests[2]: Required value: exactly one of `exactly` or `firstAvailable` is required".to_string()), "{m:?}");
        assert!(
            m.iter().any(|e| e.starts_with(
                "spec.devices.requests[3].exactly.allocationMode: Unsupported value: \"Some\""
            )),
            "{m:?}"
        );
        assert!(
            m.iter().any(|e| e
                .starts_with("spec.devices.constraints[0].requests[0]: Invalid value: \"nope\"")),
            "{m:?}"
        );
        assert!(m.contains(&"spec.devices.constraints[0].matchAttribute: Invalid value: \"model\": must include a domain".to_string()), "{m:?}");
    }

    #[test]
    fn a_claim_spec_is_immutable_and_reservations_need_an_allocation() {
        let old =
            claim(json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "a"}}]}));
        let mut new =
            claim(json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "b"}}]}));
        new["status"] = json!({"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]});
        let mut errs = Vec::new();
        validate_resource_claim(&decoded(&new), Some(&decoded(&old)), &mut errs);
        let m = messages(&errs);
        assert!(
            m.iter()
                .any(|e| e.starts_with("spec: Invalid value") && e.ends_with("field is immutable")),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
                    .to_string()
            ),
            "{m:?}"
        );
    }

    #[test]
    fn slices_name_one_placement_and_typed_attributes() {
        let mut errs = Vec::new();
        validate_resource_slice(
            &decoded(
                &json!({"metadata": {"name": "s"}, "spec": {"driver": "gpu.minik8s.io",
                "pool": {"name": "n", "generation": 0, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a", "int": 1},
                                                              "v": {"version": "one"}}}]}}),
            ),
            None,
            &mut errs,
        );
        let m = messages(&errs);
        assert!(
            m[0].starts_with("spec: Required value: exactly one of `nodeName`"),
            "{m:?}"
        );
        assert!(m.contains(&"spec.devices[0].attributes[model]: Invalid value: null: exactly one value must be specified".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|e| e
                    .starts_with("spec.devices[0].attributes[v].version: Invalid value: \"one\"")),
            "{m:?}"
        );
    }
}
