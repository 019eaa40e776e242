//! The Workload API (`scheduling.k8s.io/v1beta1`, KEP-4671): Workload (a
//! workload's pod group templates) and PodGroup (one runtime group, what the
//! scheduler gangs), with Kubernetes 1.37's rules and messages. Typed.
//!
//! minik8s serves the gang and basic policies and one topology constraint;
//! what Kubernetes keeps behind alpha gates or other components (composite
//! groups, group priority and preemption, group resource claims, disruption
//! of a group as a whole) is refused by field rather than accepted and
//! ignored.

use super::{name_check, Errors, FieldError};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1::{
    DisruptionMode, PodGroup, PodGroupResourceClaim, PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy, PodGroupTemplate, Workload,
};
use minik8s_api::names::{dns1123_label_error, dns1123_subdomain_error, qualified_name_error};
use serde_json::{json, Value};
use std::collections::HashSet;

/// Kubernetes' bound on a Workload's templates.
const MAX_TEMPLATES: usize = 8;

/// `basic` or `gang`, exactly one; a gang of at least one pod.
fn policy(errs: &mut Errors, path: &str, p: &PodGroupSchedulingPolicy) {
    match (&p.basic, &p.gang) {
        (None, None) => errs.push(FieldError::invalid(
            path,
            &Value::Null,
            "must specify one of: `basic`, `gang`",
        )),
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            &json!("{basic, gang}"),
            "must specify exactly one of: `basic`, `gang`",
        )),
        (None, Some(g)) if g.min_count < 1 => errs.push(FieldError::invalid(
            format!("{path}.gang.minCount"),
            &json!(g.min_count),
            "must be greater than or equal to 1",
        )),
        _ => {}
    }
}

/// One topology constraint at most, keyed by a label key.
fn constraints(errs: &mut Errors, path: &str, c: Option<&PodGroupSchedulingConstraints>) {
    let topology = c.and_then(|c| c.topology.as_deref()).unwrap_or(&[]);
    if topology.len() > 1 {
        errs.push(FieldError::too_many(
            format!("{path}.topology"),
            topology.len(),
            1,
        ));
    }
    for (i, t) in topology.iter().enumerate() {
        name_check(
            errs,
            format!("{path}.topology[{i}].key"),
            &t.key,
            qualified_name_error,
        );
    }
}

/// The fields minik8s does not act on, refused where they are set.
struct Extras<'a> {
    resource_claims: Option<&'a Vec<PodGroupResourceClaim>>,
    disruption: Option<&'a DisruptionMode>,
    priority_class: Option<&'a String>,
    priority: Option<i32>,
    preemption: Option<&'a String>,
}

fn refuse_extras(errs: &mut Errors, path: &str, x: Extras) {
    let mut refuse = |field: &str, what: &str| {
        errs.push(FieldError::forbidden(
            format!("{path}.{field}"),
            format!("{what} is not supported by minik8s"),
        ))
    };
    if x.resource_claims.is_some_and(|c| !c.is_empty()) {
        refuse(
            "resourceClaims",
            "sharing ResourceClaims through a pod group (DRAWorkloadResourceClaims)",
        );
    }
    if x.disruption.is_some_and(|d| d.all.is_some()) {
        refuse("disruptionMode.all", "disrupting a pod group as a whole");
    }
    if x.priority_class.is_some() {
        refuse("priorityClassName", "pod group priority");
    }
    if x.priority.is_some() {
        refuse("priority", "pod group priority");
    }
    if x.preemption.is_some() {
        refuse("preemptionPolicy", "pod group preemption policies");
    }
}

fn template(errs: &mut Errors, path: &str, t: &PodGroupTemplate) {
    name_check(errs, format!("{path}.name"), &t.name, dns1123_label_error);
    policy(
        errs,
        &format!("{path}.schedulingPolicy"),
        &t.scheduling_policy,
    );
    constraints(
        errs,
        &format!("{path}.schedulingConstraints"),
        t.scheduling_constraints.as_ref(),
    );
    refuse_extras(
        errs,
        path,
        Extras {
            resource_claims: t.resource_claims.as_ref(),
            disruption: t.disruption_mode.as_ref(),
            priority_class: t.priority_class_name.as_ref(),
            priority: t.priority,
            preemption: t.preemption_policy.as_ref(),
        },
    );
}

/// What a policy is, for "may not change policy after creation".
fn policy_kind(p: &PodGroupSchedulingPolicy) -> &'static str {
    if p.gang.is_some() {
        "gang"
    } else {
        "basic"
    }
}

/// A template or PodGroup spec with its mutable part (gang.minCount) cleared.
fn frozen<T: serde::Serialize>(v: &T) -> Value {
    let mut v = serde_json::to_value(v).unwrap_or(Value::Null);
    if let Some(g) = v.pointer_mut("/schedulingPolicy/gang") {
        g["minCount"] = json!(0);
    }
    v
}

pub fn validate_workload(w: &Workload, old: Option<&Workload>, errs: &mut Errors) {
    let spec = &w.spec;
    if spec.composite_pod_group_templates.is_some() {
        errs.push(FieldError::forbidden(
            "spec.compositePodGroupTemplates",
            "composite pod groups (CompositePodGroup) are not supported by minik8s",
        ));
    }
    let templates = spec.pod_group_templates.as_deref().unwrap_or(&[]);
    if spec.pod_group_templates.is_none() && spec.composite_pod_group_templates.is_none() {
        errs.push(FieldError::invalid(
            "spec",
            &Value::Null,
            "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`",
        ));
    } else if spec.pod_group_templates.is_some() && templates.is_empty() {
        errs.push(FieldError::required("spec.podGroupTemplates", ""));
    }
    if templates.len() > MAX_TEMPLATES {
        errs.push(FieldError::too_many(
            "spec.podGroupTemplates",
            templates.len(),
            MAX_TEMPLATES,
        ));
    }
    let mut seen = HashSet::new();
    for (i, t) in templates.iter().enumerate() {
        let path = format!("spec.podGroupTemplates[{i}]");
        if !t.name.is_empty() && !seen.insert(t.name.as_str()) {
            errs.push(FieldError::duplicate(
                format!("{path}.name"),
                &json!(t.name),
            ));
        }
        template(errs, &path, t);
    }
    if let Some(r) = &spec.controller_ref {
        if r.kind.is_empty() {
            errs.push(FieldError::required("spec.controllerRef.kind", ""));
        }
        if r.name.is_empty() {
            errs.push(FieldError::required("spec.controllerRef.name", ""));
        }
    }
    let Some(old) = old else {
        return;
    };
    if old.spec.controller_ref != spec.controller_ref {
        errs.push(FieldError::invalid(
            "spec.controllerRef",
            &json!(spec.controller_ref),
            "field is immutable",
        ));
    }
    let old_templates = old.spec.pod_group_templates.as_deref().unwrap_or_default();
    let names = |ts: &[PodGroupTemplate]| ts.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    if names(old_templates) != names(templates) {
        errs.push(FieldError::forbidden(
            "spec.podGroupTemplates",
            "templates may not be added or removed",
        ));
        return;
    }
    for (i, (t, o)) in templates.iter().zip(old_templates).enumerate() {
        let path = format!("spec.podGroupTemplates[{i}]");
        if policy_kind(&t.scheduling_policy) != policy_kind(&o.scheduling_policy) {
            errs.push(FieldError::invalid(
                format!("{path}.schedulingPolicy"),
                &json!(policy_kind(&t.scheduling_policy)),
                "field is immutable",
            ));
        } else if frozen(t) != frozen(o) {
            errs.push(FieldError::invalid(
                &path,
                &json!(t.name),
                "field is immutable except schedulingPolicy.gang.minCount",
            ));
        }
    }
}

pub fn validate_pod_group(pg: &PodGroup, old: Option<&PodGroup>, errs: &mut Errors) {
    let spec = &pg.spec;
    policy(errs, "spec.schedulingPolicy", &spec.scheduling_policy);
    constraints(
        errs,
        "spec.schedulingConstraints",
        spec.scheduling_constraints.as_ref(),
    );
    if spec.parent_composite_pod_group_name.is_some() {
        errs.push(FieldError::forbidden(
            "spec.parentCompositePodGroupName",
            "composite pod groups (CompositePodGroup) are not supported by minik8s",
        ));
    }
    refuse_extras(
        errs,
        "spec",
        Extras {
            resource_claims: spec.resource_claims.as_ref(),
            disruption: spec.disruption_mode.as_ref(),
            priority_class: spec.priority_class_name.as_ref(),
            priority: spec.priority,
            preemption: spec.preemption_policy.as_ref(),
        },
    );
    if let Some(r) = &spec.workload_ref {
        name_check(
            errs,
            "spec.workloadRef.workloadName".into(),
            &r.workload_name,
            dns1123_subdomain_error,
        );
        name_check(
            errs,
            "spec.workloadRef.templateName".into(),
            &r.template_name,
            dns1123_label_error,
        );
    }
    let Some(old) = old else {
        return;
    };
    if policy_kind(&old.spec.scheduling_policy) != policy_kind(&spec.scheduling_policy) {
        errs.push(FieldError::invalid(
            "spec.schedulingPolicy",
            &json!(policy_kind(&spec.scheduling_policy)),
            "field is immutable",
        ));
    } else if frozen(&old.spec) != frozen(spec) {
        errs.push(FieldError::invalid(
            "spec",
            &Value::Null,
            "field is immutable except schedulingPolicy.gang.minCount",
        ));
    }
}

/// The built-in PriorityClasses (their names are reserved): (name, value,
/// description). The apiserver creates them at start.
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i32, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The highest value a user's PriorityClass may have.
const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// PriorityClass (`scheduling.k8s.io/v1`), as Kubernetes'
/// `ValidatePriorityClass(Update)`: `system-` names are reserved for the
/// built-in classes, a user's value is at most one billion, and value and
/// preemption policy are fixed once created.
pub fn validate_priority_class(
    class: &PriorityClass,
    old: Option<&PriorityClass>,
    errs: &mut Errors,
) {
    let name = class.metadata.name.as_deref().unwrap_or_default();
    if class.value.is_none() {
        errs.push(FieldError::required("value", ""));
    }
    if name.starts_with("system-") {
        let known = SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|(n, v, _)| *n == name && Some(*v) == class.value);
        if !known {
            errs.push(FieldError::forbidden(
                "metadata.name",
                format!("priority class names with 'system-' prefix are reserved for system use only. error: {name} is not a known system priority class"),
            ));
        }
    } else if class.value > Some(HIGHEST_USER_DEFINABLE_PRIORITY) {
        errs.push(FieldError::forbidden(
            "value",
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    let policies = ["Never", "PreemptLowerPriority"];
    if let Some(p) = class.preemption_policy.as_deref() {
        if !policies.contains(&p) {
            errs.push(FieldError::not_supported(
                "preemptionPolicy",
                &json!(p),
                &policies,
            ));
        }
    }
    let Some(old) = old else {
        return;
    };
    if old.value != class.value {
        errs.push(FieldError::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    if old.preemption_policy != class.preemption_policy {
        errs.push(FieldError::invalid(
            "preemptionPolicy",
            &json!(class.preemption_policy),
            "field is immutable",
        ));
    }
}

/// Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`), as its CRD's
/// schema has it: `minMember` at least 0, `minResources` quantities.
pub fn validate_volcano_pod_group(
    group: &minik8s_api::podgroup::PodGroup,
    _old: Option<&minik8s_api::podgroup::PodGroup>,
    errs: &mut Errors,
) {
    if let Some(m) = group.spec.min_member.filter(|m| *m < 0) {
        errs.push(FieldError::invalid(
            "spec.minMember",
            &json!(m),
            "spec.minMember in body should be greater than or equal to 0",
        ));
    }
    for (k, v) in group.spec.min_resources.iter().flatten() {
        let ok = match v {
            Value::String(s) => minik8s_api::quantity::Quantity::parse(s).is_ok(),
            Value::Number(_) => true,
            _ => false,
        };
        if !ok {
            errs.push(FieldError::invalid(
                format!("spec.minResources[{k}]"),
                v,
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of rules `f` on `obj` (and `old`) decoded as their type.
    fn messages<T: serde::de::DeserializeOwned>(
        f: crate::Rules<T>,
        obj: Value,
        old: Option<Value>,
    ) -> Vec<String> {
        let decode = |v: Value| serde_json::from_value::<T>(v).unwrap();
        let old = old.map(decode);
        let mut errs = Vec::new();
        f(&decode(obj), old.as_ref(), &mut errs);
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.detail))
            .collect()
    }

    fn workload(templates: Value) -> Value {
        json!({"metadata": {"name": "w"}, "spec": {"podGroupTemplates": templates}})
    }

    fn group(spec: Value) -> Value {
        json!({"metadata": {"name": "g"}, "spec": spec})
    }

    #[test]
    fn workloads_need_named_templates_with_one_policy() {
        let gang = json!({"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}});
        assert!(messages(validate_workload, workload(json!([gang])), None).is_empty());
        let cases = [
            (json!([{"name": "a", "schedulingPolicy": {}}]), "spec.podGroupTemplates[0].schedulingPolicy: must specify one of: `basic`, `gang`"),
            (json!([{"name": "a", "schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}]), "spec.podGroupTemplates[0].schedulingPolicy: must specify exactly one of: `basic`, `gang`"),
            (json!([{"name": "a", "schedulingPolicy": {"gang": {"minCount": 0}}}]), "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: must be greater than or equal to 1"),
            (json!([{"name": "A_b", "schedulingPolicy": {"basic": {}}}]), "spec.podGroupTemplates[0].name: a lowercase RFC 1123 label"),
            (json!([gang, gang]), "spec.podGroupTemplates[1].name: "),
            (json!([{"name": "a", "schedulingPolicy": {"basic": {}}, "priorityClassName": "high"}]), "spec.podGroupTemplates[0].priorityClassName: pod group priority is not supported by minik8s"),
            (json!([{"name": "a", "schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}]), "spec.podGroupTemplates[0].schedulingConstraints.topology: "),
        ];
        for (templates, want) in cases {
            let got = messages(validate_workload, workload(templates.clone()), None);
            assert!(
                got.iter().any(|m| m.starts_with(want)),
                "{templates}: want {want:?}, got {got:?}"
            );
        }
        let nine: Vec<Value> = (0..9)
            .map(|i| json!({"name": format!("t{i}"), "schedulingPolicy": {"basic": {}}}))
            .collect();
        let got = messages(validate_workload, workload(json!(nine)), None);
        assert!(
            got.iter().any(|m| m.contains("must have at most 8 items")),
            "{got:?}"
        );
        let got = messages(
            validate_workload,
            json!({"metadata": {"name": "w"}, "spec": {}}),
            None,
        );
        assert_eq!(
            got,
            vec!["spec: must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"]
        );
    }

    #[test]
    fn a_workload_keeps_its_templates_but_min_count() {
        let at = |min: i32| {
            workload(json!([{"name": "g", "schedulingPolicy": {"gang": {"minCount": min}}}]))
        };
        assert!(
            messages(validate_workload, at(6), Some(at(4))).is_empty(),
            "minCount scales"
        );
        let basic = workload(json!([{"name": "g", "schedulingPolicy": {"basic": {}}}]));
        assert_eq!(
            messages(validate_workload, basic, Some(at(4))),
            vec!["spec.podGroupTemplates[0].schedulingPolicy: field is immutable"]
        );
        let more = workload(
            json!([{"name": "g", "schedulingPolicy": {"gang": {"minCount": 4}}},
            {"name": "h", "schedulingPolicy": {"basic": {}}}]),
        );
        assert_eq!(
            messages(validate_workload, more, Some(at(4))),
            vec!["spec.podGroupTemplates: templates may not be added or removed"]
        );
    }

    #[test]
    fn pod_groups_follow_the_same_rules_and_refuse_what_is_not_served() {
        let ok = group(json!({"schedulingPolicy": {"gang": {"minCount": 3}},
            "workloadRef": {"workloadName": "w", "templateName": "workers"},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
            "disruptionMode": {"single": {}}}));
        assert!(messages(validate_pod_group, ok.clone(), None).is_empty());
        let got = messages(
            validate_pod_group,
            group(json!({"schedulingPolicy": {"basic": {}},
            "parentCompositePodGroupName": "p", "disruptionMode": {"all": {}},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]})),
            None,
        );
        assert_eq!(got, vec![
            "spec.parentCompositePodGroupName: composite pod groups (CompositePodGroup) are not supported by minik8s",
            "spec.resourceClaims: sharing ResourceClaims through a pod group (DRAWorkloadResourceClaims) is not supported by minik8s",
            "spec.disruptionMode.all: disrupting a pod group as a whole is not supported by minik8s",
        ]);
        let got = messages(
            validate_pod_group,
            group(json!({"schedulingPolicy": {"gang": {"minCount": 3}},
            "workloadRef": {"workloadName": "", "templateName": "Bad"}})),
            None,
        );
        assert_eq!(got.len(), 2, "{got:?}");
        // minCount may change; the policy and the reference may not.
        let mut scaled = ok.clone();
        scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(5);
        assert!(messages(validate_pod_group, scaled, Some(ok.clone())).is_empty());
        let mut moved = ok.clone();
        moved["spec"]["workloadRef"]["templateName"] = json!("other");
        assert_eq!(
            messages(validate_pod_group, moved, Some(ok)),
            vec!["spec: field is immutable except schedulingPolicy.gang.minCount"]
        );
    }

    #[test]
    fn volcano_pod_groups_count_members_and_quantities() {
        let check = |v: Value| {
            let mut errs = Vec::new();
            validate_volcano_pod_group(&serde_json::from_value(v).unwrap(), None, &mut errs);
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        };
        assert!(
            check(json!({"spec": {"minMember": 3, "minResources": {"cpu": "500m"}}})).is_empty()
        );
        assert_eq!(
            check(json!({"spec": {"minMember": -1}})),
            ["spec.minMember: Invalid value: -1: spec.minMember in body should be greater than or equal to 0"]
        );
        assert_eq!(
            check(json!({"spec": {"minResources": {"cpu": "lots"}}})),
            ["spec.minResources[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"]
        );
    }
}
