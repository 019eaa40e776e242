//! The routing table of the ingress proxy, built from the Ingresses of its
//! class: which backend a request for (host, path) goes to, with
//! Kubernetes' matching rules. Pure: Ingress objects in, a table out.
//!
//! ```text
//!   host   exact "hello.world.minik8s"  ▶  wildcard "*.world.minik8s" (one label)  ▶  rules without a host
//!   path   among that host's paths: the longest match wins; on a tie Exact beats Prefix
//!          Exact   /world       matches /world only
//!          Prefix  /world       matches /world, /world/, /world/a — not /worldwide (element-wise)
//!          ImplementationSpecific: treated as Prefix here
//!   none   the defaultBackend (of the oldest Ingress that has one), else 404
//! ```

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use std::collections::BTreeMap;

/// The annotation older manifests name their class with.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Where a matched request goes: a Service port in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Backend {
    pub namespace: String,
    pub service: String,
    pub port: ServicePort,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServicePort {
    Number(i32),
    Name(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Exact,
    Prefix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    path: String,
    kind: PathKind,
    backend: Option<Backend>,
}

/// Routes by host, then by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    exact: BTreeMap<String, Vec<Route>>,
    /// Keyed by the part after `*.`.
    wildcard: BTreeMap<String, Vec<Route>>,
    any: Vec<Route>,
    default_backend: Option<Backend>,
    /// TLS: host (exact or `*.suffix`) → Secret (namespace, name).
    tls: BTreeMap<String, (String, String)>,
}

/// Whether `ing` is served by a proxy of `class` (`default`: this class is
/// the cluster's default, so Ingresses without a class are ours too).
pub fn is_ours(ing: &Ingress, class: &str, default: bool) -> bool {
    let spec_class = ing
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref());
    let annotated = ing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLASS_ANNOTATION))
        .map(String::as_str);
    match spec_class.or(annotated) {
        Some(c) => c == class,
        None => default,
    }
}

fn backend_of(ns: &str, b: &IngressBackend) -> Option<Backend> {
    let s = b.service.as_ref()?;
    let port = s.port.as_ref()?;
    let port = match (&port.name, port.number) {
        (Some(n), _) if !n.is_empty() => ServicePort::Name(n.clone()),
        (_, Some(n)) => ServicePort::Number(n),
        _ => return None,
    };
    Some(Backend {
        namespace: ns.to_string(),
        service: s.name.clone(),
        port,
    })
}

/// The request host without its port, lower case.
pub fn normalize_host(host: &str) -> String {
    if let Some(rest) = host.strip_prefix('[') {
        let ip = rest.split_once(']').map_or(rest, |(ip, _)| ip);
        return format!("[{}]", ip.to_ascii_lowercase());
    }
    let h = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    h.trim_end_matches('.').to_ascii_lowercase()
}

/// Element-wise prefix: `/a/b` matches `/a/b`, `/a/b/` and `/a/b/c`, not `/a/bc`.
fn prefix_matches(prefix: &str, path: &str) -> bool {
    let want: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
    let got: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    got.len() >= want.len() && want.iter().zip(&got).all(|(a, b)| a == b)
}

impl Table {
    /// The table of the Ingresses `ours` (oldest first decides the default backend).
    pub fn build(mut ours: Vec<&Ingress>) -> Table {
        ours.sort_by(|a, b| {
            let key = |i: &Ingress| {
                (
                    i.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    i.metadata.namespace.clone(),
                    i.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        let mut t = Table::default();
        for ing in ours {
            let ns = ing
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let Some(spec) = &ing.spec else { continue };
            if t.default_backend.is_none() {
                t.default_backend = spec
                    .default_backend
                    .as_ref()
                    .and_then(|b| backend_of(&ns, b));
            }
            for rule in spec.rules.iter().flatten() {
                let routes: Vec<Route> = rule
                    .http
                    .iter()
                    .flat_map(|h| &h.paths)
                    .map(|p| Route {
                        path: p.path.clone().unwrap_or_else(|| "/".into()),
                        kind: if p.path_type == "Exact" {
                            PathKind::Exact
                        } else {
                            PathKind::Prefix
                        },
                        backend: backend_of(&ns, &p.backend),
                    })
                    .collect();
                let host = rule.host.clone().unwrap_or_default().to_ascii_lowercase();
                let slot = if host.is_empty() {
                    &mut t.any
                } else if let Some(suffix) = host.strip_prefix("*.") {
                    t.wildcard.entry(suffix.to_string()).or_default()
                } else {
                    t.exact.entry(host).or_default()
                };
                slot.extend(routes);
            }
            for tls in spec.tls.iter().flatten() {
                let Some(secret) = tls.secret_name.clone().filter(|s| !s.is_empty()) else {
                    continue;
                };
                for h in tls.hosts.iter().flatten() {
                    t.tls
                        .entry(h.to_ascii_lowercase())
                        .or_insert((ns.clone(), secret.clone()));
                }
            }
        }
        t
    }

    /// The routes for a request host: its exact rules, else the wildcard
    /// one label up, else the rules without a host.
    fn routes_for(&self, host: &str) -> &[Route] {
        if let Some(r) = self.exact.get(host) {
            return r;
        }
        if let Some((_, parent)) = host.split_once('.') {
            if let Some(r) = self.wildcard.get(parent) {
                return r;
            }
        }
        &self.any
    }

    /// Where a request goes. `Some(None)`: a rule matched but its backend
    /// cannot be served (no Service backend); `None`: nothing matched (404).
    pub fn route(&self, host: &str, path: &str) -> Option<Option<&Backend>> {
        let host = normalize_host(host);
        let path = path.split(['?', '#']).next().unwrap_or("/");
        let best = self
            .routes_for(&host)
            .iter()
            .filter(|r| match r.kind {
                PathKind::Exact => r.path == path,
                PathKind::Prefix => prefix_matches(&r.path, path),
            })
            // Longest path first; on a tie Exact before Prefix.
            .max_by_key(|r| {
                (
                    r.path.trim_end_matches('/').len(),
                    r.kind == PathKind::Exact,
                )
            });
        match best {
            Some(r) => Some(r.backend.as_ref()),
            None => self.default_backend.as_ref().map(Some),
        }
    }

    /// Every backend the table names (to resolve their endpoints).
    pub fn backends(&self) -> Vec<&Backend> {
        let mut out: Vec<&Backend> = self
            .exact
            .values()
            .chain(self.wildcard.values())
            .flatten()
            .chain(&self.any)
            .filter_map(|r| r.backend.as_ref())
            .chain(self.default_backend.as_ref())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The TLS Secret for a server name (SNI): exact, else the wildcard one label up.
    pub fn tls_secret(&self, server_name: &str) -> Option<&(String, String)> {
        let host = server_name.to_ascii_lowercase();
        self.tls.get(&host).or_else(|| {
            let (_, parent) = host.split_once('.')?;
            self.tls.get(&format!("*.{parent}"))
        })
    }

    /// Whether any Ingress asks for TLS.
    pub fn has_tls(&self) -> bool {
        !self.tls.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ing(name: &str, created: &str, spec: serde_json::Value) -> Ingress {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": spec}),
        )
        .unwrap()
    }

    fn path(p: &str, kind: &str, svc: &str) -> serde_json::Value {
        json!({"path": p, "pathType": kind, "backend": {"service": {"name": svc, "port": {"number": 80}}}})
    }

    fn to(t: &Table, host: &str, p: &str) -> String {
        match t.route(host, p) {
            Some(Some(b)) => b.service.clone(),
            Some(None) => "unservable".into(),
            None => "404".into(),
        }
    }

    #[test]
    fn kubernetes_path_matching_examples() {
        // The table of https://kubernetes.io/docs/concepts/services-networking/ingress/#examples
        let cases: &[(&str, &str, &str, bool)] = &[
            ("Prefix", "/", "/", true),
            ("Prefix", "/", "/aaa/bbb", true),
            ("Exact", "/foo", "/foo", true),
            ("Exact", "/foo", "/bar", false),
            ("Exact", "/foo", "/foo/", false),
            ("Exact", "/foo/", "/foo", false),
            ("Prefix", "/foo", "/foo", true),
            ("Prefix", "/foo", "/foo/", true),
            ("Prefix", "/foo/", "/foo", true),
            ("Prefix", "/foo/", "/foo/", true),
            ("Prefix", "/aaa", "/aaa/ccc", true),
            ("Prefix", "/aaa/bb", "/aaa/bbb", false),
            ("Prefix", "/aaa/bbb", "/aaa/bbb", true),
            ("Prefix", "/aaa/bbb/", "/aaa/bbb", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbb/", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbb/ccc", true),
            ("Prefix", "/aaa/bbb", "/aaa/bbbxyz", false),
        ];
        for (kind, p, req, matches) in cases {
            let t = Table::build(vec![&ing(
                "a",
                "2026-01-01T00:00:00Z",
                json!({"rules": [{"http": {"paths": [path(p, kind, "svc")]}}]}),
            )]);
            assert_eq!(to(&t, "any", req) == "svc", *matches, "{kind} {p} vs {req}");
        }
    }

    #[test]
    fn precedence_hosts_and_default() {
        let a = ing(
            "a",
            "2026-01-01T00:00:00Z",
            json!({
            "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}},
            "rules": [
                {"host": "hello.world.minik8s", "http": {"paths": [
                    path("/", "Prefix", "hello"), path("/world", "Prefix", "world"),
                    path("/world", "Exact", "world-exact"), path("/world/inner", "Prefix", "inner")]}},
                {"host": "*.world.minik8s", "http": {"paths": [path("/", "Prefix", "wild")]}},
                {"http": {"paths": [path("/any", "Prefix", "any")]}}]}),
        );
        let b = ing(
            "b",
            "2026-01-02T00:00:00Z",
            json!({
            "defaultBackend": {"service": {"name": "later-default", "port": {"number": 80}}},
            "rules": [{"host": "hello.world.minik8s", "http": {"paths": [path("/b", "Prefix", "from-b")]}}]}),
        );
        let t = Table::build(vec![&b, &a]);
        assert_eq!(to(&t, "hello.world.minik8s", "/"), "hello");
        assert_eq!(
            to(&t, "hello.world.minik8s:8080", "/world"),
            "world-exact",
            "a tie: Exact wins"
        );
        assert_eq!(to(&t, "Hello.World.Minik8s", "/world/x?q=1"), "world");
        assert_eq!(
            to(&t, "hello.world.minik8s", "/world/inner/y"),
            "inner",
            "longest wins"
        );
        assert_eq!(
            to(&t, "hello.world.minik8s", "/b/c"),
            "from-b",
            "rules of one host merge across Ingresses"
        );
        assert_eq!(to(&t, "foo.world.minik8s", "/x"), "wild");
        assert_eq!(
            to(&t, "a.b.world.minik8s", "/any"),
            "any",
            "a wildcard covers one label"
        );
        assert_eq!(
            to(&t, "world.minik8s", "/nothing"),
            "fallback",
            "the oldest default backend"
        );
        let backends: Vec<&str> = t.backends().iter().map(|b| b.service.as_str()).collect();
        assert!(backends.contains(&"fallback") && backends.contains(&"wild"));
        assert_eq!(to(&Table::build(vec![&b]), "x", "/"), "later-default");
        assert_eq!(to(&Table::build(vec![]), "x", "/"), "404");
    }

    #[test]
    fn classes_tls_and_hosts() {
        let mut i = ing(
            "a",
            "2026-01-01T00:00:00Z",
            json!({"ingressClassName": "minik8s",
            "tls": [{"hosts": ["hello.world.minik8s", "*.apps.minik8s"], "secretName": "tls"}],
            "rules": [{"host": "hello.world.minik8s", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"name": "http"}}}},
                {"path": "/bucket", "pathType": "Prefix", "backend": {"resource": {"kind": "Bucket", "name": "b"}}}]}}]}),
        );
        assert!(is_ours(&i, "minik8s", false));
        assert!(!is_ours(&i, "nginx", true));
        i.spec.as_mut().unwrap().ingress_class_name = None;
        assert!(
            is_ours(&i, "minik8s", true),
            "no class: the default class's"
        );
        assert!(!is_ours(&i, "minik8s", false));
        let t = Table::build(vec![&i]);
        assert_eq!(
            t.route("hello.world.minik8s", "/").unwrap().unwrap().port,
            ServicePort::Name("http".into())
        );
        assert_eq!(to(&t, "hello.world.minik8s", "/bucket/x"), "unservable");
        assert_eq!(
            t.tls_secret("hello.world.minik8s"),
            Some(&("ns".into(), "tls".into()))
        );
        assert_eq!(
            t.tls_secret("x.apps.minik8s"),
            Some(&("ns".into(), "tls".into()))
        );
        assert_eq!(t.tls_secret("other"), None);
        assert_eq!(normalize_host("Example.COM:443"), "example.com");
        assert_eq!(normalize_host("example.com."), "example.com");
        assert_eq!(normalize_host("[::1]:80"), "[::1]");
    }
}
