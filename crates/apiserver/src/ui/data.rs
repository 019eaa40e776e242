//! What the web view draws, each answer authorized as the user who asks:
//! the nodes and their pods (a student sees their namespace's pods, and
//! the nodes by name only when they may not list nodes), an object's
//! journey, and the controllers' loops from the components' metrics.

use crate::auth::request_info::Attributes;
use crate::auth::UserInfo;
use crate::params::Params;
use crate::ApiServer;
use minik8s_api::registry;
use minik8s_api::status::ApiError;
use minik8s_api::{disaggregatedset, lws_pod};
use minik8s_trace::context;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn allowed(srv: &ApiServer, user: &UserInfo, verb: &str, resource: &str, ns: &str) -> bool {
    srv.authorize(user, &Attributes::resource(verb, "", resource, ns))
        .is_ok()
}

/// The namespace a user who may not see all is shown by default: a
/// ServiceAccount's own, else the one named as the user (what
/// `minik8s-add-user` makes for a student).
fn own_namespace(user: &UserInfo) -> String {
    match user.username.strip_prefix("system:serviceaccount:") {
        Some(rest) => rest.split(':').next().unwrap_or("default").to_string(),
        None => user.username.clone(),
    }
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// A pod as one card of the view (`traced`: it has a journey).
fn pod_card(p: &Value, traced: bool) -> Value {
    let statuses = p["status"]["containerStatuses"].as_array();
    let total = p["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == true).count());
    let restarts: i64 = statuses.map_or(0, |s| {
        s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
    });
    let mut card = json!({
        "namespace": p["metadata"]["namespace"],
        "name": p["metadata"]["name"],
        "phase": p["status"]["phase"].as_str().unwrap_or("Pending"),
        "ready": format!("{ready}/{total}"),
        "restarts": restarts,
        "node": p["spec"]["nodeName"],
        "deleting": p["metadata"]["deletionTimestamp"].is_string(),
        "traced": traced,
    });
    if let Some(owner) = p["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|o| o.iter().find(|r| r["controller"] == true))
    {
        card["owner"] = json!(format!(
            "{}/{}",
            owner["kind"].as_str().unwrap_or(""),
            owner["name"].as_str().unwrap_or("")
        ));
    }
    if let Some(lws) = label(p, lws_pod::NAME) {
        let worker = label(p, lws_pod::WORKER_INDEX).unwrap_or("0");
        card["group"] = json!({
            "kind": "LeaderWorkerSet",
            "name": lws,
            "index": label(p, lws_pod::GROUP_INDEX).unwrap_or(""),
            "role": if worker == "0" { "leader" } else { "worker" },
            "worker": worker,
        });
    }
    if let Some(role) = label(p, disaggregatedset::ROLE_LABEL) {
        card["role"] = json!(role);
    }
    card
}

fn node_ready(n: &Value) -> bool {
    n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The nodes and their pods, as `user` may see them.
pub async fn overview(
    srv: &ApiServer,
    user: &UserInfo,
    params: &Params,
) -> Result<Value, ApiError> {
    let everything = allowed(srv, user, "list", "pods", "");
    let ns = match (
        everything,
        params.get("namespace").filter(|n| !n.is_empty()),
    ) {
        (true, None) => None,
        (_, Some(ns)) => Some(ns.to_string()),
        (false, None) => Some(own_namespace(user)),
    };
    if let Some(ns) = &ns {
        let a = Attributes::resource("list", "", "pods", ns);
        srv.check(user, &a)?;
    }
    let none = Params::parse(None)?;
    let pods_info = registry::of::<k8s_openapi::api::core::v1::Pod>();
    let pods = srv.list(pods_info, ns.as_deref(), &none).await?;
    let pods: Vec<Value> = pods["items"].as_array().map_or(Vec::new(), |items| {
        let traced = |p: &Value| {
            let uid = p["metadata"]["uid"].as_str().unwrap_or("");
            srv.trace_contexts.get(uid).is_some()
        };
        items.iter().map(|p| pod_card(p, traced(p))).collect()
    });
    let see_nodes = allowed(srv, user, "list", "nodes", "");
    let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
    if see_nodes {
        let list = srv
            .list(
                registry::of::<k8s_openapi::api::core::v1::Node>(),
                None,
                &none,
            )
            .await?;
        for n in list["items"].as_array().into_iter().flatten() {
            let name = n["metadata"]["name"].as_str().unwrap_or("").to_string();
            let card = json!({"name": name, "ready": node_ready(n), "pods": []});
            nodes.insert(name, card);
        }
    }
    let mut unscheduled = Vec::new();
    for pod in pods {
        match pod["node"].as_str() {
            Some(node) => nodes
                .entry(node.to_string())
                .or_insert_with(|| json!({"name": node, "ready": Value::Null, "pods": []}))["pods"]
                .as_array_mut()
                .expect("pods is an array")
                .push(pod),
            None => unscheduled.push(pod),
        }
    }
    Ok(json!({
        "user": user.username,
        "namespace": ns,
        "nodesVisible": see_nodes,
        "nodes": nodes.into_values().collect::<Vec<_>>(),
        "unscheduled": unscheduled,
    }))
}

/// The served kind a journey is asked for (`resource`, `group`).
fn kind_of(srv: &ApiServer, params: &Params) -> Result<registry::Info, ApiError> {
    let resource = params.get("resource").unwrap_or("pods");
    let group = params.get("group").unwrap_or("");
    srv.registry
        .all()
        .into_iter()
        .find(|i| i.plural == resource && i.group == group)
        .ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                format!("the server doesn't have a resource type {resource:?} in group {group:?}"),
            )
        })
}

/// One object's journey: the spans that descend from the apiserver's span
/// of the request that created it, in the order they started.
pub async fn journey(srv: &ApiServer, user: &UserInfo, params: &Params) -> Result<Value, ApiError> {
    let info = kind_of(srv, params)?;
    let name = params
        .get("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("a journey needs the object's name"))?;
    let ns = info
        .namespaced
        .then(|| params.get("namespace").unwrap_or("default").to_string());
    let a = Attributes::resource(
        "get",
        &info.group,
        &info.plural,
        ns.as_deref().unwrap_or(""),
    );
    let a = Attributes {
        name: name.to_string(),
        ..a
    };
    srv.check(user, &a)?;
    let (obj, _) = srv.read(&info, ns.as_deref(), name).await?;
    // The context the apiserver keeps for it (pods and the workloads
    // whose controllers follow it), else its create among the kept traces.
    let uid = obj["metadata"]["uid"].as_str().unwrap_or("");
    let ids = srv
        .trace_contexts
        .get(uid)
        .and_then(|tp| Some((context::trace_id(&tp)?, context::span_id(&tp)?)))
        .or_else(|| srv.web_view.store()?.created(uid));
    let steps = match (&ids, srv.web_view.store()) {
        (Some((trace, span)), Some(store)) => store.journey(trace, span),
        _ => Vec::new(),
    };
    let why_empty = match (&ids, srv.web_view.store()) {
        (None, _) => Some("the object has no trace: it was created before tracing was on, or when more journeys a second were starting than --journeys-per-second allows"),
        (_, None) => Some("this apiserver keeps no traces (--traces-kept 0)"),
        _ if steps.is_empty() => Some("its trace is no longer kept (the oldest traces are forgotten first)"),
        _ => None,
    };
    Ok(json!({
        "object": {
            "kind": info.kind,
            "namespace": ns,
            "name": name,
            "uid": obj["metadata"]["uid"],
            "creationTimestamp": obj["metadata"]["creationTimestamp"],
        },
        "traceId": ids.as_ref().map(|(t, _)| t),
        "steps": steps,
        "empty": why_empty,
    }))
}

/// Work queue depths and reconciles by controller, from the metrics this
/// process serves (the master's controllers and scheduler); for those who
/// may read `/metrics`.
pub fn controllers(srv: &ApiServer, user: &UserInfo) -> Result<Value, ApiError> {
    let a = Attributes {
        verb: "get".into(),
        path: "/metrics".into(),
        ..Default::default()
    };
    srv.check(user, &a)?;
    let text = srv.request_metrics.render(&srv.extra_metrics);
    Ok(json!({
        "time": chrono::Utc::now().timestamp_millis(),
        "controllers": parse_loops(&text),
    }))
}

fn label_value<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// `workqueue_depth{name=..}` and `controller_reconciles_total{controller=..,result=..}`
/// per controller, from Prometheus' text format.
fn parse_loops(text: &str) -> Vec<Value> {
    let mut loops: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let Some((family, labels)) = series.split_once('{') else {
            continue;
        };
        let labels = labels.trim_end_matches('}');
        match family {
            "workqueue_depth" => {
                if let Some(name) = label_value(labels, "name") {
                    loops.entry(name.to_string()).or_default().0 = value;
                }
            }
            "controller_reconciles_total" => {
                let Some(name) = label_value(labels, "controller") else {
                    continue;
                };
                let entry = loops.entry(name.to_string()).or_default();
                match label_value(labels, "result") {
                    Some("error") => entry.2 += value,
                    _ => entry.1 += value,
                }
            }
            _ => {}
        }
    }
    loops
        .into_iter()
        .map(|(name, (depth, ok, errors))| {
            json!({"name": name, "depth": depth, "reconciles": ok + errors, "errors": errors})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_are_read_from_the_metrics_text() {
        let text = "# HELP workqueue_depth x\nworkqueue_depth{name=\"deployment\"} 3\n\
            controller_reconciles_total{controller=\"deployment\",result=\"success\"} 10\n\
            controller_reconciles_total{controller=\"deployment\",result=\"error\"} 2\n\
            apiserver_request_total{verb=\"GET\"} 5\n";
        assert_eq!(
            parse_loops(text),
            vec![json!({"name": "deployment", "depth": 3.0, "reconciles": 12.0, "errors": 2.0})]
        );
    }

    #[test]
    fn a_group_member_is_drawn_as_leader_or_worker() {
        let pod = json!({
            "metadata": {"name": "g-0-1", "namespace": "ns", "labels": {
                lws_pod::NAME: "g", lws_pod::GROUP_INDEX: "0", lws_pod::WORKER_INDEX: "1"}},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [{"ready": true, "restartCount": 2}]}
        });
        let card = pod_card(&pod, false);
        assert_eq!(card["group"]["role"], "worker");
        assert_eq!(card["ready"], "1/1");
        assert_eq!(card["restarts"], 2);
    }

    #[test]
    fn a_user_who_sees_no_more_is_shown_their_own_namespace() {
        assert_eq!(
            own_namespace(&UserInfo::new("system:serviceaccount:team:bot", &[])),
            "team"
        );
        assert_eq!(own_namespace(&UserInfo::new("alice", &[])), "alice");
    }
}
