//! The apiserver's `/metrics`: every request counted and timed by Kubernetes'
//! names and labels, so `rate(apiserver_request_total[1m])` and the usual
//! dashboards read minik8s as they read Kubernetes.
//!
//! ```text
//!   request ──▶ http::handle ──▶ answer
//!        └── RequestMetric::of(method, path, …) ── done(code) ──▶
//!              apiserver_request_total{verb,group,version,resource,subresource,scope,component,code}
//!              apiserver_request_duration_seconds{verb,group,version,resource,subresource,scope,component}
//! ```
//!
//! Verbs are Kubernetes' metric verbs: the HTTP method, except `LIST` and
//! `WATCH` for collections, `APPLY` for server-side apply and `CONNECT` for
//! exec, attach, port-forward and proxy. A watch is timed until its answer
//! starts, not for as long as it streams. In the master, `/metrics` also
//! carries the scheduler's and the controllers' families
//! ([`crate::Config::extra_metrics`]). The counts are one apiserver's
//! ([`RequestMetrics`], a field of [`crate::ApiServer`]): two servers in one
//! process (tests) count apart.

use crate::auth::request_info;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    #[prometheus(flatten)]
    request: Labels,
    code: String,
}

/// One apiserver's request counts and latencies.
#[derive(Clone, Default)]
pub struct RequestMetrics(Arc<Families>);

struct Families {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    durations: Family<Labels, Histogram>,
}

impl Default for Families {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<CodeLabels, Counter>::default();
        let durations = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(minik8s_process::metrics::latency_buckets())) as fn() -> Histogram,
        );
        registry.register(
        "apiserver_request",
        "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code",
        requests.clone(),
    );
        registry.register(
        "apiserver_request_duration_seconds",
        "Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component",
        durations.clone(),
    );
        Families {
            registry,
            requests,
            durations,
        }
    }
}

/// More metric families served after the apiserver's own (the master adds
/// its scheduler's and controllers'): each renders its families as text.
#[derive(Clone, Default)]
pub struct ExtraMetrics(pub Vec<Arc<dyn Fn() -> String + Send + Sync>>);

impl std::fmt::Debug for ExtraMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExtraMetrics({} sources)", self.0.len())
    }
}

impl RequestMetrics {
    /// Counts and times a request once its answer's status code is known.
    pub fn done(&self, metric: RequestMetric, code: u16) {
        let took = metric.started.elapsed().as_secs_f64();
        self.0.durations.get_or_create(&metric.labels).observe(took);
        let counted = CodeLabels {
            request: metric.labels,
            code: code.to_string(),
        };
        self.0.requests.get_or_create(&counted).inc();
    }

    /// The request metrics, then `extra`'s, in the text format.
    pub fn render(&self, extra: &ExtraMetrics) -> String {
        let mut text = minik8s_process::metrics::encode(&self.0.registry);
        for render in &extra.0 {
            text.push_str(&render());
        }
        text
    }
}

/// One request being served: what it is counted as, and since when.
pub struct RequestMetric {
    labels: Labels,
    started: Instant,
}

impl RequestMetric {
    /// The request `method path` (with the `watch` flag; `apply` when the
    /// body is a server-side apply patch).
    pub fn of(method: &str, path: &str, watch: bool, apply: bool) -> RequestMetric {
        RequestMetric {
            labels: labels(method, path, watch, apply),
            started: Instant::now(),
        }
    }
}

/// Kubernetes' labels of a request (`metrics.go`'s CleanVerb and scope).
fn labels(method: &str, path: &str, watch: bool, apply: bool) -> Labels {
    let info = request_info::parse(method, path, watch);
    if !info.resource_request {
        return Labels {
            verb: method.to_ascii_uppercase(),
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            scope: "",
            component: "apiserver",
        };
    }
    let verb = match info.verb.as_str() {
        "list" => "LIST".to_string(),
        "watch" => "WATCH".to_string(),
        "patch" if apply => "APPLY".to_string(),
        _ if matches!(
            info.subresource.as_str(),
            "exec" | "attach" | "portforward" | "proxy"
        ) =>
        {
            "CONNECT".to_string()
        }
        _ => method.to_ascii_uppercase(),
    };
    let scope = if !info.name.is_empty() {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else {
        "cluster"
    };
    Labels {
        verb,
        group: info.api_group,
        version: info.api_version,
        resource: info.resource,
        subresource: info.subresource,
        scope,
        component: "apiserver",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_kubernetes_verbs_and_scopes() {
        let l = labels("GET", "/api/v1/namespaces/default/pods", false, false);
        assert_eq!(
            (l.verb.as_str(), l.resource.as_str(), l.scope),
            ("LIST", "pods", "namespace")
        );
        let l = labels("GET", "/api/v1/pods", true, false);
        assert_eq!((l.verb.as_str(), l.scope), ("WATCH", "cluster"));
        let l = labels(
            "PATCH",
            "/apis/apps/v1/namespaces/a/deployments/web",
            false,
            true,
        );
        assert_eq!(
            (
                l.verb.as_str(),
                l.group.as_str(),
                l.version.as_str(),
                l.scope
            ),
            ("APPLY", "apps", "v1", "resource")
        );
        let l = labels("POST", "/api/v1/namespaces/a/pods/p/exec", false, false);
        assert_eq!(
            (l.verb.as_str(), l.subresource.as_str()),
            ("CONNECT", "exec")
        );
        let l = labels("GET", "/healthz", false, false);
        assert_eq!((l.verb.as_str(), l.resource.as_str()), ("GET", ""));
    }

    #[test]
    fn a_request_is_counted_with_its_code_and_timed() {
        let metrics = RequestMetrics::default();
        let request = RequestMetric::of(
            "DELETE",
            "/api/v1/namespaces/unit-metrics/pods/p",
            false,
            false,
        );
        metrics.done(request, 404);
        let extra = ExtraMetrics(vec![Arc::new(|| "unit_extra 1\n".to_string())]);
        let text = metrics.render(&extra);
        assert!(
            text.contains(r#"apiserver_request_total{verb="DELETE",group="",version="v1",resource="pods",subresource="",scope="resource",component="apiserver",code="404"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"apiserver_request_duration_seconds_count{verb="DELETE",group="",version="v1",resource="pods",subresource="",scope="resource",component="apiserver"}"#),
            "{text}"
        );
        assert!(text.ends_with("unit_extra 1\n"), "{text}");
        let other = RequestMetrics::default().render(&ExtraMetrics::default());
        assert!(
            !other.contains("unit-metrics") && !other.contains("DELETE"),
            "{other}"
        );
    }
}
