//! Every rule of upstream's validating webhook, scenario by scenario.

use super::*;

fn role(name: &str, extra: Value) -> Value {
    let mut r = json!({"name": name, "spec": {"replicas": 2, "leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}});
    json_patch::merge(&mut r, &extra);
    r
}

fn ds(name: &str, roles: Vec<Value>, extra: Value) -> Value {
    let mut o = json!({"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
        "metadata": {"name": name}, "spec": {"roles": roles}});
    json_patch::merge(&mut o, &json!({"spec": extra}));
    minik8s_api::disaggregatedset::default(&mut o);
    o
}

fn two(extra: Value) -> Value {
    ds(
        "ds",
        vec![role("prefill", extra.clone()), role("decode", json!({}))],
        json!({}),
    )
}

fn errors(o: &Value) -> Vec<String> {
    validate(o, None).iter().map(|e| e.to_string()).collect()
}

fn has(o: &Value, want: &str) {
    let got = errors(o);
    assert!(got.iter().any(|e| e == want), "want {want:?}, got {got:?}");
}

#[test]
fn a_plain_set_is_valid() {
    assert!(
        errors(&two(json!({}))).is_empty(),
        "{:?}",
        errors(&two(json!({})))
    );
}

#[test]
fn schema_rules() {
    has(
        &ds("ds", vec![role("a", json!({}))], json!({})),
        "spec.roles: Invalid value: 1: spec.roles in body should have at least 2 items",
    );
    let many: Vec<Value> = (0..11).map(|i| role(&format!("r{i}"), json!({}))).collect();
    has(
        &ds("ds", many, json!({})),
        "spec.roles: Too many: 11: must have at most 10 items",
    );
    has(
        &ds(
            "ds",
            vec![role("a", json!({})), role("a", json!({}))],
            json!({}),
        ),
        "spec.roles[1]: Duplicate value: {\"name\":\"a\"}",
    );
    has(
        &ds("ds", vec![role("A_b", json!({})), role("b", json!({}))], json!({})),
        "spec.roles[0].name: Invalid value: \"A_b\": spec.roles[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
    );
    has(
        &ds(
            "ds",
            vec![role("", json!({})), role("b", json!({}))],
            json!({}),
        ),
        "spec.roles[0].name: Required value",
    );
    has(
        &ds(
            "ds",
            vec![role("a", json!({})), role("b", json!({}))],
            json!({"slices": 0}),
        ),
        "spec.slices: Invalid value: 0: spec.slices in body should be greater than or equal to 1",
    );
    has(
        &ds(
            "ds",
            vec![role("a", json!({})), role("b", json!({}))],
            json!({"slices": 101}),
        ),
        "spec.slices: Invalid value: 101: spec.slices in body should be less than or equal to 100",
    );
    has(
        &two(json!({"scaling": {"mode": "Auto"}})),
        "spec.roles[0].scaling.mode: Unsupported value: \"Auto\": supported values: \"Static\", \"External\"",
    );
    has(
        &ds("ds", vec![role("a", json!({})), role("b", json!({}))], json!({"placementPolicy": {"type": "Packed", "topology": "zone"}})),
        "spec.placementPolicy.type: Unsupported value: \"Packed\": supported values: \"None\", \"ExclusiveSlice\", \"ExclusiveTopology\"",
    );
    // The CEL rule: static roles all zero or all non-zero.
    has(
        &two(json!({"spec": {"replicas": 0}})),
        "spec: Invalid value: \"object\": replicas must be zero for all non-External roles or non-zero for all non-External roles",
    );
    let all_zero = ds(
        "ds",
        vec![
            role("a", json!({"spec": {"replicas": 0}})),
            role("b", json!({"spec": {"replicas": 0}})),
        ],
        json!({}),
    );
    assert!(errors(&all_zero).is_empty(), "{:?}", errors(&all_zero));
    let external_zero = two(json!({"scaling": {"mode": "External"}, "spec": {"replicas": 0}}));
    assert!(
        errors(&external_zero).is_empty(),
        "External roles do not count"
    );
}

#[test]
fn webhook_rules() {
    let ru = |v: Value| json!({"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": v}}});
    has(
        &two(json!({"spec": {"rolloutStrategy": {"type": "Recreate"}}})),
        "spec.roles[0].spec.rolloutStrategy.type: Unsupported value: \"Recreate\": supported values: \"RollingUpdate\"",
    );
    has(
        &two(ru(json!({"partition": 1}))),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition: Forbidden: partition is not supported by DisaggregatedSet; rolling updates are managed across roles by the DisaggregatedSet controller",
    );
    assert!(errors(&two(ru(json!({"partition": 0})))).is_empty());
    let zero = "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable: Invalid value: 0: must not be 0 when `maxSurge` is 0";
    has(&two(ru(json!({"maxUnavailable": 0, "maxSurge": 0}))), zero);
    has(
        &two(ru(json!({"maxUnavailable": "0%", "maxSurge": "0%"}))),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable: Invalid value: \"0%\": must not be 0 when `maxSurge` is 0",
    );
    has(
        &two(ru(json!({"maxUnavailable": -1}))),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &two(ru(json!({"maxSurge": "120%"}))),
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge: Invalid value: \"120%\": must not be greater than 100%",
    );
    assert!(errors(&two(ru(json!({"maxUnavailable": 0, "maxSurge": 1})))).is_empty());
    // At replicas 0 the zero pair is allowed (both roles at 0 for the CEL rule).
    let idle = ds(
        "ds",
        vec![
            role(
                "a",
                json!({"spec": {"replicas": 0, "rolloutStrategy": {"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 0}}}}),
            ),
            role("b", json!({"spec": {"replicas": 0}})),
        ],
        json!({}),
    );
    assert!(errors(&idle).is_empty(), "{:?}", errors(&idle));
    // External roles and slices.
    let ext = |slices: i64| {
        ds(
            "ds",
            vec![
                role("a", json!({"scaling": {"mode": "External"}})),
                role("b", json!({})),
            ],
            json!({"slices": slices}),
        )
    };
    assert!(errors(&ext(1)).is_empty());
    has(&ext(2), "spec.slices: Forbidden: spec.slices > 1 is not supported while any role has scaling.mode: External (alpha restriction)");
    assert_eq!(
        warnings(&ext(1)),
        vec!["role \"a\" sets scaling.mode: External and spec.replicas: 2 — spec.replicas is ignored; drive replicas via DisaggregatedSetRoleScaler \"ds-a\" instead"]
    );
    assert!(warnings(&two(json!({}))).is_empty());
    let long = "d".repeat(250);
    has(
        &ds(&long, vec![role("abc", json!({"scaling": {"mode": "External"}})), role("b", json!({}))], json!({})),
        &format!("spec.roles[0].name: Invalid value: \"abc\": would produce scaler name \"{long}-abc\" exceeding 253 characters"),
    );
}

#[test]
fn generated_names_fit_in_63() {
    // ds + role = 48 - digits: exactly 63 is fine, 64 is not.
    let named = |ds_len: usize, role_len: usize, slices: i64| {
        ds(
            &"d".repeat(ds_len),
            vec![role(&"r".repeat(role_len), json!({})), role("b", json!({}))],
            json!({"slices": slices}),
        )
    };
    assert!(errors(&named(40, 7, 1)).is_empty());
    has(
        &named(40, 8, 1),
        "spec.roles[0].name: Invalid value: \"rrrrrrrr\": the generated service name (64 chars) would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name and/or role name (combined limit: 47 characters)",
    );
    assert!(
        errors(&named(40, 6, 11)).is_empty(),
        "slices >= 11: 2 digits"
    );
    has(
        &named(40, 7, 11),
        "spec.roles[0].name: Invalid value: \"rrrrrrr\": the generated service name (64 chars) would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name and/or role name (combined limit: 46 characters)",
    );
}

#[test]
fn placement_rules() {
    let with = |policy: Value, r0: Value| {
        ds(
            "ds",
            vec![role("a", r0), role("b", json!({}))],
            json!({"placementPolicy": policy}),
        )
    };
    assert!(errors(&with(
        json!({"type": "ExclusiveSlice", "topology": "zone"}),
        json!({})
    ))
    .is_empty());
    has(
        &with(json!({"type": "ExclusiveTopology"}), json!({})),
        "spec.placementPolicy.topology: Required value: topology is required when type is not None",
    );
    let excl = json!({"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: "rack"}}});
    has(
        &with(json!({"type": "ExclusiveSlice", "topology": "zone"}), excl.clone()),
        "spec.roles[0]: Forbidden: the \"leaderworkerset.sigs.k8s.io/exclusive-topology\" annotation must not be combined with a non-None spec.placementPolicy.type (ExclusiveSlice)",
    );
    let in_worker = json!({"spec": {"leaderWorkerTemplate": {"subGroupPolicy": {"subGroupSize": 1},
        "workerTemplate": {"metadata": {"annotations": {SUBGROUP_EXCLUSIVE_TOPOLOGY: "rack"}}}}}});
    has(
        &with(json!({"type": "ExclusiveTopology", "topology": "zone"}), in_worker),
        "spec.roles[0]: Forbidden: the \"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology\" annotation must not be combined with a non-None spec.placementPolicy.type (ExclusiveTopology)",
    );
    // The annotation alone (policy None) is fine.
    assert!(errors(&with(json!({"type": "None"}), excl)).is_empty());
}

#[test]
fn embedded_lws_specs_obey_the_lws_rules() {
    has(
        &two(json!({"spec": {"leaderWorkerTemplate": {"size": 0}}})),
        "spec.roles[0].spec.leaderWorkerTemplate.size: Invalid value: 0: size must be equal or greater than 1",
    );
    let no_template = ds(
        "ds",
        vec![
            json!({"name": "a", "spec": {"replicas": 1}}),
            role("b", json!({})),
        ],
        json!({}),
    );
    has(
        &no_template,
        "spec.roles[0].spec.leaderWorkerTemplate.workerTemplate: Required value",
    );
}

#[test]
fn scaler_replicas_are_not_negative() {
    assert_eq!(
        validate_scaler(&json!({"spec": {"replicas": -1}}))[0].to_string(),
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
    );
    assert!(validate_scaler(&json!({"spec": {"replicas": 3}})).is_empty());
}
