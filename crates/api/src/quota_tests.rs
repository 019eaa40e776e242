//! Quota accounting against worked examples of Kubernetes' behaviour.

use super::*;
use serde_json::json;

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-11-28T12:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc)
}

fn pod(name: &str, cpu: Option<&str>) -> Value {
    let resources = match cpu {
        Some(c) => json!({"requests": {"cpu": c, "memory": "64Mi"}, "limits": {"memory": "64Mi"}}),
        None => json!({}),
    };
    json!({"metadata": {"name": name, "namespace": "s1"},
           "spec": {"containers": [{"name": "app", "image": "busybox", "resources": resources}]}})
}

fn quota(hard: Value, used: Option<Value>) -> Value {
    let mut q = json!({"metadata": {"name": "q", "namespace": "s1"}, "spec": {"hard": hard.clone()},
                       "status": {"hard": hard}});
    if let Some(u) = used {
        q["status"]["used"] = u;
    }
    q
}

fn req<'a>(obj: &'a Value) -> Request<'a> {
    Request {
        plural: "pods",
        group: "",
        obj,
        old: None,
        now: now(),
    }
}

fn shown(u: &Usage) -> String {
    pretty(u)
}

#[test]
fn a_pod_uses_its_requests_limits_and_one_pod() {
    let mut p = pod("a", Some("100m"));
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "b", "image": "x", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}}));
    assert_eq!(
        shown(&pod_usage(&p, now())),
        "count/pods=1,cpu=300m,limits.memory=64Mi,memory=128Mi,pods=1,requests.cpu=300m,requests.memory=128Mi"
    );
    // Finished pods keep their object count only.
    p["status"] = json!({"phase": "Succeeded"});
    assert_eq!(shown(&pod_usage(&p, now())), "count/pods=1");
}

#[test]
fn init_containers_count_as_their_largest_and_sidecars_add_up() {
    let p = json!({"spec": {
        "initContainers": [
            {"name": "init", "resources": {"requests": {"cpu": "1"}}},
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "200m"}}}]}});
    // max(1, 200m + 100m) = 1
    assert_eq!(pod_resources(&p, "requests")["cpu"].to_string(), "1");
}

#[test]
fn the_third_pod_exceeds_a_quota_of_two() {
    let q = quota(
        json!({"pods": "2", "requests.cpu": "500m"}),
        Some(json!({"pods": "2", "requests.cpu": "200m"})),
    );
    let p = pod("c", Some("100m"));
    assert_eq!(
        check(&[q], &req(&p)).unwrap_err(),
        "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
    );
}

#[test]
fn cpu_over_the_quota_names_only_what_is_exceeded() {
    let q = quota(
        json!({"pods": "10", "requests.cpu": "500m"}),
        Some(json!({"pods": "1", "requests.cpu": "400m"})),
    );
    let p = pod("c", Some("200m"));
    assert_eq!(
        check(std::slice::from_ref(&q), &req(&p)).unwrap_err(),
        "exceeded quota: q, requested: requests.cpu=200m, used: requests.cpu=400m, limited: requests.cpu=500m"
    );
    let fits = pod("d", Some("100m"));
    let charged = check(&[q], &req(&fits)).unwrap();
    assert_eq!(charged.len(), 1);
    assert_eq!(shown(&charged[0].1), "pods=2,requests.cpu=500m");
}

#[test]
fn a_compute_quota_requires_requests_of_every_container() {
    let q = quota(
        json!({"requests.cpu": "1", "limits.memory": "1Gi"}),
        Some(json!({"requests.cpu": "0", "limits.memory": "0"})),
    );
    let p = pod("bare", None);
    assert_eq!(
        check(&[q], &req(&p)).unwrap_err(),
        "failed quota: q: must specify limits.memory for: app; requests.cpu for: app"
    );
}

#[test]
fn a_quota_without_status_is_unknown() {
    let q = quota(json!({"pods": "2"}), None);
    assert_eq!(
        check(&[q], &req(&pod("a", None))).unwrap_err(),
        "status unknown for quota: q, resources: pods"
    );
}

#[test]
fn scopes_select_the_pods_a_quota_counts() {
    let mut q = quota(json!({"pods": "1"}), Some(json!({"pods": "1"})));
    q["spec"]["scopes"] = json!(["BestEffort"]);
    // A Burstable pod is not BestEffort: the quota does not count it.
    assert!(
        check(std::slice::from_ref(&q), &req(&pod("a", Some("100m"))))
            .unwrap()
            .is_empty()
    );
    assert!(check(std::slice::from_ref(&q), &req(&pod("b", None))).is_err());
    let mut by_class = quota(json!({"pods": "1"}), Some(json!({"pods": "1"})));
    by_class["spec"]["scopeSelector"] = json!({"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]});
    let mut high = pod("h", None);
    high["spec"]["priorityClassName"] = json!("high");
    assert!(check(std::slice::from_ref(&by_class), &req(&high)).is_err());
    assert!(check(&[by_class], &req(&pod("l", None)))
        .unwrap()
        .is_empty());
}

#[test]
fn services_count_node_ports_and_load_balancers() {
    let svc = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}});
    assert_eq!(
        shown(&service_usage(&svc)),
        "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
    );
    let q = quota(
        json!({"services.nodeports": "1"}),
        Some(json!({"services.nodeports": "0"})),
    );
    let r = Request {
        plural: "services",
        group: "",
        obj: &svc,
        old: None,
        now: now(),
    };
    assert_eq!(
        check(&[q], &r).unwrap_err(),
        "exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1"
    );
}

#[test]
fn claims_count_storage_per_class() {
    let pvc = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}});
    assert_eq!(
        shown(&claim_usage(&pvc)),
        "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,requests.storage=1Gi"
    );
}

#[test]
fn an_update_is_charged_its_growth_only() {
    let q = quota(
        json!({"requests.storage": "2Gi"}),
        Some(json!({"requests.storage": "1Gi"})),
    );
    let old = json!({"metadata": {"resourceVersion": "5"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
    let grown = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    let r = Request {
        plural: "persistentvolumeclaims",
        group: "",
        obj: &grown,
        old: Some(&old),
        now: now(),
    };
    let out = check(&[q], &r).unwrap();
    assert_eq!(shown(&out[0].1), "requests.storage=2Gi");
}

#[test]
fn object_counts_use_count_names_and_legacy_ones() {
    let cm = json!({"metadata": {"name": "c"}});
    assert_eq!(
        shown(&usage("configmaps", "", &cm, now())),
        "configmaps=1,count/configmaps=1"
    );
    assert_eq!(
        shown(&usage("deployments", "apps", &cm, now())),
        "count/deployments.apps=1"
    );
    let q = quota(
        json!({"count/deployments.apps": "1"}),
        Some(json!({"count/deployments.apps": "1"})),
    );
    let r = Request {
        plural: "deployments",
        group: "apps",
        obj: &cm,
        old: None,
        now: now(),
    };
    assert!(check(&[q], &r)
        .unwrap_err()
        .starts_with("exceeded quota: q"));
}

#[test]
fn recount_sums_the_objects_in_scope() {
    let mut q = quota(
        json!({"pods": "5", "requests.cpu": "2", "count/deployments.apps": "3"}),
        Some(json!({"count/deployments.apps": "2"})),
    );
    q["status"] = json!({"used": {"count/deployments.apps": "2"}});
    let pods = vec![
        pod("a", Some("100m")),
        pod("b", Some("250m")),
        json!({"metadata": {"name": "done"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
               "status": {"phase": "Failed"}}),
    ];
    let objects = |plural: &str, _group: &str| match plural {
        "pods" => Some(pods.clone()),
        _ => None,
    };
    let (hard, used) = recount(&q, &objects, now());
    assert_eq!(
        shown(&hard),
        "count/deployments.apps=3,pods=5,requests.cpu=2"
    );
    // Deployments could not be listed here: their last count is kept.
    assert_eq!(
        shown(&used),
        "count/deployments.apps=2,pods=2,requests.cpu=350m"
    );
}
