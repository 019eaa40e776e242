//! The Node authorizer: what a kubelet (`system:node:<name>` in
//! `system:nodes`) may do, as Kubernetes' Node authorizer and NodeRestriction
//! admission decide it. The verbs are the `system:node` ClusterRole's; on top
//! of them a kubelet reaches only what its own pods need:
//!
//! ```text
//!  secrets, configmaps, persistentvolumeclaims  get, if a pod bound to the node uses them
//!  resourceclaims                               get, if a pod bound to the node uses them
//!  persistentvolumes                            get, if bound to a claim such a pod uses
//!  resourceslices                               writes to its own node's slices only
//!  serviceaccounts/token                        create, for a pod bound to the node
//!  nodes, nodes/status                          writes to its own Node only
//!  leases (kube-node-lease)                     its own Lease only
//!  pods/status, pods delete, pods/eviction      pods bound to the node only
//! ```
//!
//! The graph (which pod on which node uses what) follows the pods watch
//! cache, as the real authorizer follows an informer.

use super::request_info::Attributes;
use super::UserInfo;
use crate::watch_cache::CacheEvent;
use crate::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::{meta, registry};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub const NODES_GROUP: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";

/// The node a user is, if it is one.
pub fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_PREFIX)?;
    (!name.is_empty() && user.groups.iter().any(|g| g == NODES_GROUP)).then_some(name)
}

/// What a pod uses that a kubelet must read: (resource, name) in its namespace.
pub fn references(pod: &Value) -> Uses {
    let mut out = Vec::new();
    let spec = &pod["spec"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    out.push((
        "serviceaccounts",
        spec["serviceAccountName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_string(),
    ));
    for v in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v.pointer("/secret/secretName") {
            out.push(("secrets", s(n)));
        }
        if let Some(n) = v.pointer("/configMap/name") {
            out.push(("configmaps", s(n)));
        }
        if let Some(n) = v.pointer("/persistentVolumeClaim/claimName") {
            out.push(("persistentvolumeclaims", s(n)));
        }
        for src in v
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = src.pointer("/secret/name") {
                out.push(("secrets", s(n)));
            }
            if let Some(n) = src.pointer("/configMap/name") {
                out.push(("configmaps", s(n)));
            }
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                if let Some(n) = e.pointer("/valueFrom/secretKeyRef/name") {
                    out.push(("secrets", s(n)));
                }
                if let Some(n) = e.pointer("/valueFrom/configMapKeyRef/name") {
                    out.push(("configmaps", s(n)));
                }
            }
            for e in c["envFrom"].as_array().into_iter().flatten() {
                if let Some(n) = e.pointer("/secretRef/name") {
                    out.push(("secrets", s(n)));
                }
                if let Some(n) = e.pointer("/configMapRef/name") {
                    out.push(("configmaps", s(n)));
                }
            }
        }
    }
    for p in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        out.push(("secrets", s(&p["name"])));
    }
    // Dynamic Resource Allocation: claims named, or made from templates.
    for c in spec["resourceClaims"].as_array().into_iter().flatten() {
        if let Some(n) = c.get("resourceClaimName") {
            out.push(("resourceclaims", s(n)));
        }
    }
    let made = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array);
    for c in made.into_iter().flatten() {
        if let Some(n) = c.get("resourceClaimName") {
            out.push(("resourceclaims", s(n)));
        }
    }
    out.retain(|(_, n)| !n.is_empty());
    out.sort();
    out.dedup();
    out
}

/// Pods by node and what they use.
#[derive(Default)]
pub struct NodeGraph {
    inner: RwLock<Graph>,
}

/// What a pod uses: (resource, name) in its namespace.
type Uses = Vec<(&'static str, String)>;

#[derive(Default)]
struct Graph {
    /// (namespace, pod) → (node, what it uses).
    pods: HashMap<(String, String), (String, Uses)>,
    /// (resource, namespace, name) → nodes using it, with how many pods.
    used: HashMap<(&'static str, String, String), HashMap<String, usize>>,
}

impl Graph {
    fn remove(&mut self, key: &(String, String)) {
        if let Some((node, refs)) = self.pods.remove(key) {
            for (res, name) in refs {
                let k = (res, key.0.clone(), name);
                if let Some(nodes) = self.used.get_mut(&k) {
                    if let Some(n) = nodes.get_mut(&node) {
                        *n -= 1;
                        if *n == 0 {
                            nodes.remove(&node);
                        }
                    }
                    if nodes.is_empty() {
                        self.used.remove(&k);
                    }
                }
            }
        }
    }

    fn put(&mut self, pod: &Value) {
        let key = (
            meta::namespace(pod).unwrap_or("").to_string(),
            meta::name(pod).to_string(),
        );
        self.remove(&key);
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node.is_empty() {
            return;
        }
        let refs = references(pod);
        for (res, name) in &refs {
            *self
                .used
                .entry((res, key.0.clone(), name.clone()))
                .or_default()
                .entry(node.to_string())
                .or_default() += 1;
        }
        self.pods.insert(key, (node.to_string(), refs));
    }
}

impl NodeGraph {
    pub(super) fn pod_node(&self, ns: &str, name: &str) -> Option<String> {
        let g = self.inner.read().unwrap_or_else(|p| p.into_inner());
        g.pods
            .get(&(ns.to_string(), name.to_string()))
            .map(|(n, _)| n.clone())
    }

    fn node_uses(&self, node: &str, resource: &str, ns: &str, name: &str) -> bool {
        let g = self.inner.read().unwrap_or_else(|p| p.into_inner());
        let Some(res) = [
            "secrets",
            "configmaps",
            "persistentvolumeclaims",
            "serviceaccounts",
            "resourceclaims",
        ]
        .into_iter()
        .find(|r| *r == resource) else {
            return false;
        };
        g.used
            .get(&(res, ns.to_string(), name.to_string()))
            .is_some_and(|nodes| nodes.contains_key(node))
    }

    fn apply(&self, events: &[Arc<CacheEvent>]) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        for ev in events {
            let object = ev.object();
            match ev.kind {
                crate::store::EventKind::Put => g.put(&object),
                crate::store::EventKind::Delete => {
                    let key = (
                        meta::namespace(&object).unwrap_or("").to_string(),
                        meta::name(&object).to_string(),
                    );
                    g.remove(&key)
                }
            }
        }
    }

    /// Lists the pods and follows their watch cache.
    pub(crate) async fn start(srv: &Arc<ApiServer>) -> anyhow::Result<()> {
        let info = registry::of::<Pod>();
        let (kvs, rev) = srv.store.list(&info.key_prefix(None), None).await?;
        {
            let mut g = srv.nodes.inner.write().unwrap_or_else(|p| p.into_inner());
            for kv in kvs {
                if let Ok(pod) = serde_json::from_slice::<Value>(&kv.value) {
                    g.put(&pod);
                }
            }
        }
        let cache = srv
            .watch_cache(info)
            .ok_or_else(|| anyhow::anyhow!("no pods watch cache"))?;
        let sub = cache
            .subscribe(rev)
            .map_err(|oldest| anyhow::anyhow!("pods watch cache starts at {oldest}"))?;
        let server = Arc::downgrade(srv);
        tokio::spawn(async move {
            let mut live = sub.live;
            if let Some(srv) = server.upgrade() {
                srv.nodes.apply(&sub.backlog);
            }
            loop {
                match live.recv().await {
                    Ok(ev) => {
                        let Some(srv) = server.upgrade() else { return };
                        srv.nodes.apply(&[ev]);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let Some(srv) = server.upgrade() else { return };
                        if let Ok((kvs, _)) = srv.store.list(&info.key_prefix(None), None).await {
                            let mut g = Graph::default();
                            for kv in kvs {
                                if let Ok(pod) = serde_json::from_slice::<Value>(&kv.value) {
                                    g.put(&pod);
                                }
                            }
                            *srv.nodes.inner.write().unwrap_or_else(|p| p.into_inner()) = g;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(())
    }
}

impl ApiServer {
    /// The Node authorizer's decision for kubelet `node`: Ok(reason) to
    /// allow, Err(why) when it has no permission to give.
    pub(crate) fn authorize_node(
        &self,
        node: &str,
        user: &UserInfo,
        a: &Attributes,
    ) -> Result<String, String> {
        // The system:node role's rules, shared with the policy (no copy per request).
        let rules = self
            .policy
            .policy()
            .cluster_role_rules("system:node")
            .unwrap_or_default();
        if !rules.iter().any(|r| super::rbac::rule_allows(r, a)) {
            return Err(String::new());
        }
        if !a.resource_request {
            return Ok(String::new());
        }
        let denied = |why: String| Err(format!("node '{node}' {why}"));
        let writes = !matches!(a.verb.as_str(), "get" | "list" | "watch");
        let one_get = a.verb == "get" && !a.name.is_empty();
        let only_gets = || denied("can only get individual resources of this type".into());
        match (
            a.api_group.as_str(),
            a.resource.as_str(),
            a.subresource.as_str(),
        ) {
            ("", "secrets" | "configmaps" | "persistentvolumeclaims", "")
            | ("resource.k8s.io", "resourceclaims", "") => match one_get {
                true => self.related(node, &a.resource, &a.namespace, &a.name),
                false => only_gets(),
            },
            // NodeRestriction: a kubelet publishes the slices of its own
            // node, named after it (`<node>-<driver>`).
            ("resource.k8s.io", "resourceslices", "")
                if writes && !a.name.is_empty() && !a.name.starts_with(&format!("{node}-")) =>
            {
                denied(format!("cannot modify resourceslice '{}'", a.name))
            }
            // A volume is reachable through the claim it is bound to.
            ("", "persistentvolumes", "") if !one_get => only_gets(),
            ("", "persistentvolumes", "") => {
                let (ns, claim) = self.bound_claim(&a.name).unwrap_or_default();
                self.related(node, "persistentvolumeclaims", &ns, &claim)
            }
            ("", "serviceaccounts", "token") => {
                self.related(node, "serviceaccounts", &a.namespace, &a.name)
            }
            ("", "nodes", _) if writes && a.verb != "create" && a.name != node => {
                denied(format!("cannot modify node '{}'", a.name))
            }
            ("coordination.k8s.io", "leases", _)
                if a.namespace != "kube-node-lease"
                    || (writes && a.verb != "create" && a.name != node)
                    || (!writes && !a.name.is_empty() && a.name != node) =>
            {
                denied(format!("cannot use lease '{}/{}'", a.namespace, a.name))
            }
            ("", "pods", sub) if writes && !(sub.is_empty() && a.verb == "create") => {
                match self.nodes.pod_node(&a.namespace, &a.name) {
                    Some(n) if n == node => Ok(String::new()),
                    _ => denied("can only update pods with spec.nodeName set to itself".into()),
                }
            }
            ("", "pods", "") if a.verb == "create" => {
                // Mirror pods only (static pods), which minik8s does not have.
                denied("can only create mirror pods".into())
            }
            _ => {
                let _ = user;
                Ok(String::new())
            }
        }
    }

    /// Allowed when a pod on `node` uses the object (the node graph).
    fn related(&self, node: &str, resource: &str, ns: &str, name: &str) -> Result<String, String> {
        match !name.is_empty() && self.nodes.node_uses(node, resource, ns, name) {
            true => Ok(String::new()),
            false => Err(format!(
                "no relationship found between node '{node}' and this object"
            )),
        }
    }

    /// The claim (namespace, name) the PersistentVolume `name` is bound to.
    fn bound_claim(&self, name: &str) -> Option<(String, String)> {
        let pv = self
            .persistent_volumes
            .all()
            .into_iter()
            .find(|pv| meta::name(pv) == name)?;
        let r = pv.pointer("/spec/claimRef");
        let field = |k: &str| {
            r.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some((field("namespace"), field("name")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_uses_its_volumes_env_and_account() {
        let pod = json!({"spec": {"nodeName": "n1", "serviceAccountName": "bot",
            "volumes": [{"name": "a", "secret": {"secretName": "s1"}},
                        {"name": "b", "configMap": {"name": "c1"}},
                        {"name": "p", "projected": {"sources": [{"secret": {"name": "s2"}}]}}],
            "containers": [{"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c2", "key": "k"}}}],
                            "envFrom": [{"secretRef": {"name": "s3"}}]}]}});
        let refs = references(&pod);
        for want in [
            ("secrets", "s1"),
            ("secrets", "s2"),
            ("secrets", "s3"),
            ("configmaps", "c1"),
            ("configmaps", "c2"),
            ("serviceaccounts", "bot"),
        ] {
            assert!(
                refs.contains(&(want.0, want.1.to_string())),
                "{want:?} in {refs:?}"
            );
        }
        let mut g = Graph::default();
        let mut p = pod.clone();
        p["metadata"] = json!({"name": "web", "namespace": "ns"});
        g.put(&p);
        assert!(g.used[&("secrets", "ns".to_string(), "s1".to_string())].contains_key("n1"));
        g.remove(&("ns".into(), "web".into()));
        assert!(g.used.is_empty());
    }

    #[test]
    fn only_node_identities_are_nodes() {
        assert_eq!(
            node_name(&UserInfo::new("system:node:w1", &[NODES_GROUP])),
            Some("w1")
        );
        assert_eq!(
            node_name(&UserInfo::new("system:node:w1", &["students"])),
            None
        );
        assert_eq!(node_name(&UserInfo::new("alice", &[NODES_GROUP])), None);
    }
}
