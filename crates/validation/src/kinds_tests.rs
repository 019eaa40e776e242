//! Each kind's rules on typed objects, for the kinds whose rules files do
//! not test them themselves: the messages and field paths of the 422s.

use super::*;
use serde_json::json;

/// The messages `K`'s rules give `obj` (and `old`), decoded as `K`.
fn rules<K: KindRules>(obj: Value, old: Option<Value>) -> Vec<String> {
    let decode = |v: Value| serde_json::from_value::<K>(v).expect("decodes as its type");
    let old = old.map(decode);
    let mut errs = Vec::new();
    let rules = K::RULES.expect("the kind has rules");
    rules(&decode(obj), old.as_ref(), &mut errs);
    errs.iter().map(ToString::to_string).collect()
}

fn template(labels: Value) -> Value {
    json!({"metadata": {"labels": labels},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

#[test]
fn priority_classes_reserve_system_names_and_keep_their_value() {
    let class = |name: &str, value: i64| json!({"metadata": {"name": name}, "value": value});
    assert!(rules::<scheduling_v1::PriorityClass>(class("high", 1000), None).is_empty());
    assert!(rules::<scheduling_v1::PriorityClass>(
        class("system-node-critical", 2_000_001_000),
        None
    )
    .is_empty());
    assert_eq!(
        rules::<scheduling_v1::PriorityClass>(class("system-mine", 5), None),
        ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"]
    );
    assert_eq!(
        rules::<scheduling_v1::PriorityClass>(class("huge", 1_000_000_001), None),
        ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    );
    assert_eq!(
        rules::<scheduling_v1::PriorityClass>(json!({"metadata": {"name": "none"}}), None),
        ["value: Required value"]
    );
    assert_eq!(
        rules::<scheduling_v1::PriorityClass>(class("high", 2000), Some(class("high", 1000))),
        ["value: Forbidden: may not be changed in an update."]
    );
}

#[test]
fn endpoint_slices_name_an_address_type() {
    let slice = |t: &str| json!({"metadata": {"name": "s"}, "addressType": t});
    assert!(rules::<discovery_v1::EndpointSlice>(slice("IPv4"), None).is_empty());
    assert_eq!(
        rules::<discovery_v1::EndpointSlice>(slice(""), None),
        ["addressType: Required value"]
    );
    assert_eq!(
        rules::<discovery_v1::EndpointSlice>(slice("MAC"), None),
        ["addressType: Unsupported value: \"MAC\": supported values: \"IPv4\", \"IPv6\", \"FQDN\""]
    );
}

#[test]
fn pod_templates_hold_a_valid_pod_spec() {
    let t =
        json!({"metadata": {"name": "t"}, "template": {"spec": {"containers": [{"name": "c"}]}}});
    assert_eq!(
        rules::<core_v1::PodTemplate>(t, None),
        ["template.spec.containers[0].image: Required value"]
    );
}

#[test]
fn deployments_select_their_template_and_roll_within_bounds() {
    let deployment = |selector: Value, strategy: Value| {
        json!({"metadata": {"name": "d"}, "spec": {"selector": selector,
               "template": template(json!({"app": "web"})), "strategy": strategy}})
    };
    let app = json!({"matchLabels": {"app": "web"}});
    assert!(rules::<apps_v1::Deployment>(deployment(app.clone(), json!({})), None).is_empty());
    assert_eq!(
        rules::<apps_v1::Deployment>(
            json!({"metadata": {"name": "d"}, "spec": {"template": template(json!({"app": "web"}))}}),
            None
        ),
        ["spec.selector: Required value"]
    );
    assert_eq!(
        rules::<apps_v1::Deployment>(deployment(json!({"matchLabels": {"app": "db"}}), json!({})), None),
        ["spec.template.metadata.labels: Invalid value: \"app=web\": `selector` does not match template `labels`"]
    );
    let zero =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}});
    assert_eq!(
        rules::<apps_v1::Deployment>(deployment(app.clone(), zero), None),
        ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"]
    );
    let recreate = json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}});
    assert_eq!(
        rules::<apps_v1::Deployment>(deployment(app.clone(), recreate), None),
        ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
    );
    let moved = deployment(
        json!({"matchLabels": {"app": "web", "tier": "x"}}),
        json!({}),
    );
    let mut moved_template = moved.clone();
    moved_template["spec"]["template"] = template(json!({"app": "web", "tier": "x"}));
    assert_eq!(
        rules::<apps_v1::Deployment>(moved_template, Some(deployment(app, json!({})))),
        ["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"x\"}}: field is immutable"]
    );
}

#[test]
fn daemon_sets_and_replication_controllers_share_the_replicated_rules() {
    let mut ds = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": template(json!({"app": "web"})), "updateStrategy": {"type": "Sometimes"}}});
    assert_eq!(
        rules::<apps_v1::DaemonSet>(ds.clone(), None),
        ["spec.updateStrategy.type: Unsupported value: \"Sometimes\": supported values: \"RollingUpdate\", \"OnDelete\""]
    );
    ds["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    ds["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(
        rules::<apps_v1::DaemonSet>(ds, None),
        ["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
    // A ReplicationController's map selector is read as matchLabels.
    let rc = |selector: Value| {
        json!({"metadata": {"name": "r"}, "spec": {"replicas": -1, "selector": selector,
        "template": template(json!({"app": "web"}))}})
    };
    assert_eq!(
        rules::<core_v1::ReplicationController>(rc(json!({"app": "web"})), None),
        ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
    );
    assert_eq!(
        rules::<core_v1::ReplicationController>(rc(json!({"app": "db"})), None)[1],
        "spec.template.metadata.labels: Invalid value: \"app=web\": `selector` does not match template `labels`"
    );
}

#[test]
fn stateful_sets_mount_their_claim_templates_and_fix_their_identity() {
    let set = |service: &str| {
        let mut t = template(json!({"app": "db"}));
        t["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "data", "mountPath": "/data"}]);
        json!({"metadata": {"name": "db"}, "spec": {"serviceName": service,
            "selector": {"matchLabels": {"app": "db"}}, "template": t,
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}})
    };
    assert!(rules::<apps_v1::StatefulSet>(set("db"), None).is_empty());
    assert_eq!(
        rules::<apps_v1::StatefulSet>(set("Db_1"), None)[0],
        "spec.serviceName: Invalid value: \"Db_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    );
    let mut scaled = set("db");
    scaled["spec"]["replicas"] = json!(3);
    assert!(rules::<apps_v1::StatefulSet>(scaled, Some(set("db"))).is_empty());
    assert_eq!(
        rules::<apps_v1::StatefulSet>(set("other"), Some(set("db"))),
        ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
    );
}

#[test]
fn cron_jobs_need_a_schedule_and_a_job_template() {
    let cron = |schedule: &str| {
        json!({"metadata": {"name": "c"}, "spec": {"schedule": schedule,
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}})
    };
    assert!(rules::<batch_v1::CronJob>(cron("*/5 * * * *"), None).is_empty());
    assert_eq!(
        rules::<batch_v1::CronJob>(cron(""), None),
        ["spec.schedule: Required value"]
    );
    let mut no_policy = cron("@hourly");
    no_policy["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = Value::Null;
    assert_eq!(
        rules::<batch_v1::CronJob>(no_policy, None),
        ["spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    let mut long = cron("@daily");
    long["metadata"]["name"] = json!("c".repeat(53));
    assert_eq!(
        rules::<batch_v1::CronJob>(long, None)[0],
        format!(
            "metadata.name: Invalid value: \"{}\": must be no more than 52 characters",
            "c".repeat(53)
        )
    );
}

#[test]
fn device_classes_and_claim_templates_check_their_selectors() {
    let class = json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}});
    let got = rules::<resource_v1::DeviceClass>(class, None);
    assert!(
        got[0].starts_with("spec.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"),
        "{got:?}"
    );
    let claim_template = |class: &str| {
        json!({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": class}}]}}}})
    };
    assert!(rules::<resource_v1::ResourceClaimTemplate>(claim_template("gpu"), None).is_empty());
    let changed = rules::<resource_v1::ResourceClaimTemplate>(
        claim_template("other"),
        Some(claim_template("gpu")),
    );
    assert!(changed[0].ends_with("field is immutable"), "{changed:?}");
}
