//! Aggregated discovery (`apidiscovery.k8s.io/v2`, GA since Kubernetes
//! 1.30): `/api` and `/apis` answer every group, version and resource in one
//! document when the client asks for it, so kubectl discovers the whole
//! server in two requests instead of one per group/version.
//!
//! ```text
//!  GET /apis   Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json
//!     ─▶ wants_aggregated(Accept)? ── no ─▶ the legacy APIGroupList (discovery.rs)
//!        yes ─▶ for each served group/version: its legacy APIResourceList, regrouped
//!               (pods/status ─▶ a subresource of pods), extension apiservers'
//!               groups from their last discovery check (Stale when unreachable)
//!            ─▶ ETag; If-None-Match equal ─▶ 304
//! ```
//!
//! Both forms are built from the same live registry, so a CRD or an
//! APIService appears in the next answer without a restart. client-go reads
//! the form from the response's Content-Type, never from what it asked.

use serde_json::{json, Value};

/// The media type of an aggregated answer (and what a client asks for).
pub const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the Accept header asks for the v2 aggregated form before any
/// plain JSON (client-go lists it first, then v2beta1, then JSON; Kubernetes
/// 1.37 no longer serves v2beta1, which then falls through to JSON).
pub fn wants_aggregated(accept: &str) -> bool {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        if media == "application/json"
            && param("g") == Some("apidiscovery.k8s.io")
            && param("v") == Some("v2")
            && param("as") == Some("APIGroupDiscoveryList")
        {
            return true;
        }
        if param("as").is_none() && matches!(media, "application/json" | "*/*" | "application/*") {
            return false;
        }
    }
    false
}

/// One version of a group in the aggregated form, from its legacy
/// `APIResourceList` (`None`: the version could not be discovered, Stale).
pub fn version_entry(group: &str, version: &str, list: Option<&Value>) -> Value {
    let Some(list) = list else {
        return json!({"version": version, "resources": [], "freshness": "Stale"});
    };
    let entries = list["resources"].as_array().cloned().unwrap_or_default();
    let kind_of = |e: &Value| {
        json!({"group": e.get("group").and_then(Value::as_str).unwrap_or(group),
               "version": e.get("version").and_then(Value::as_str).unwrap_or(version),
               "kind": e["kind"]})
    };
    let mut resources: Vec<Value> = Vec::new();
    for e in entries.iter().filter(|e| !is_subresource(e)) {
        let mut r = json!({
            "resource": e["name"],
            "responseKind": kind_of(e),
            "scope": if e["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "singularResource": e["singularName"],
            "verbs": e["verbs"],
        });
        for k in ["shortNames", "categories"] {
            if let Some(v) = e.get(k) {
                r[k] = v.clone();
            }
        }
        let prefix = format!("{}/", e["name"].as_str().unwrap_or_default());
        let subs: Vec<Value> = entries
            .iter()
            .filter_map(|s| {
                let sub = s["name"].as_str()?.strip_prefix(&prefix)?;
                Some(json!({"subresource": sub, "responseKind": kind_of(s), "verbs": s["verbs"]}))
            })
            .collect();
        if !subs.is_empty() {
            r["subresources"] = json!(subs);
        }
        resources.push(r);
    }
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

fn is_subresource(entry: &Value) -> bool {
    entry["name"].as_str().is_some_and(|n| n.contains('/'))
}

/// One group of the aggregated form (`""`: the core group, named by no name).
pub fn group_entry(group: &str, versions: Vec<Value>) -> Value {
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// The `APIGroupDiscoveryList` of `groups`.
pub fn list(groups: Vec<Value>) -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": groups})
}

/// A strong ETag of a discovery document (its bytes' hash, quoted).
pub fn etag(body: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:016X}\"", h.finish())
}

impl crate::ApiServer {
    /// `/api` (`core`) or `/apis` in the aggregated form.
    pub(crate) fn aggregated_discovery(&self, core: bool) -> Value {
        let reg = &self.served();
        if core {
            let v1 = crate::discovery::resource_list(reg, "", "v1");
            return list(vec![group_entry(
                "",
                vec![version_entry("", "v1", v1.as_ref())],
            )]);
        }
        let mut groups: Vec<Value> = crate::discovery::served_groups(reg)
            .into_iter()
            .map(|(g, versions)| {
                let versions = versions
                    .iter()
                    .map(|v| {
                        version_entry(&g, v, crate::discovery::resource_list(reg, &g, v).as_ref())
                    })
                    .collect();
                group_entry(&g, versions)
            })
            .collect();
        // Extension apiservers: what their last discovery check returned.
        let remote = self
            .remote_discovery
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (g, versions) in self.remote_groups() {
            if groups.iter().any(|e| e["metadata"]["name"] == g.as_str()) {
                continue;
            }
            let versions = versions
                .iter()
                .map(|v| version_entry(&g, v, remote.get(&format!("{g}/{v}"))))
                .collect();
            groups.push(group_entry(&g, versions));
        }
        list(groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_v2_request_is_answered_aggregated() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(wants_aggregated(kubectl));
        // kubectl 1.27-1.29 ask for v2beta1 only.
        assert!(!wants_aggregated("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"));
        assert!(!wants_aggregated("application/json"));
        assert!(!wants_aggregated(""));
        assert!(!wants_aggregated(
            "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
    }

    #[test]
    fn subresources_join_their_resource_with_their_own_kind() {
        let legacy = json!({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
            {"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment",
             "verbs": ["get", "list"], "shortNames": ["deploy"], "categories": ["all"]},
            {"name": "deployments/scale", "singularName": "", "namespaced": true, "group": "autoscaling",
             "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]},
            {"name": "deployments/status", "singularName": "", "namespaced": true, "kind": "Deployment",
             "verbs": ["get"]}]});
        let v = version_entry("apps", "v1", Some(&legacy));
        assert_eq!(v["freshness"], "Current");
        let r = &v["resources"][0];
        assert_eq!(r["resource"], "deployments");
        assert_eq!(r["scope"], "Namespaced");
        assert_eq!(
            r["responseKind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(r["shortNames"], json!(["deploy"]));
        assert_eq!(
            r["subresources"][0],
            json!({"subresource": "scale", "verbs": ["get", "patch", "update"],
                   "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}})
        );
        assert_eq!(r["subresources"][1]["subresource"], "status");
        assert_eq!(v["resources"].as_array().unwrap().len(), 1);
        assert_eq!(
            version_entry("wardle.example.com", "v1alpha1", None)["freshness"],
            "Stale"
        );
    }
}
