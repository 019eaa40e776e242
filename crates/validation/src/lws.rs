//! LeaderWorkerSet validation, as upstream's admission webhook (LWS v0.11)
//! validates: the rules on create and on update, `groupIdentity` and the
//! group claim templates, and its defaults (the CRD schema's plus the
//! mutating webhook's). The type is `minik8s_api::lws`.

use crate::{int_or_percent_error, Errors, FieldError};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodResourceClaim, PodSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::lws::*;
use serde::Deserialize;
use serde_json::{json, Map, Value};

fn ensure_obj<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let e = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !e.is_object() {
        *e = json!({});
    }
    e.as_object_mut().expect("object")
}

fn set_default(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

/// The CRD schema defaults plus the mutating webhook.
pub fn default(obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let spec = ensure_obj(root, "spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "startupPolicy", json!("LeaderCreated"));
    let tmpl = ensure_obj(spec, "leaderWorkerTemplate");
    set_default(tmpl, "size", json!(1));
    match tmpl.get("restartPolicy").and_then(Value::as_str) {
        None | Some("") => {
            tmpl.insert("restartPolicy".into(), json!("RecreateGroupOnPodRestart"));
        }
        Some("Default") => {
            tmpl.insert("restartPolicy".into(), json!("None"));
        }
        _ => {}
    }
    if let Some(sg) = tmpl
        .get_mut("subGroupPolicy")
        .and_then(Value::as_object_mut)
    {
        set_default(sg, "subGroupPolicyType", json!("LeaderWorker"));
    }
    for t in ["leaderTemplate", "workerTemplate"] {
        if let Some(pt) = tmpl.get_mut(t).filter(|v| v.is_object()) {
            let ps = ensure_obj(pt.as_object_mut().expect("object"), "spec");
            crate::defaults::default_pod_spec(ps);
        }
    }
    let rs = ensure_obj(spec, "rolloutStrategy");
    set_default(rs, "type", json!("RollingUpdate"));
    if rs.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        match rs
            .get_mut("rollingUpdateConfiguration")
            .and_then(Value::as_object_mut)
        {
            None => {
                rs.insert(
                    "rollingUpdateConfiguration".into(),
                    json!({"partition": 0, "maxUnavailable": 1, "maxSurge": 0}),
                );
            }
            Some(ru) => {
                set_default(ru, "partition", json!(0));
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
        }
    }
    let nc = ensure_obj(spec, "networkConfig");
    set_default(nc, "subdomainPolicy", json!("Shared"));
    set_default(spec, "groupIdentity", json!(ORDINAL));
    if spec.get("groupIdentity") == Some(&json!(HASH)) {
        set_default(spec, "groupReplacementPolicy", json!(POST_TERMINATION));
    }
}

/// A value of an enumerated field, when set, is one of `allowed`.
fn check_enum(errs: &mut Errors, v: Option<&str>, path: &str, allowed: &[&str]) {
    if let Some(val) = v.filter(|v| !allowed.contains(v)) {
        errs.push(FieldError::not_supported(path, &json!(val), allowed));
    }
}

/// The group identity, empty read as `Ordinal`.
fn identity(spec: &LeaderWorkerSetSpec) -> &str {
    spec.group_identity
        .as_deref()
        .filter(|v| !v.is_empty())
        .unwrap_or(ORDINAL)
}

/// The leader's and workers' pod specs, named by their template field.
fn templates(tmpl: &LeaderWorkerTemplate) -> impl Iterator<Item = (&'static str, &PodSpec)> {
    let leader = tmpl.leader_template.as_ref().and_then(|t| t.spec.as_ref());
    let worker = tmpl.worker_template.spec.as_ref();
    [("leaderTemplate", leader), ("workerTemplate", worker)]
        .into_iter()
        .filter_map(|(name, spec)| Some((name, spec?)))
}

/// `groupIdentity` and `groupReplacementPolicy` (upstream v0.11): the
/// identity is immutable (empty and `Ordinal` are the same); Hash groups
/// have no ordinals, so what depends on them is refused with Hash (claim
/// templates, a partition), and so is what minik8s does not build for Hash
/// groups (gang scheduling, the TPU environment, which name hosts by
/// ordinal); `Immediate` replacement belongs to Hash.
fn validate_group_identity(
    lws: &LeaderWorkerSet,
    old: Option<&LeaderWorkerSet>,
    errs: &mut Errors,
) {
    let spec = &lws.spec;
    check_enum(
        errs,
        spec.group_identity.as_deref(),
        "spec.groupIdentity",
        &[ORDINAL, HASH],
    );
    check_enum(
        errs,
        spec.group_replacement_policy.as_deref(),
        "spec.groupReplacementPolicy",
        &[POST_TERMINATION, IMMEDIATE],
    );
    let hash = identity(spec) == HASH;
    if !hash && spec.group_replacement_policy.as_deref() == Some(IMMEDIATE) {
        errs.push(FieldError::invalid(
            "spec.groupReplacementPolicy",
            &json!(IMMEDIATE),
            "Immediate group replacement is only supported when groupIdentity is Hash",
        ));
    }
    if hash {
        validate_hash_groups(lws, errs);
    }
    if let Some(old) = old {
        if identity(&old.spec) != identity(spec) {
            errs.push(FieldError::invalid(
                "spec.groupIdentity",
                &json!(identity(spec)),
                "field is immutable",
            ));
        }
    }
}

/// What a Hash group cannot have (see [`validate_group_identity`]).
fn validate_hash_groups(lws: &LeaderWorkerSet, errs: &mut Errors) {
    let (spec, tmpl) = (&lws.spec, &lws.spec.leader_worker_template);
    if tmpl
        .volume_claim_templates
        .as_ref()
        .is_some_and(|t| !t.is_empty())
    {
        errs.push(FieldError::invalid(
            "spec.leaderWorkerTemplate.volumeClaimTemplates",
            &json!(HASH),
            "volumeClaimTemplates are not supported when groupIdentity is Hash",
        ));
    }
    let partition = spec
        .rollout_strategy
        .as_ref()
        .and_then(|r| r.rolling_update_configuration.as_ref())
        .and_then(|r| r.partition);
    if let Some(p) = partition.filter(|p| *p != 0) {
        errs.push(FieldError::invalid(
            "spec.rolloutStrategy.rollingUpdateConfiguration.partition",
            &json!(p),
            "partition must be 0 when groupIdentity is Hash",
        ));
    }
    let annotations = lws.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    let gang = annotation(GANG_SCHEDULING_ANNOTATION).map(String::as_str) == Some("true")
        || minik8s_api::lws_scheduling::scope(spec.scheduling.as_ref())
            != minik8s_api::lws_scheduling::GangScope::Off
        || templates(tmpl).any(|(_, pod)| {
            pod.scheduler_name.as_deref() == Some(minik8s_api::podgroup::VOLCANO_SCHEDULER)
        });
    if gang {
        errs.push(FieldError::invalid(
            "spec.groupIdentity",
            &json!(HASH),
            "minik8s does not gang-schedule Hash groups (a worker learns its leader's pod IP only once the leader is placed); use groupIdentity Ordinal for gang scheduling",
        ));
    }
    for a in [RESTART_BACKOFF, MAX_RESTARTS] {
        if let Some(v) = annotation(a) {
            errs.push(FieldError::invalid(
                format!("metadata.annotations[{a}]"),
                &json!(v),
                "group restart budgets follow group indexes; a Hash group is new after each recreation, so they apply to groupIdentity Ordinal only",
            ));
        }
    }
    let tpus = templates(tmpl).any(|(_, pod)| {
        serde_json::to_value(pod).is_ok_and(|pod| minik8s_api::lws_pod::pod_requests_tpus(&pod))
    });
    if tpus {
        errs.push(FieldError::invalid(
            "spec.groupIdentity",
            &json!(HASH),
            "minik8s does not set the TPU environment for Hash groups (TPU host names follow group ordinals); use groupIdentity Ordinal for TPU workloads",
        ));
    }
}

/// The pod spec as the group's pods will have it: an entry in
/// `resourceClaims` for each group claim (so containers may name them).
pub fn with_group_claims(pod_spec: &Value, group_claims: Option<&Value>) -> Value {
    let mut spec = pod_spec.clone();
    let entries = group_claims.and_then(Value::as_array);
    if !spec.is_object() || entries.is_none_or(|e| e.is_empty()) {
        return spec;
    }
    if !spec["resourceClaims"].is_array() {
        spec["resourceClaims"] = json!([]);
    }
    for e in entries.into_iter().flatten() {
        let name = e.get("name").cloned().unwrap_or(Value::Null);
        if let Some(list) = spec["resourceClaims"].as_array_mut() {
            list.push(json!({"name": name, "resourceClaimName": name}));
        }
    }
    spec
}

/// [`with_group_claims`] on a typed pod spec.
fn with_typed_group_claims(pod_spec: &PodSpec, group_claims: &[GroupResourceClaim]) -> PodSpec {
    let mut spec = pod_spec.clone();
    if group_claims.is_empty() {
        return spec;
    }
    let claims = spec.resource_claims.get_or_insert_with(Vec::new);
    for c in group_claims {
        claims.push(PodResourceClaim {
            name: c.name.clone(),
            resource_claim_name: Some(c.name.clone()),
            ..Default::default()
        });
    }
    spec
}

/// `leaderWorkerTemplate.resourceClaimTemplates`: named as pod claim
/// entries are, each once, and never an entry the templates already have.
fn validate_group_claims(tmpl: &LeaderWorkerTemplate, errs: &mut Errors) {
    let path = "spec.leaderWorkerTemplate.resourceClaimTemplates";
    let own: Vec<&str> = templates(tmpl)
        .flat_map(|(_, pod)| pod.resource_claims.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let entries = tmpl.resource_claim_templates.as_deref().unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        let name = e.name.as_str();
        match minik8s_api::names::dns1123_label_error(name) {
            _ if name.is_empty() => {
                errs.push(FieldError::required(format!("{path}[{i}].name"), ""))
            }
            Some(why) => errs.push(FieldError::invalid(
                format!("{path}[{i}].name"),
                &json!(name),
                why,
            )),
            None if !seen.insert(name) || own.contains(&name) => errs.push(FieldError::duplicate(
                format!("{path}[{i}].name"),
                &json!(name),
            )),
            None => {}
        }
        let template = e.resource_claim_template_name.as_str();
        if template.is_empty() {
            errs.push(FieldError::required(
                format!("{path}[{i}].resourceClaimTemplateName"),
                "",
            ));
        } else if let Some(why) = minik8s_api::names::dns1123_subdomain_error(template) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].resourceClaimTemplateName"),
                &json!(template),
                why,
            ));
        }
    }
}

/// A LeaderWorkerSet given as JSON (a DisaggregatedSet role's): decoded,
/// then [`validate_leader_worker_set`].
pub fn validate(obj: &Value, old: Option<&Value>) -> Errors {
    let lws = match LeaderWorkerSet::deserialize(obj) {
        Ok(lws) => lws,
        Err(e) => {
            return vec![FieldError::invalid(
                "spec",
                obj.get("spec").unwrap_or(&Value::Null),
                format!("does not decode as a LeaderWorkerSet spec: {e}"),
            )]
        }
    };
    let old = old.and_then(|o| LeaderWorkerSet::deserialize(o).ok());
    let mut errs = Vec::new();
    validate_leader_worker_set(&lws, old.as_ref(), &mut errs);
    errs
}

/// Upstream's webhook rules on create and update, and on update what may not
/// change; the name (a DNS-1035 label) is checked by metadata validation.
pub fn validate_leader_worker_set(
    lws: &LeaderWorkerSet,
    old: Option<&LeaderWorkerSet>,
    errs: &mut Errors,
) {
    let spec = &lws.spec;
    let tmpl = &spec.leader_worker_template;
    let replicas = i64::from(spec.replicas.unwrap_or(1));
    let size = i64::from(tmpl.size.unwrap_or(1));
    validate_counts(replicas, size, errs);
    validate_templates(tmpl, errs);
    check_enum(
        errs,
        tmpl.restart_policy.as_deref(),
        "spec.leaderWorkerTemplate.restartPolicy",
        &[
            "Default",
            "RecreateGroupOnPodRestart",
            "RecreateGroupAfterStart",
            "None",
        ],
    );
    check_enum(
        errs,
        spec.startup_policy.as_deref(),
        "spec.startupPolicy",
        &["LeaderCreated", "LeaderReady"],
    );
    check_enum(
        errs,
        spec.rollout_strategy
            .as_ref()
            .and_then(|r| r.type_.as_deref()),
        "spec.rolloutStrategy.type",
        &["RollingUpdate"],
    );
    check_enum(
        errs,
        spec.network_config
            .as_ref()
            .and_then(|n| n.subdomain_policy.as_deref()),
        "spec.networkConfig.subdomainPolicy",
        &["Shared", "UniquePerReplica"],
    );
    validate_group_identity(lws, old, errs);
    validate_rolling_update(spec, replicas, errs);
    validate_sub_groups(lws, size, errs);
    if let Some(old) = old {
        validate_update(lws, old, errs);
    }
    crate::lws_scheduling::validate(lws, old, errs);
    for (i, t) in tmpl.volume_claim_templates.iter().flatten().enumerate() {
        crate::storage::validate_claim_spec_json(
            t.get("spec").unwrap_or(&Value::Null),
            &format!("spec.leaderWorkerTemplate.volumeClaimTemplates[{i}].spec"),
            errs,
        );
    }
}

/// The group count and size: within upstream's bounds, and their product
/// within a StatefulSet's.
fn validate_counts(replicas: i64, size: i64, errs: &mut Errors) {
    if replicas < 0 {
        errs.push(FieldError::invalid(
            "spec.replicas",
            &json!(replicas),
            "replicas must be equal or greater than 0",
        ));
    }
    if replicas > 1_000_000 {
        errs.push(FieldError::invalid(
            "spec.replicas",
            &json!(replicas),
            "replicas must be equal or less than 1000000",
        ));
    }
    if size < 1 {
        errs.push(FieldError::invalid(
            "spec.leaderWorkerTemplate.size",
            &json!(size),
            "size must be equal or greater than 1",
        ));
    }
    if replicas.saturating_mul(size) > i32::MAX as i64 {
        errs.push(FieldError::invalid(
            "spec.replicas",
            &json!(replicas),
            "the product of replicas and worker replicas must not exceed 2147483647",
        ));
    }
}

/// The leader and worker pod templates (a worker template is required),
/// each with the group's claim templates as its volumes and claims.
fn validate_templates(tmpl: &LeaderWorkerTemplate, errs: &mut Errors) {
    validate_group_claims(tmpl, errs);
    let claim_templates: Vec<PersistentVolumeClaim> = tmpl
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| PersistentVolumeClaim::deserialize(t).ok())
        .collect();
    let group_claims = tmpl.resource_claim_templates.as_deref().unwrap_or_default();
    if tmpl.worker_template.spec.is_none() {
        errs.push(FieldError::required(
            "spec.leaderWorkerTemplate.workerTemplate",
            "",
        ));
    }
    for (name, pod) in templates(tmpl) {
        let pod = crate::apps::with_claim_volumes(pod, &claim_templates);
        crate::validate_pod_spec(
            &with_typed_group_claims(&pod, group_claims),
            &format!("spec.leaderWorkerTemplate.{name}.spec"),
            errs,
        );
    }
}

/// `rolloutStrategy.rollingUpdateConfiguration`: int-or-percent surge and
/// unavailability (not both 0), a non-negative partition.
fn validate_rolling_update(spec: &LeaderWorkerSetSpec, replicas: i64, errs: &mut Errors) {
    let ru_path = "spec.rolloutStrategy.rollingUpdateConfiguration";
    let Some(ru) = spec
        .rollout_strategy
        .as_ref()
        .and_then(|r| r.rolling_update_configuration.as_ref())
    else {
        return;
    };
    let as_json = |v: &Option<IntOrString>| v.as_ref().map_or(json!(0), |v| json!(v));
    let (mu, ms) = (as_json(&ru.max_unavailable), as_json(&ru.max_surge));
    let mut bad = false;
    for (name, v) in [("maxUnavailable", &mu), ("maxSurge", &ms)] {
        if let Some(e) = int_or_percent_error(v, false) {
            errs.push(FieldError::invalid(format!("{ru_path}.{name}"), v, e));
            bad = true;
        }
    }
    if let Some(p) = ru.partition.filter(|p| *p < 0) {
        errs.push(FieldError::invalid(
            format!("{ru_path}.partition"),
            &json!(p),
            "must be greater than or equal to 0",
        ));
    }
    if !bad && replicas != 0 {
        let u = scaled_value(&mu, replicas, false).unwrap_or(0);
        let s = scaled_value(&ms, replicas, true).unwrap_or(0).min(replicas);
        if u == 0 && s == 0 {
            errs.push(FieldError::invalid(
                format!("{ru_path}.maxUnavailable"),
                &mu,
                "must not be 0 when `maxSurge` is 0",
            ));
        }
    }
}

/// `subGroupPolicy`: its type and a size that divides the group (or the
/// group without its leader), and no subgroup topology annotation without it.
fn validate_sub_groups(lws: &LeaderWorkerSet, size: i64, errs: &mut Errors) {
    let sgp = lws.spec.leader_worker_template.sub_group_policy.as_ref();
    if let Some(sg) = sgp {
        let sp = "spec.leaderWorkerTemplate.subGroupPolicy";
        let kind = sg.sub_group_policy_type.as_deref();
        check_enum(
            errs,
            kind,
            &format!("{sp}.subGroupPolicyType"),
            &["LeaderWorker", "LeaderExcluded"],
        );
        match sg.sub_group_size.map(i64::from) {
            None => errs.push(FieldError::required(format!("{sp}.subGroupSize"), "")),
            Some(n) if n < 1 => errs.push(FieldError::invalid(
                format!("{sp}.subGroupSize"),
                &json!(n),
                "subGroupSize must be equal or greater than 1",
            )),
            Some(n) => {
                let mut invalid = |why: &str| {
                    errs.push(FieldError::invalid(
                        format!("{sp}.subGroupSize"),
                        &json!(n),
                        why,
                    ))
                };
                if size % n != 0 && (size - 1) % n != 0 {
                    invalid("size or size - 1 must be divisible by subGroupSize");
                }
                if n > size {
                    invalid("subGroupSize cannot be larger than size");
                }
                if kind == Some("LeaderExcluded") && (size - 1) % n != 0 {
                    invalid("size-1 must be divisible by subGroupSize when using LeaderExcluded");
                }
            }
        }
    }
    let topology = lws
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SUBGROUP_EXCLUSIVE_TOPOLOGY));
    if let (None, Some(topology)) = (sgp, topology) {
        errs.push(FieldError::invalid(
            format!("metadata.annotations[{SUBGROUP_EXCLUSIVE_TOPOLOGY}]"),
            &json!(topology),
            "cannot have subgroup-exclusive-topology without subGroupSize set",
        ));
    }
}

/// What an update may not change: the subgroup policy's presence and size,
/// and the claim templates.
fn validate_update(lws: &LeaderWorkerSet, old: &LeaderWorkerSet, errs: &mut Errors) {
    let (new_tmpl, old_tmpl) = (
        &lws.spec.leader_worker_template,
        &old.spec.leader_worker_template,
    );
    let sp = "spec.leaderWorkerTemplate.subGroupPolicy";
    match (&old_tmpl.sub_group_policy, &new_tmpl.sub_group_policy) {
        (None, Some(_)) => errs.push(FieldError::invalid(
            sp,
            &Value::Null,
            "cannot enable subGroupSize after the lws is already created",
        )),
        (Some(_), None) => errs.push(FieldError::invalid(
            sp,
            &Value::Null,
            "cannot remove subGroupSize after enabled",
        )),
        (Some(o), Some(n)) if o.sub_group_size != n.sub_group_size => {
            errs.push(FieldError::invalid(
                format!("{sp}.subGroupSize"),
                &json!(n.sub_group_size),
                "field is immutable",
            ));
        }
        _ => {}
    }
    // Upstream accepts the change and then fails to update its leader
    // StatefulSet for good (StatefulSets' claim templates are
    // immutable); minik8s refuses it up front.
    if new_tmpl.volume_claim_templates != old_tmpl.volume_claim_templates {
        errs.push(FieldError::forbidden(
            "spec.leaderWorkerTemplate.volumeClaimTemplates",
            "field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lws(spec: Value) -> Value {
        let mut o = json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "lws"},
            "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}});
        json_patch::merge(&mut o, &json!({"spec": spec}));
        default(&mut o);
        o
    }

    fn messages(obj: &Value, old: Option<&Value>) -> Vec<String> {
        validate(obj, old)
            .iter()
            .map(|e| e.detail.clone())
            .collect()
    }

    #[test]
    fn defaults_match_upstream() {
        let o = lws(json!({}));
        assert_eq!(o["spec"]["replicas"], 1);
        assert_eq!(o["spec"]["startupPolicy"], "LeaderCreated");
        assert_eq!(o["spec"]["leaderWorkerTemplate"]["size"], 1);
        assert_eq!(
            o["spec"]["leaderWorkerTemplate"]["restartPolicy"],
            "RecreateGroupOnPodRestart"
        );
        assert_eq!(
            o["spec"]["rolloutStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(
            o["spec"]["networkConfig"],
            json!({"subdomainPolicy": "Shared"})
        );
        assert!(validate(&o, None).is_empty(), "{:?}", validate(&o, None));
        let typed: LeaderWorkerSet = serde_json::from_value(o.clone()).unwrap();
        assert_eq!(typed.spec.leader_worker_template.size, Some(1));
        let d = lws(json!({"leaderWorkerTemplate": {"restartPolicy": "Default"}}));
        assert_eq!(d["spec"]["leaderWorkerTemplate"]["restartPolicy"], "None");
    }

    #[test]
    fn group_claims_are_named_once_and_containers_may_name_them() {
        let gpu = |name: &str| json!({"name": name, "resourceClaimTemplateName": "group-gpu"});
        let with_claims = |claims: Value| {
            lws(
                json!({"leaderWorkerTemplate": {"resourceClaimTemplates": claims,
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox",
                    "resources": {"claims": [{"name": "gpu"}]}}]}}}}),
            )
        };
        assert!(messages(&with_claims(json!([gpu("gpu")])), None).is_empty());
        // Without the entry, the container names a claim the pods would not have.
        let missing = messages(&with_claims(json!([])), None);
        assert!(
            missing
                .iter()
                .any(|m| m.contains("must be one of the names in pod.spec.resourceClaims")),
            "{missing:?}"
        );
        let errs: Vec<String> = validate(
            &with_claims(json!([gpu("gpu"), gpu("gpu"), gpu("Bad"), {"name": "x"}])),
            None,
        )
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect();
        assert!(errs.contains(&"spec.leaderWorkerTemplate.resourceClaimTemplates[1].name: Duplicate value: \"gpu\"".to_string()), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with(
                "spec.leaderWorkerTemplate.resourceClaimTemplates[2].name: Invalid value: \"Bad\""
            )),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.leaderWorkerTemplate.resourceClaimTemplates[3].resourceClaimTemplateName: Required value".to_string()), "{errs:?}");
        let typed: LeaderWorkerSet =
            serde_json::from_value(with_claims(json!([gpu("gpu")]))).unwrap();
        let claims = typed
            .spec
            .leader_worker_template
            .resource_claim_templates
            .unwrap();
        assert_eq!(claims[0].resource_claim_template_name, "group-gpu");
    }

    #[test]
    fn every_rule() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"replicas": -1}), "replicas must be equal or greater than 0"),
            (json!({"replicas": 1_000_001}), "replicas must be equal or less than 1000000"),
            (json!({"leaderWorkerTemplate": {"size": 0}}), "size must be equal or greater than 1"),
            (json!({"replicas": 1_000_000, "leaderWorkerTemplate": {"size": 1_000_000}}), "the product of replicas and worker replicas must not exceed 2147483647"),
            (json!({"rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": -1}}}), "must be greater than or equal to 0"),
            (json!({"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": "101%"}}}), "must not be greater than 100%"),
            (json!({"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": -1}}}), "must be greater than or equal to 0"),
            (json!({"replicas": 2, "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": "25%", "maxSurge": 0}}}), "must not be 0 when `maxSurge` is 0"),
            (json!({"leaderWorkerTemplate": {"size": 4, "subGroupPolicy": {"subGroupSize": 0}}}), "subGroupSize must be equal or greater than 1"),
            (json!({"leaderWorkerTemplate": {"size": 5, "subGroupPolicy": {"subGroupSize": 3}}}), "size or size - 1 must be divisible by subGroupSize"),
            (json!({"leaderWorkerTemplate": {"size": 2, "subGroupPolicy": {"subGroupSize": 3}}}), "subGroupSize cannot be larger than size"),
            (json!({"leaderWorkerTemplate": {"size": 4, "subGroupPolicy": {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}}}), "size-1 must be divisible by subGroupSize when using LeaderExcluded"),
            (json!({"startupPolicy": "Whenever"}), "supported values: \"LeaderCreated\", \"LeaderReady\""),
            (json!({"leaderWorkerTemplate": {"restartPolicy": "Sometimes"}}), "supported values: \"Default\", \"RecreateGroupOnPodRestart\", \"RecreateGroupAfterStart\", \"None\""),
            (json!({"networkConfig": {"subdomainPolicy": "Other"}}), "supported values: \"Shared\", \"UniquePerReplica\""),
            (json!({"groupIdentity": "Random"}), "supported values: \"Ordinal\", \"Hash\""),
            (json!({"groupReplacementPolicy": "Immediate"}), "Immediate group replacement is only supported when groupIdentity is Hash"),
            (json!({"groupReplacementPolicy": "Later"}), "supported values: \"PostTermination\", \"Immediate\""),
            (json!({"groupIdentity": "Hash", "leaderWorkerTemplate": {"volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}), "volumeClaimTemplates are not supported when groupIdentity is Hash"),
            (json!({"groupIdentity": "Hash", "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 1}}}), "partition must be 0 when groupIdentity is Hash"),
            (json!({"groupIdentity": "Hash", "leaderWorkerTemplate": {"workerTemplate": {"spec": {"schedulerName": "volcano"}}}}), "minik8s does not gang-schedule Hash groups (a worker learns its leader's pod IP only once the leader is placed); use groupIdentity Ordinal for gang scheduling"),
        ];
        for (spec, want) in cases {
            let o = lws(spec.clone());
            let got = messages(&o, None);
            assert!(
                got.iter().any(|m| m == want),
                "{spec}: want {want:?}, got {got:?}"
            );
        }
        let mut o = lws(json!({}));
        o["metadata"]["annotations"] = json!({SUBGROUP_EXCLUSIVE_TOPOLOGY: "zone"});
        assert_eq!(
            messages(&o, None),
            vec!["cannot have subgroup-exclusive-topology without subGroupSize set"]
        );
        // Allowed: replicas 0 with any percentages; partition beyond replicas.
        assert!(messages(&lws(json!({"replicas": 0, "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": "0%", "maxSurge": "0%"}}})), None).is_empty());
        assert!(messages(&lws(json!({"replicas": 2, "rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 5}}})), None).is_empty());
    }

    #[test]
    fn update_rules() {
        let plain = lws(json!({"leaderWorkerTemplate": {"size": 4}}));
        let with = lws(
            json!({"leaderWorkerTemplate": {"size": 4, "subGroupPolicy": {"subGroupSize": 2}}}),
        );
        let other = lws(
            json!({"leaderWorkerTemplate": {"size": 4, "subGroupPolicy": {"subGroupSize": 4}}}),
        );
        assert_eq!(
            messages(&with, Some(&plain)),
            vec!["cannot enable subGroupSize after the lws is already created"]
        );
        assert_eq!(
            messages(&plain, Some(&with)),
            vec!["cannot remove subGroupSize after enabled"]
        );
        assert_eq!(messages(&other, Some(&with)), vec!["field is immutable"]);
        let resized = lws(json!({"leaderWorkerTemplate": {"size": 6}}));
        assert!(messages(&resized, Some(&plain)).is_empty());
        // An empty groupIdentity and Ordinal are the same identity.
        let ordinal = lws(json!({"leaderWorkerTemplate": {"size": 4}, "groupIdentity": "Ordinal"}));
        assert!(messages(&ordinal, Some(&plain)).is_empty());
        let mut empty = plain.clone();
        empty["spec"]["groupIdentity"] = json!("");
        assert!(messages(&ordinal, Some(&empty)).is_empty());
        // The identity never changes.
        let hash = lws(json!({"leaderWorkerTemplate": {"size": 4}, "groupIdentity": "Hash"}));
        assert_eq!(messages(&hash, Some(&plain)), vec!["field is immutable"]);
        assert_eq!(messages(&plain, Some(&hash)), vec!["field is immutable"]);
    }

    #[test]
    fn hash_groups_default_to_post_termination_replacement() {
        let hash = lws(json!({"groupIdentity": "Hash"}));
        assert_eq!(hash["spec"]["groupReplacementPolicy"], POST_TERMINATION);
        assert!(
            validate(&hash, None).is_empty(),
            "{:?}",
            validate(&hash, None)
        );
        let typed: LeaderWorkerSet = serde_json::from_value(hash).unwrap();
        assert!(typed.spec.is_hash() && typed.spec.replaces_after_termination());
        let immediate =
            lws(json!({"groupIdentity": "Hash", "groupReplacementPolicy": "Immediate"}));
        let typed: LeaderWorkerSet = serde_json::from_value(immediate).unwrap();
        assert!(typed.spec.is_hash() && !typed.spec.replaces_after_termination());
        // Ordinal is the default identity and takes no replacement policy.
        let ordinal = lws(json!({}));
        assert_eq!(ordinal["spec"]["groupIdentity"], ORDINAL);
        assert!(ordinal["spec"].get("groupReplacementPolicy").is_none());
        // PostTermination is what Ordinal groups do anyway: accepted.
        assert!(messages(
            &lws(json!({"groupReplacementPolicy": "PostTermination"})),
            None
        )
        .is_empty());
    }
}
