//! PodSpec (also inside templates), containers, volumes and pod updates.

use super::lifecycle::{validate_container_lifecycle, ContainerKind};
use super::*;

/// `schedulingGroup` (Workload API): exactly one group, a PodGroup named by
/// a DNS subdomain (it may not exist yet; the pod waits for it).
fn validate_scheduling_group(spec: &Value, path: &str, errs: &mut Errors) {
    let Some(group) = spec.get("schedulingGroup").filter(|g| !g.is_null()) else {
        return;
    };
    let at = format!("{path}.schedulingGroup.podGroupName");
    match group.get("podGroupName").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(
            at,
            "must specify one of: `podGroupName`",
        )),
        Some(name) => {
            if let Some(e) = dns1123_subdomain_error(name) {
                errs.push(FieldError::invalid(at, &Value::String(name.into()), e));
            }
        }
    }
}

/// Validates a PodSpec at `path` (`spec` or `spec.template.spec`).
pub fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Errors) {
    let containers = arr(spec, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    validate_pod_level_resources(spec, path, errs);
    validate_scheduling_gates(spec, path, errs);
    validate_scheduling_group(spec, path, errs);
    validate_resource_claims(spec, path, errs);
    let volumes: Vec<&str> = arr(spec, "volumes")
        .iter()
        .filter_map(|v| str_at(v, "name"))
        .collect();
    let mut seen_vol = std::collections::HashSet::new();
    for (i, v) in arr(spec, "volumes").iter().enumerate() {
        match non_empty_str(v, "name") {
            None => errs.push(FieldError::required(
                format!("{path}.volumes[{i}].name"),
                "",
            )),
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(
                        format!("{path}.volumes[{i}].name"),
                        &Value::String(n.into()),
                        e,
                    ));
                }
                if !seen_vol.insert(n) {
                    errs.push(FieldError::duplicate(
                        format!("{path}.volumes[{i}].name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
        if let Some(hp) = v.get("hostPath") {
            if non_empty_str(hp, "path").is_none() {
                errs.push(FieldError::required(
                    format!("{path}.volumes[{i}].hostPath.path"),
                    "",
                ));
            }
        }
        // Files projected from ConfigMaps and Secrets stay inside the volume.
        let mut item_lists: Vec<(String, &Value)> = Vec::new();
        for kind in ["configMap", "secret"] {
            if let Some(items) = v.pointer(&format!("/{kind}/items")) {
                item_lists.push((format!("{path}.volumes[{i}].{kind}.items"), items));
            }
        }
        for (j, src) in arr(v.get("projected").unwrap_or(&Value::Null), "sources")
            .iter()
            .enumerate()
        {
            for kind in ["configMap", "secret"] {
                if let Some(items) = src.pointer(&format!("/{kind}/items")) {
                    let at = format!("{path}.volumes[{i}].projected.sources[{j}].{kind}.items");
                    item_lists.push((at, items));
                }
            }
        }
        for (at, items) in item_lists {
            for (k, item) in items.as_array().into_iter().flatten().enumerate() {
                if let Some(e) = item
                    .get("path")
                    .and_then(Value::as_str)
                    .and_then(item_path_error)
                {
                    errs.push(FieldError::invalid(
                        format!("{at}[{k}].path"),
                        item.get("path").unwrap_or(&Value::Null),
                        e,
                    ));
                }
            }
        }
    }
    let mut names = std::collections::HashSet::new();
    for (list, key) in [
        (containers, "containers"),
        (arr(spec, "initContainers"), "initContainers"),
    ] {
        for (i, c) in list.iter().enumerate() {
            let cp = format!("{path}.{key}[{i}]");
            validate_container(c, &cp, &volumes, errs);
            let kind = if key == "initContainers" {
                ContainerKind::Init
            } else {
                ContainerKind::App
            };
            validate_container_lifecycle(c, &cp, kind, spec, errs);
            if let Some(n) = non_empty_str(c, "name") {
                if !names.insert(n.to_string()) {
                    errs.push(FieldError::duplicate(
                        format!("{cp}.name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
    }
    check_enum(
        errs,
        spec,
        "restartPolicy",
        path,
        &["Always", "OnFailure", "Never"],
    );
    check_enum(
        errs,
        spec,
        "dnsPolicy",
        path,
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    );
    check_non_negative(errs, spec, "terminationGracePeriodSeconds", path);
    validate_sysctls(spec, path, errs);
    if let Some(ads) = spec.get("activeDeadlineSeconds") {
        if ads.as_i64().is_none_or(|n| n <= 0) {
            errs.push(FieldError::invalid(
                format!("{path}.activeDeadlineSeconds"),
                ads,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    for key in ["hostname", "subdomain"] {
        if let Some(h) = non_empty_str(spec, key) {
            if let Some(e) = dns1123_label_error(h) {
                errs.push(FieldError::invalid(
                    format!("{path}.{key}"),
                    &Value::String(h.into()),
                    e,
                ));
            }
        }
    }
    if let Some(sel) = spec.get("nodeSelector").and_then(Value::as_object) {
        for (k, v) in sel {
            if let Some(e) = qualified_name_error(k) {
                errs.push(FieldError::invalid(
                    format!("{path}.nodeSelector"),
                    &Value::String(k.clone()),
                    e,
                ));
            }
            if let Some(e) = v.as_str().and_then(label_value_error) {
                errs.push(FieldError::invalid(format!("{path}.nodeSelector"), v, e));
            }
        }
    }
    for (i, t) in arr(spec, "tolerations").iter().enumerate() {
        let tp = format!("{path}.tolerations[{i}]");
        check_enum(errs, t, "operator", &tp, &["Equal", "Exists"]);
        check_enum(
            errs,
            t,
            "effect",
            &tp,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
        if str_at(t, "operator") == Some("Exists") && non_empty_str(t, "value").is_some() {
            errs.push(FieldError::invalid(
                format!("{tp}.operator"),
                &Value::String("Exists".into()),
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if t.get("tolerationSeconds").is_some() && str_at(t, "effect") != Some("NoExecute") {
            errs.push(FieldError::invalid(
                format!("{tp}.effect"),
                t.get("effect").unwrap_or(&Value::Null),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

/// Kubernetes' sysctl name rule: segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
/// joined by `.` or `/`, at most 253 characters.
pub fn is_sysctl_name(name: &str) -> bool {
    let segment = |s: &str| {
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        s.chars().next().is_some_and(ok)
            && s.chars().last().is_some_and(ok)
            && s.chars().all(|c| ok(c) || c == '-' || c == '_')
    };
    name.len() <= 253 && name.split(['.', '/']).all(segment)
}

/// `securityContext.sysctls`: named, valid names, no name twice.
fn validate_sysctls(spec: &Value, path: &str, errs: &mut Errors) {
    let sysctls = spec
        .pointer("/securityContext/sysctls")
        .and_then(Value::as_array);
    let mut seen = std::collections::HashSet::new();
    for (i, s) in sysctls.into_iter().flatten().enumerate() {
        let at = format!("{path}.securityContext.sysctls[{i}].name");
        match non_empty_str(s, "name") {
            None => errs.push(FieldError::required(at, "")),
            Some(n) if !is_sysctl_name(n) => errs.push(FieldError::invalid(
                at,
                &Value::String(n.into()),
                "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            )),
            Some(n) if !seen.insert(n) => {
                errs.push(FieldError::duplicate(at, &Value::String(n.into())))
            }
            Some(n) => {
                // A sysctl of a namespace the pod shares with its node would
                // change the node's.
                let n = n.replace('/', ".");
                let ipc = n.starts_with("kernel.shm")
                    || n.starts_with("kernel.msg")
                    || n == "kernel.sem"
                    || n.starts_with("fs.mqueue.");
                let shared = if n.starts_with("net.") {
                    Some("hostNetwork")
                } else if ipc {
                    Some("hostIPC")
                } else {
                    None
                };
                if let Some(flag) = shared.filter(|f| spec.get(*f) == Some(&Value::Bool(true))) {
                    errs.push(FieldError::invalid(
                        at,
                        &s["name"],
                        format!("may not be specified when '{flag}' is true"),
                    ));
                }
            }
        }
    }
}

pub(super) fn validate_container(c: &Value, path: &str, volumes: &[&str], errs: &mut Errors) {
    match non_empty_str(c, "name") {
        None => errs.push(FieldError::required(format!("{path}.name"), "")),
        Some(n) => {
            if let Some(e) = dns1123_label_error(n) {
                errs.push(FieldError::invalid(
                    format!("{path}.name"),
                    &Value::String(n.into()),
                    e,
                ));
            }
        }
    }
    if non_empty_str(c, "image").is_none() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    check_enum(
        errs,
        c,
        "imagePullPolicy",
        path,
        &["Always", "IfNotPresent", "Never"],
    );
    let mut port_names = std::collections::HashSet::new();
    for (i, p) in arr(c, "ports").iter().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        check_port(errs, p, "containerPort", &pp, true);
        if let Some(hp) = p.get("hostPort") {
            if !hp.as_i64().is_some_and(|n| (0..=65535).contains(&n)) {
                errs.push(FieldError::invalid(
                    format!("{pp}.hostPort"),
                    hp,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
        check_enum(errs, p, "protocol", &pp, PROTOCOLS);
        if let Some(n) = non_empty_str(p, "name") {
            if let Some(e) = port_name_error(n) {
                errs.push(FieldError::invalid(
                    format!("{pp}.name"),
                    &Value::String(n.into()),
                    e,
                ));
            }
            if !port_names.insert(n) {
                errs.push(FieldError::duplicate(
                    format!("{pp}.name"),
                    &Value::String(n.into()),
                ));
            }
        }
    }
    for (i, e) in arr(c, "env").iter().enumerate() {
        match non_empty_str(e, "name") {
            None => errs.push(FieldError::required(format!("{path}.env[{i}].name"), "")),
            Some(n) if !is_env_var_name(n) => errs.push(FieldError::invalid(
                format!("{path}.env[{i}].name"),
                &Value::String(n.into()),
                ENV_VAR_NAME_MESSAGE,
            )),
            Some(_) => {}
        }
        if let Some(fr) = e.pointer("/valueFrom/fieldRef") {
            if non_empty_str(fr, "fieldPath").is_none() {
                errs.push(FieldError::required(
                    format!("{path}.env[{i}].valueFrom.fieldRef.fieldPath"),
                    "",
                ));
            }
        }
    }
    for (i, m) in arr(c, "volumeMounts").iter().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        match non_empty_str(m, "name") {
            None => errs.push(FieldError::required(format!("{mp}.name"), "")),
            Some(n) if !volumes.contains(&n) => {
                errs.push(FieldError::not_found(
                    format!("{mp}.name"),
                    &Value::String(n.into()),
                ));
            }
            _ => {}
        }
        if non_empty_str(m, "mountPath").is_none() {
            errs.push(FieldError::required(format!("{mp}.mountPath"), ""));
        }
    }
    validate_resources(c, path, errs);
}

/// Kubernetes' message for an environment variable name it refuses.
const ENV_VAR_NAME_MESSAGE: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

/// `[-._a-zA-Z][-._a-zA-Z0-9]*`: Kubernetes' rule without the
/// RelaxedEnvironmentVariableValidation gate (beta in 1.32, where any
/// printable ASCII but `=` passes); minik8s keeps the stricter rule so a
/// name a shell cannot use is caught at create time.
fn is_env_var_name(n: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    n.chars()
        .next()
        .is_some_and(|c| ok(c) && !c.is_ascii_digit())
        && n.chars().all(ok)
}

/// Quantities parse, are not negative, and requests do not exceed limits.
fn validate_resources(c: &Value, path: &str, errs: &mut Errors) {
    use minik8s_api::quantity::Quantity;
    let section = |name: &str| {
        c.pointer(&format!("/resources/{name}"))
            .and_then(Value::as_object)
    };
    let parse = |q: &Value| match q {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => n.as_f64().map(Quantity),
        _ => None,
    };
    for name in ["limits", "requests"] {
        for (res, q) in section(name).into_iter().flatten() {
            let field = format!("{path}.resources.{name}[{res}]");
            match parse(q) {
                None => errs.push(FieldError::invalid(
                    field,
                    q,
                    "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$",
                )),
                Some(v) if v.0 < 0.0 => errs.push(FieldError::invalid(
                    field,
                    q,
                    "must be greater than or equal to 0",
                )),
                Some(_) => {}
            }
        }
    }
    let (Some(requests), Some(limits)) = (section("requests"), section("limits")) else {
        return;
    };
    for (res, q) in requests {
        let Some(limit) = limits.get(res) else {
            continue;
        };
        if let (Some(r), Some(l)) = (parse(q), parse(limit)) {
            if r.0 > l.0 {
                let shown = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
                errs.push(FieldError::invalid(
                    format!("{path}.resources.requests[{res}]"),
                    &Value::String(shown(q)),
                    format!(
                        "must be less than or equal to {res} limit of {}",
                        shown(limit)
                    ),
                ));
            }
        }
    }
}

/// A sum of quantities as Kubernetes prints it: `250m` or `2` for CPU, bytes for memory.
fn shown_quantity(res: &str, v: f64) -> String {
    let q = minik8s_api::quantity::Quantity(v);
    match res {
        "cpu" if q.millis() % 1000 == 0 => (q.millis() / 1000).to_string(),
        "cpu" => format!("{}m", q.millis()),
        _ => q.units().to_string(),
    }
}

/// Pod-level resources (`spec.resources`), as Kubernetes'
/// `validatePodResourceRequirements` and `validatePodResourceConsistency`:
/// CPU, memory and huge pages only; no container above the pod's limit;
/// the pod's requests at least the containers' together.
fn validate_pod_level_resources(spec: &Value, path: &str, errs: &mut Errors) {
    let Some(r) = spec.get("resources").filter(|r| r.is_object()) else {
        return;
    };
    validate_resources(spec, path, errs);
    for list in ["requests", "limits"] {
        for name in r
            .get(list)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            if name != "cpu" && name != "memory" && !name.starts_with("hugepages-") {
                errs.push(FieldError::not_supported(
                    format!("{path}.resources.{list}"),
                    &Value::String(name.clone()),
                    &["cpu", "hugepages-1Gi", "hugepages-2Mi", "memory"],
                ));
            }
        }
    }
    let amount = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|q| minik8s_api::quantity::Quantity::parse(q).ok())
    };
    for res in ["cpu", "memory"] {
        if let Some(pod_limit) = amount(r.pointer(&format!("/limits/{res}"))) {
            for list in ["initContainers", "containers"] {
                for (i, c) in arr(spec, list).iter().enumerate() {
                    let limit = c.pointer(&format!("/resources/limits/{res}"));
                    if amount(limit).is_some_and(|l| l.0 > pod_limit.0) {
                        errs.push(FieldError::invalid(
                            format!("{path}.{list}[{i}].resources.limits[{res}]"),
                            limit.unwrap_or(&Value::Null),
                            "must be less than or equal to pod limits",
                        ));
                    }
                }
            }
        }
        let pod_request = r.pointer(&format!("/requests/{res}"));
        if let Some(q) = amount(pod_request) {
            let total: f64 =
                arr(spec, "containers")
                    .iter()
                    .chain(arr(spec, "initContainers").iter().filter(|c| {
                        c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
                    }))
                    .filter_map(|c| amount(c.pointer(&format!("/resources/requests/{res}"))))
                    .map(|a| a.0)
                    .sum();
            if q.0 + 1e-9 < total {
                errs.push(FieldError::invalid(
                    format!("{path}.resources.requests[{res}]"),
                    pod_request.unwrap_or(&Value::Null),
                    format!(
                        "must be greater than or equal to aggregate container requests of {}",
                        shown_quantity(res, total)
                    ),
                ));
            }
        }
    }
}

fn gate_names(spec: &Value) -> Vec<&str> {
    arr(spec, "schedulingGates")
        .iter()
        .filter_map(|g| str_at(g, "name"))
        .collect()
}

/// `schedulingGates`: qualified names, each once.
/// `spec.resourceClaims` (Dynamic Resource Allocation) and the containers'
/// `resources.claims`, which must name them (Kubernetes'
/// `validatePodResourceClaims` and `validateResourceClaimNames`).
fn validate_resource_claims(spec: &Value, path: &str, errs: &mut Errors) {
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in arr(spec, "resourceClaims").iter().enumerate() {
        let at = format!("{path}.resourceClaims[{i}]");
        match non_empty_str(c, "name") {
            None => errs.push(FieldError::required(format!("{at}.name"), "")),
            Some(n) => {
                if let Some(e) = dns1123_label_error(n) {
                    errs.push(FieldError::invalid(
                        format!("{at}.name"),
                        &Value::String(n.into()),
                        e,
                    ));
                }
                if !names.insert(n.to_string()) {
                    errs.push(FieldError::duplicate(
                        format!("{at}.name"),
                        &Value::String(n.into()),
                    ));
                }
            }
        }
        let claim = non_empty_str(c, "resourceClaimName");
        let template = non_empty_str(c, "resourceClaimTemplateName");
        match (claim, template) {
            (None, None) => errs.push(FieldError::invalid(
                at.clone(),
                &Value::Null,
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )),
            (Some(_), Some(_)) => errs.push(FieldError::invalid(
                at.clone(),
                &Value::Null,
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            )),
            (Some(n), None) | (None, Some(n)) => {
                if let Some(e) = dns1123_subdomain_error(n) {
                    let field = if claim.is_some() { "resourceClaimName" } else { "resourceClaimTemplateName" };
                    errs.push(FieldError::invalid(format!("{at}.{field}"), &Value::String(n.into()), e));
                }
            }
        }
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in arr(spec, list).iter().enumerate() {
            let claims = c.pointer("/resources/claims").and_then(Value::as_array);
            let mut seen = std::collections::HashSet::new();
            for (j, claim) in claims.into_iter().flatten().enumerate() {
                let at = format!("{path}.{list}[{i}].resources.claims[{j}]");
                let name = str_at(claim, "name").unwrap_or("");
                let request = str_at(claim, "request").unwrap_or("");
                if name.is_empty() {
                    errs.push(FieldError::required(format!("{at}.name"), ""));
                    continue;
                }
                if !seen.insert((name, request)) {
                    errs.push(FieldError::duplicate(
                        at.clone(),
                        &Value::String(name.into()),
                    ));
                }
                if !names.contains(name) {
                    let mut e = FieldError::not_found(at.clone(), &Value::String(name.into()));
                    e.detail = if names.is_empty() {
                        "must be one of the names in pod.spec.resourceClaims which is empty".into()
                    } else {
                        let all: Vec<&str> = names.iter().map(String::as_str).collect();
                        format!(
                            "must be one of the names in pod.spec.resourceClaims: {}",
                            all.join(", ")
                        )
                    };
                    errs.push(e);
                }
            }
        }
    }
}

fn validate_scheduling_gates(spec: &Value, path: &str, errs: &mut Errors) {
    let mut seen = std::collections::HashSet::new();
    for (i, g) in arr(spec, "schedulingGates").iter().enumerate() {
        let at = format!("{path}.schedulingGates[{i}].name");
        match non_empty_str(g, "name") {
            None => errs.push(FieldError::required(at, "")),
            Some(n) => {
                if let Some(e) = qualified_name_error(n) {
                    errs.push(FieldError::invalid(at.clone(), &Value::String(n.into()), e));
                }
                if !seen.insert(n) {
                    errs.push(FieldError::duplicate(at, &Value::String(n.into())));
                }
            }
        }
    }
}

/// A gated pod is created unbound: the scheduler binds it once its gates are gone.
pub(super) fn validate_gated_create(pod: &Value, errs: &mut Errors) {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let bound = non_empty_str(spec, "nodeName").is_some();
    if bound && !gate_names(spec).is_empty() {
        errs.push(FieldError::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
}

/// Scheduling gates are only ever removed (whoever added one removes it).
fn validate_gates_update(new: &Value, old: &Value, errs: &mut Errors) {
    let before = gate_names(old.get("spec").unwrap_or(&Value::Null));
    for name in gate_names(new.get("spec").unwrap_or(&Value::Null)) {
        if !before.contains(&name) {
            errs.push(FieldError::forbidden(
                "spec.schedulingGates",
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

/// Pod updates may change only images, activeDeadlineSeconds, tolerations and grace period.
pub(super) fn validate_pod_update(new: &Value, old: &Value, errs: &mut Errors) {
    validate_gates_update(new, old, errs);
    fn mask(spec: &Value) -> Value {
        let mut s = spec.clone();
        for list in ["containers", "initContainers"] {
            if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("image");
                    }
                }
            }
        }
        if let Some(m) = s.as_object_mut() {
            for f in [
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
                "schedulingGates",
            ] {
                m.remove(f);
            }
        }
        s
    }
    // nodeName may be set once (by binding): an unset old value is not a change.
    let (mut ns, os) = (
        mask(new.get("spec").unwrap_or(&Value::Null)),
        mask(old.get("spec").unwrap_or(&Value::Null)),
    );
    if os.get("nodeName").is_none() {
        if let Some(m) = ns.as_object_mut() {
            m.remove("nodeName");
        }
    }
    if ns != os {
        errs.push(FieldError::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}
