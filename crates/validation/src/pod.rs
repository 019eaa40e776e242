//! PodSpec (also inside templates), containers, volumes and pod updates,
//! on the typed objects, with Kubernetes' messages and field paths
//! (`ValidatePodSpec`, `validateContainers`, `ValidatePodUpdate`).

use super::lifecycle::{validate_container_lifecycle, ContainerKind};
use super::*;
use k8s_openapi::api::core::v1::{
    Container, KeyToPath, Pod, PodSpec, PodTemplate, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use minik8s_api::quantity::Quantity;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// A Pod: its spec; on create, no ephemeral containers and no node for a
/// gated pod; on update, only what Kubernetes lets change.
pub(super) fn validate_pod(pod: &Pod, old: Option<&Pod>, errs: &mut Errors) {
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    validate_pod_spec(spec, "spec", errs);
    match old {
        Some(old) => validate_pod_update(spec, old.spec.as_ref().unwrap_or(&empty), errs),
        None => {
            super::ephemeral::validate_pod_create(spec, errs);
            validate_gated_create(spec, errs);
        }
    }
}

/// A PodTemplate: its template's pod spec.
pub(super) fn validate_pod_template(
    template: &PodTemplate,
    _old: Option<&PodTemplate>,
    errs: &mut Errors,
) {
    let empty = PodSpec::default();
    let spec = template.template.as_ref().and_then(|t| t.spec.as_ref());
    validate_pod_spec(spec.unwrap_or(&empty), "template.spec", errs);
}

/// [`validate_pod_spec`] on a pod spec in its JSON form (a workload's
/// template, for the kinds whose rules are still written on the JSON form);
/// one that does not decode is answered 400 when stored.
pub fn validate_pod_spec_json(spec: &Value, path: &str, errs: &mut Errors) {
    let spec = if spec.is_null() {
        Some(PodSpec::default())
    } else {
        typed::<PodSpec>(spec)
    };
    if let Some(spec) = spec {
        validate_pod_spec(&spec, path, errs);
    }
}

/// `schedulingGroup` (Workload API): exactly one group, a PodGroup named by
/// a DNS subdomain (it may not exist yet; the pod waits for it).
fn validate_scheduling_group(spec: &PodSpec, path: &str, errs: &mut Errors) {
    let Some(group) = &spec.scheduling_group else {
        return;
    };
    let at = format!("{path}.schedulingGroup.podGroupName");
    match group.pod_group_name.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(
            at,
            "must specify one of: `podGroupName`",
        )),
        name => {
            if let Some(e) = dns1123_subdomain_error(name) {
                errs.push(FieldError::invalid(at, &json!(name), e));
            }
        }
    }
}

/// A pod spec's regular containers with the list they are in and their index.
fn app_containers(spec: &PodSpec) -> impl Iterator<Item = (&'static str, usize, &Container)> {
    let app = spec.containers.iter().enumerate();
    app.map(|(i, c)| ("containers", i, c))
}

/// A pod spec's init containers with the list they are in and their index.
fn init_containers(spec: &PodSpec) -> impl Iterator<Item = (&'static str, usize, &Container)> {
    let init = spec.init_containers.iter().flatten().enumerate();
    init.map(|(i, c)| ("initContainers", i, c))
}

/// Validates a PodSpec at `path` (`spec` or `spec.template.spec`).
/// Long: Kubernetes' ValidatePodSpec checks in its order, which the
/// order of the errors in a 422 follows.
pub fn validate_pod_spec(spec: &PodSpec, path: &str, errs: &mut Errors) {
    if spec.containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    validate_pod_level_resources(spec, path, errs);
    validate_scheduling_gates(spec, path, errs);
    validate_scheduling_group(spec, path, errs);
    validate_resource_claims(spec, path, errs);
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    validate_volumes(volumes, path, errs);
    let volume_names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    let mut names = HashSet::new();
    for (list, i, c) in app_containers(spec).chain(init_containers(spec)) {
        let cp = format!("{path}.{list}[{i}]");
        validate_container(c, &cp, &volume_names, errs);
        let kind = if list == "initContainers" {
            ContainerKind::Init
        } else {
            ContainerKind::App
        };
        validate_container_lifecycle(c, &cp, kind, spec, errs);
        if !c.name.is_empty() && !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{cp}.name"), &json!(c.name)));
        }
    }
    one_of(
        errs,
        spec.restart_policy.as_deref(),
        &format!("{path}.restartPolicy"),
        &["Always", "OnFailure", "Never"],
    );
    one_of(
        errs,
        spec.dns_policy.as_deref(),
        &format!("{path}.dnsPolicy"),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    );
    if let Some(g) = spec.termination_grace_period_seconds.filter(|g| *g < 0) {
        errs.push(FieldError::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            &json!(g),
            "must be greater than or equal to 0",
        ));
    }
    validate_sysctls(spec, path, errs);
    if let Some(ads) = spec.active_deadline_seconds.filter(|n| *n <= 0) {
        errs.push(FieldError::invalid(
            format!("{path}.activeDeadlineSeconds"),
            &json!(ads),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    for (key, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if let Some(h) = value.as_deref().filter(|h| !h.is_empty()) {
            if let Some(e) = dns1123_label_error(h) {
                errs.push(FieldError::invalid(format!("{path}.{key}"), &json!(h), e));
            }
        }
    }
    for (k, v) in spec.node_selector.iter().flatten() {
        if let Some(e) = qualified_name_error(k) {
            errs.push(FieldError::invalid(
                format!("{path}.nodeSelector"),
                &json!(k),
                e,
            ));
        }
        if let Some(e) = label_value_error(v) {
            errs.push(FieldError::invalid(
                format!("{path}.nodeSelector"),
                &json!(v),
                e,
            ));
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let tp = format!("{path}.tolerations[{i}]");
        one_of(
            errs,
            t.operator.as_deref(),
            &format!("{tp}.operator"),
            &["Equal", "Exists"],
        );
        one_of(
            errs,
            t.effect.as_deref(),
            &format!("{tp}.effect"),
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        );
        let has_value = t.value.as_deref().is_some_and(|v| !v.is_empty());
        if t.operator.as_deref() == Some("Exists") && has_value {
            errs.push(FieldError::invalid(
                format!("{tp}.operator"),
                &json!("Exists"),
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            errs.push(FieldError::invalid(
                format!("{tp}.effect"),
                &json!(t.effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
}

/// A volume source's projected files (none when unset).
fn items(v: Option<&Vec<KeyToPath>>) -> &[KeyToPath] {
    v.map(Vec::as_slice).unwrap_or_default()
}

/// A required name that is a DNS label, once among `seen` (volumes, claims).
fn unique_label<'a>(errs: &mut Errors, path: String, name: &'a str, seen: &mut BTreeSet<&'a str>) {
    name_check(errs, path.clone(), name, dns1123_label_error);
    if !name.is_empty() && !seen.insert(name) {
        errs.push(FieldError::duplicate(path, &json!(name)));
    }
}

/// Volumes: named once each by a DNS label, a host path given, and the
/// files projected from ConfigMaps and Secrets kept inside the volume.
fn validate_volumes(volumes: &[Volume], path: &str, errs: &mut Errors) {
    let mut seen = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let vp = format!("{path}.volumes[{i}]");
        unique_label(errs, format!("{vp}.name"), &v.name, &mut seen);
        if v.host_path.as_ref().is_some_and(|hp| hp.path.is_empty()) {
            errs.push(FieldError::required(format!("{vp}.hostPath.path"), ""));
        }
        // Files projected from ConfigMaps and Secrets stay inside the volume.
        let mut item_lists = vec![
            (
                format!("{vp}.configMap.items"),
                items(v.config_map.as_ref().and_then(|c| c.items.as_ref())),
            ),
            (
                format!("{vp}.secret.items"),
                items(v.secret.as_ref().and_then(|s| s.items.as_ref())),
            ),
        ];
        let sources = v.projected.as_ref().and_then(|p| p.sources.as_ref());
        for (j, src) in sources.into_iter().flatten().enumerate() {
            let at = format!("{vp}.projected.sources[{j}]");
            item_lists.push((
                format!("{at}.configMap.items"),
                items(src.config_map.as_ref().and_then(|c| c.items.as_ref())),
            ));
            item_lists.push((
                format!("{at}.secret.items"),
                items(src.secret.as_ref().and_then(|s| s.items.as_ref())),
            ));
        }
        for (at, items) in item_lists {
            for (k, item) in items.iter().enumerate() {
                if let Some(e) = item_path_error(&item.path) {
                    errs.push(FieldError::invalid(
                        format!("{at}[{k}].path"),
                        &json!(item.path),
                        e,
                    ));
                }
            }
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
fn validate_sysctls(spec: &PodSpec, path: &str, errs: &mut Errors) {
    let sysctls = spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_ref());
    let mut seen = HashSet::new();
    for (i, s) in sysctls.into_iter().flatten().enumerate() {
        let at = format!("{path}.securityContext.sysctls[{i}].name");
        let n = s.name.as_str();
        if n.is_empty() {
            errs.push(FieldError::required(at, ""));
        } else if !is_sysctl_name(n) {
            errs.push(FieldError::invalid(
                at,
                &json!(n),
                "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            ));
        } else if !seen.insert(n) {
            errs.push(FieldError::duplicate(at, &json!(n)));
        } else {
            // A sysctl of a namespace the pod shares with its node would
            // change the node's.
            let dotted = n.replace('/', ".");
            let ipc = dotted.starts_with("kernel.shm")
                || dotted.starts_with("kernel.msg")
                || dotted == "kernel.sem"
                || dotted.starts_with("fs.mqueue.");
            let shared = if dotted.starts_with("net.") {
                Some(("hostNetwork", spec.host_network))
            } else if ipc {
                Some(("hostIPC", spec.host_ipc))
            } else {
                None
            };
            if let Some((flag, Some(true))) = shared {
                errs.push(FieldError::invalid(
                    at,
                    &json!(n),
                    format!("may not be specified when '{flag}' is true"),
                ));
            }
        }
    }
}

pub(super) fn validate_container(c: &Container, path: &str, volumes: &[&str], errs: &mut Errors) {
    name_check(errs, format!("{path}.name"), &c.name, dns1123_label_error);
    if c.image.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    one_of(
        errs,
        c.image_pull_policy.as_deref(),
        &format!("{path}.imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
    );
    let mut port_names = HashSet::new();
    for (i, p) in c.ports.iter().flatten().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        if p.container_port == 0 {
            errs.push(FieldError::required(format!("{pp}.containerPort"), ""));
        } else if !(1..=65535).contains(&p.container_port) {
            errs.push(FieldError::invalid(
                format!("{pp}.containerPort"),
                &json!(p.container_port),
                "must be between 1 and 65535, inclusive",
            ));
        }
        if let Some(hp) = p.host_port.filter(|n| !(0..=65535).contains(n)) {
            errs.push(FieldError::invalid(
                format!("{pp}.hostPort"),
                &json!(hp),
                "must be between 1 and 65535, inclusive",
            ));
        }
        one_of(
            errs,
            p.protocol.as_deref(),
            &format!("{pp}.protocol"),
            PROTOCOLS,
        );
        if let Some(n) = p.name.as_deref().filter(|n| !n.is_empty()) {
            if let Some(e) = port_name_error(n) {
                errs.push(FieldError::invalid(format!("{pp}.name"), &json!(n), e));
            }
            if !port_names.insert(n) {
                errs.push(FieldError::duplicate(format!("{pp}.name"), &json!(n)));
            }
        }
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        let at = format!("{path}.env[{i}]");
        if e.name.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        } else if !is_env_var_name(&e.name) {
            errs.push(FieldError::invalid(
                format!("{at}.name"),
                &json!(e.name),
                ENV_VAR_NAME_MESSAGE,
            ));
        }
        let field_ref = e.value_from.as_ref().and_then(|v| v.field_ref.as_ref());
        if field_ref.is_some_and(|f| f.field_path.is_empty()) {
            errs.push(FieldError::required(
                format!("{at}.valueFrom.fieldRef.fieldPath"),
                "",
            ));
        }
    }
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let mp = format!("{path}.volumeMounts[{i}]");
        if m.name.is_empty() {
            errs.push(FieldError::required(format!("{mp}.name"), ""));
        } else if !volumes.contains(&m.name.as_str()) {
            errs.push(FieldError::not_found(format!("{mp}.name"), &json!(m.name)));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(format!("{mp}.mountPath"), ""));
        }
    }
    if let Some(r) = &c.resources {
        validate_resources(r, path, errs);
    }
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
fn validate_resources(r: &ResourceRequirements, path: &str, errs: &mut Errors) {
    let parse = |q: &ApiQuantity| Quantity::parse(&q.0).ok();
    for (name, list) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (res, q) in list.iter().flatten() {
            let field = format!("{path}.resources.{name}[{res}]");
            match parse(q) {
                None => errs.push(FieldError::invalid(
                    field,
                    &json!(q.0),
                    "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$",
                )),
                Some(v) if v.0 < 0.0 => errs.push(FieldError::invalid(
                    field,
                    &json!(q.0),
                    "must be greater than or equal to 0",
                )),
                Some(_) => {}
            }
        }
    }
    let (Some(requests), Some(limits)) = (&r.requests, &r.limits) else {
        return;
    };
    for (res, q) in requests {
        let Some(limit) = limits.get(res) else {
            continue;
        };
        if let (Some(req), Some(lim)) = (parse(q), parse(limit)) {
            if req.0 > lim.0 {
                errs.push(FieldError::invalid(
                    format!("{path}.resources.requests[{res}]"),
                    &json!(q.0),
                    format!("must be less than or equal to {res} limit of {}", limit.0),
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
fn validate_pod_level_resources(spec: &PodSpec, path: &str, errs: &mut Errors) {
    let Some(r) = &spec.resources else {
        return;
    };
    validate_resources(r, path, errs);
    for (list, items) in [("requests", &r.requests), ("limits", &r.limits)] {
        for name in items.iter().flat_map(BTreeMap::keys) {
            if name != "cpu" && name != "memory" && !name.starts_with("hugepages-") {
                errs.push(FieldError::not_supported(
                    format!("{path}.resources.{list}"),
                    &json!(name),
                    &["cpu", "hugepages-1Gi", "hugepages-2Mi", "memory"],
                ));
            }
        }
    }
    let amount = |list: &Option<BTreeMap<String, ApiQuantity>>, res: &str| {
        list.as_ref()?
            .get(res)
            .and_then(|q| Quantity::parse(&q.0).ok())
    };
    let container_list = |c: &Container, limits: bool| {
        let r = c.resources.as_ref()?;
        Some(if limits {
            r.limits.clone()
        } else {
            r.requests.clone()
        })
    };
    for res in ["cpu", "memory"] {
        if let Some(pod_limit) = amount(&r.limits, res) {
            let lists = [
                (
                    "initContainers",
                    spec.init_containers.as_deref().unwrap_or_default(),
                ),
                ("containers", spec.containers.as_slice()),
            ];
            for (list, containers) in lists {
                for (i, c) in containers.iter().enumerate() {
                    let limit = container_list(c, true).flatten();
                    let shown = limit.as_ref().and_then(|l| l.get(res)).map(|q| q.0.clone());
                    if amount(&limit, res).is_some_and(|l| l.0 > pod_limit.0) {
                        errs.push(FieldError::invalid(
                            format!("{path}.{list}[{i}].resources.limits[{res}]"),
                            &json!(shown),
                            "must be less than or equal to pod limits",
                        ));
                    }
                }
            }
        }
        if let Some(q) = amount(&r.requests, res) {
            let sidecars = spec.init_containers.iter().flatten();
            let sidecars = sidecars.filter(|c| c.restart_policy.as_deref() == Some("Always"));
            let total: f64 = spec
                .containers
                .iter()
                .chain(sidecars)
                .filter_map(|c| amount(&container_list(c, false).flatten(), res))
                .map(|a| a.0)
                .sum();
            if q.0 + 1e-9 < total {
                let shown = r
                    .requests
                    .as_ref()
                    .and_then(|l| l.get(res))
                    .map(|q| q.0.clone());
                errs.push(FieldError::invalid(
                    format!("{path}.resources.requests[{res}]"),
                    &json!(shown),
                    format!(
                        "must be greater than or equal to aggregate container requests of {}",
                        shown_quantity(res, total)
                    ),
                ));
            }
        }
    }
}

fn gate_names(spec: &PodSpec) -> Vec<&str> {
    spec.scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect()
}

/// `spec.resourceClaims` (Dynamic Resource Allocation) and the containers'
/// `resources.claims`, which must name them (Kubernetes'
/// `validatePodResourceClaims` and `validateResourceClaimNames`).
fn validate_resource_claims(spec: &PodSpec, path: &str, errs: &mut Errors) {
    let mut names = BTreeSet::new();
    for (i, c) in spec.resource_claims.iter().flatten().enumerate() {
        let at = format!("{path}.resourceClaims[{i}]");
        unique_label(errs, format!("{at}.name"), &c.name, &mut names);
        let set = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        let claim = set(&c.resource_claim_name);
        let template = set(&c.resource_claim_template_name);
        match (&claim, &template) {
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
                    errs.push(FieldError::invalid(format!("{at}.{field}"), &json!(n), e));
                }
            }
        }
    }
    for (list, i, c) in init_containers(spec).chain(app_containers(spec)) {
        let claims = c.resources.as_ref().and_then(|r| r.claims.as_ref());
        let mut seen = HashSet::new();
        for (j, claim) in claims.into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}].resources.claims[{j}]");
            let name = claim.name.as_str();
            let request = claim.request.as_deref().unwrap_or_default();
            if name.is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
                continue;
            }
            if !seen.insert((name, request)) {
                errs.push(FieldError::duplicate(at.clone(), &json!(name)));
            }
            if !names.contains(name) {
                let mut e = FieldError::not_found(at.clone(), &json!(name));
                e.detail = if names.is_empty() {
                    "must be one of the names in pod.spec.resourceClaims which is empty".into()
                } else {
                    let all: Vec<&str> = names.iter().copied().collect();
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

/// `schedulingGates`: qualified names, each once.
fn validate_scheduling_gates(spec: &PodSpec, path: &str, errs: &mut Errors) {
    let mut seen = HashSet::new();
    for (i, g) in spec.scheduling_gates.iter().flatten().enumerate() {
        let at = format!("{path}.schedulingGates[{i}].name");
        let n = g.name.as_str();
        if n.is_empty() {
            errs.push(FieldError::required(at, ""));
            continue;
        }
        if let Some(e) = qualified_name_error(n) {
            errs.push(FieldError::invalid(at.clone(), &json!(n), e));
        }
        if !seen.insert(n) {
            errs.push(FieldError::duplicate(at, &json!(n)));
        }
    }
}

/// A gated pod is created unbound: the scheduler binds it once its gates are gone.
fn validate_gated_create(spec: &PodSpec, errs: &mut Errors) {
    let bound = spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
    if bound && !gate_names(spec).is_empty() {
        errs.push(FieldError::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
}

/// Scheduling gates are only ever removed (whoever added one removes it).
fn validate_gates_update(new: &PodSpec, old: &PodSpec, errs: &mut Errors) {
    let before = gate_names(old);
    for name in gate_names(new) {
        if !before.contains(&name) {
            errs.push(FieldError::forbidden(
                "spec.schedulingGates",
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

/// Pod updates may change only images, activeDeadlineSeconds, tolerations and grace period.
fn validate_pod_update(new: &PodSpec, old: &PodSpec, errs: &mut Errors) {
    validate_gates_update(new, old, errs);
    let mask = |spec: &PodSpec| {
        let mut s = spec.clone();
        for c in s
            .containers
            .iter_mut()
            .chain(s.init_containers.iter_mut().flatten())
        {
            c.image = None;
        }
        s.active_deadline_seconds = None;
        s.tolerations = None;
        s.termination_grace_period_seconds = None;
        s.scheduling_gates = None;
        // nodeName may be set once (by binding): an unset old value is not a change.
        if old.node_name.is_none() {
            s.node_name = None;
        }
        s
    };
    if mask(new) != mask(old) {
        errs.push(FieldError::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}
