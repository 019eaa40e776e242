//! The apiserver's span of a request (Kubernetes' `WithTracing` filter,
//! KEP-647), and the object's trace context it leaves on what it creates.
//!
//! A request gets a span when it starts a journey (the create of an
//! object) or continues one (a trusted caller's sampled `traceparent`: the
//! scheduler's binding, a controller's create of a ReplicaSet or a pod).
//! Whose `traceparent` is followed is Kubernetes' rule (system:masters and
//! system:monitoring), plus the control plane's own scheduler and
//! controller manager, which carry an object's trace to what they write
//! for it. Anyone else's is only linked, so a request cannot put spans into
//! another user's trace; reads and watches get no span.

use crate::auth::request_info::Attributes;
use crate::auth::UserInfo;
use axum::http::{HeaderMap, Method};
use minik8s_trace::{context, JOURNEY};
use serde_json::Value;

/// Users whose trace context a request may continue.
const TRUSTED_GROUPS: [&str; 2] = ["system:masters", "system:monitoring"];
const TRUSTED_USERS: [&str; 2] = ["system:kube-scheduler", "system:kube-controller-manager"];

fn trusted(user: &UserInfo) -> bool {
    user.groups
        .iter()
        .any(|g| TRUSTED_GROUPS.contains(&g.as_str()))
        || TRUSTED_USERS.contains(&user.username.as_str())
}

/// Creates that start no journey: records about other objects (Events,
/// reviews) and heartbeats, whose traces would only crowd out the journeys
/// in the store.
const NO_JOURNEY: [&str; 8] = [
    "events",
    "leases",
    "tokenreviews",
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "selfsubjectreviews",
];

/// Kubernetes' span name: `POST /api/v1/namespaces/{:namespace}/pods`.
fn span_name(method: &Method, a: &Attributes) -> String {
    let mut name = format!("{method} /");
    if a.api_group.is_empty() {
        name.push_str("api");
    } else {
        name.push_str("apis/");
        name.push_str(&a.api_group);
    }
    name.push('/');
    name.push_str(&a.api_version);
    if !a.namespace.is_empty() {
        name.push_str("/namespaces/{:namespace}");
    }
    name.push('/');
    name.push_str(&a.resource);
    if !a.name.is_empty() {
        name.push_str("/{:name}");
    }
    if !a.subresource.is_empty() {
        name.push('/');
        name.push_str(&a.subresource);
    }
    name
}

/// How many journeys the apiserver starts: a token bucket, so that a
/// person's creates are all traced while a burst of thousands a second
/// (a load test, a controller's flood) is traced a few dozen times a
/// second and costs almost nothing (Jaeger's rate-limiting sampler; the
/// cost is in doc/benchmarks.md). Decided before the span exists: an
/// untraced request makes none.
pub struct JourneyBudget {
    per_second: f64,
    burst: f64,
    state: std::sync::Mutex<(f64, std::time::Instant)>,
}

impl JourneyBudget {
    /// `per_second` journeys, in bursts of as many; 0: no limit.
    pub fn new(per_second: f64) -> JourneyBudget {
        let burst = per_second.max(1.0);
        JourneyBudget {
            per_second,
            burst,
            state: std::sync::Mutex::new((burst, std::time::Instant::now())),
        }
    }

    /// Whether one more journey may start now.
    pub fn take(&self) -> bool {
        if self.per_second <= 0.0 {
            return true;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        let (tokens, last) = *state;
        let tokens =
            (tokens + now.duration_since(last).as_secs_f64() * self.per_second).min(self.burst);
        *state = if tokens >= 1.0 {
            (tokens - 1.0, now)
        } else {
            (tokens, now)
        };
        tokens >= 1.0
    }
}

/// The span this request is served in, None when it gets none.
pub fn request_span(
    user: &UserInfo,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    budget: &JourneyBudget,
) -> Option<tracing::Span> {
    if *method == Method::GET || !tracing::enabled!(target: JOURNEY, tracing::Level::DEBUG) {
        return None;
    }
    let a = &crate::auth::request_info::parse(method.as_str(), path, false);
    if !a.resource_request {
        return None;
    }
    let incoming = headers
        .get(context::HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| context::parse(v).is_some());
    let follows = incoming.is_some() && trusted(user);
    let creates = a.verb == "create"
        && a.subresource.is_empty()
        && !NO_JOURNEY.contains(&a.resource.as_str());
    let starts = !follows && creates && budget.take();
    if !(follows || starts) {
        return None;
    }
    let name = span_name(method, a);
    let span = if creates && !follows {
        tracing::debug_span!(target: JOURNEY, "request", otel.name = %name, journey.start = true,
            verb = %a.verb, resource = %a.resource, namespace = %a.namespace,
            name = tracing::field::Empty, uid = tracing::field::Empty, user = %user.username,
            status = tracing::field::Empty)
    } else {
        tracing::debug_span!(target: JOURNEY, "request", otel.name = %name,
            verb = %a.verb, resource = %a.resource, subresource = %a.subresource,
            namespace = %a.namespace, name = %a.name, user = %user.username,
            status = tracing::field::Empty)
    };
    if follows {
        context::follow(&span, incoming);
    } else {
        context::link(&span, incoming);
    }
    Some(span)
}

/// The kinds whose work goes on in other components (the scheduler, the
/// kubelet, a workload controller that follows while it rolls out): the
/// apiserver keeps their trace context ([`Contexts`]) for those components
/// to ask for. Any other object's journey is found by its uid in the store
/// (while kept).
const CARRIED: [(&str, &str); 9] = [
    ("", "pods"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    ("disaggregatedset.x-k8s.io", "disaggregatedsets"),
    ("discovery.k8s.io", "endpointslices"),
];

/// The kinds whose context is that of their last change, not their
/// create: kube-proxy's rule sync joins the trace of the write that
/// changed an EndpointSlice (the Endpoints controller's, in the journey of
/// the pod that became ready). An update made outside any trace leaves
/// none.
const RESTAMPED: [(&str, &str); 1] = [("discovery.k8s.io", "endpointslices")];

/// Objects kept at most (the oldest forgotten first).
const MAX_CONTEXTS: usize = 100_000;

/// The trace context of each traced object, by uid: kept by the apiserver
/// and not on the object, which reads back exactly as Kubernetes serves
/// it (clients compare annotations). The components ask for it at
/// `GET /ui/v1/contexts?uid=`; only the apiserver sets it, so no user can
/// point their object's work at another's trace.
#[derive(Default)]
pub struct Contexts {
    inner: std::sync::Mutex<(
        std::collections::HashMap<String, String>,
        std::collections::VecDeque<String>,
    )>,
}

impl Contexts {
    fn set(&self, uid: &str, traceparent: Option<String>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *inner;
        match traceparent {
            None => {
                map.remove(uid);
            }
            Some(tp) => {
                if map.insert(uid.to_string(), tp).is_none() {
                    order.push_back(uid.to_string());
                }
                while order.len() > MAX_CONTEXTS {
                    if let Some(old) = order.pop_front() {
                        map.remove(&old);
                    }
                }
            }
        }
    }

    /// The trace context of the object with this uid.
    pub fn get(&self, uid: &str) -> Option<String> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0.get(uid).cloned()
    }

    /// On create: the object's trace context is this request's span. The
    /// span learns the object's name and uid.
    pub fn set_on_create(&self, group: &str, resource: &str, obj: &Value) {
        let span = tracing::Span::current();
        let uid = obj["metadata"]["uid"].as_str().unwrap_or("");
        span.record("name", obj["metadata"]["name"].as_str().unwrap_or(""));
        span.record("uid", uid);
        if CARRIED.contains(&(group, resource)) && !uid.is_empty() {
            if let Some(tp) = context::of(&span) {
                self.set(uid, Some(tp));
            }
        }
    }

    /// On update: the restamped kinds take this request's context (or
    /// none); every other object keeps the one it was created with.
    pub fn on_update(&self, group: &str, resource: &str, obj: &Value) {
        if RESTAMPED.contains(&(group, resource)) {
            if let Some(uid) = obj["metadata"]["uid"].as_str() {
                self.set(uid, context::current());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_span_is_named_as_kubernetes_names_it() {
        let a = crate::auth::request_info::parse(
            "POST",
            "/api/v1/namespaces/ns/pods/web/binding",
            false,
        );
        assert_eq!(
            span_name(&Method::POST, &a),
            "POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding"
        );
        let a = crate::auth::request_info::parse(
            "POST",
            "/apis/apps/v1/namespaces/ns/deployments",
            false,
        );
        assert_eq!(
            span_name(&Method::POST, &a),
            "POST /apis/apps/v1/namespaces/{:namespace}/deployments"
        );
    }

    #[test]
    fn a_burst_of_creates_starts_a_bounded_number_of_journeys() {
        let budget = JourneyBudget::new(10.0);
        let started = (0..1000).filter(|_| budget.take()).count();
        assert!((10..=11).contains(&started), "{started}");
        let unlimited = JourneyBudget::new(0.0);
        assert!((0..1000).all(|_| unlimited.take()));
    }

    #[test]
    fn only_the_control_plane_and_admins_continue_a_trace() {
        assert!(trusted(&UserInfo::new(
            "kubernetes-admin",
            &["system:masters"]
        )));
        assert!(trusted(&UserInfo::new("system:kube-scheduler", &[])));
        assert!(!trusted(&UserInfo::new(
            "alice",
            &["students", "system:authenticated"]
        )));
        assert!(!trusted(&UserInfo::new(
            "system:node:n1",
            &["system:nodes"]
        )));
    }

    #[test]
    fn a_context_is_set_only_inside_a_traced_request_and_kept_by_uid() {
        let contexts = Contexts::default();
        let pod = json!({"metadata": {"name": "p", "uid": "u1"}});
        // No recorded span here: nothing to keep.
        contexts.set_on_create("", "pods", &pod);
        assert_eq!(contexts.get("u1"), None);
        contexts.set(
            "u1",
            Some("00-11111111111111111111111111111111-2222222222222222-01".into()),
        );
        assert!(contexts.get("u1").is_some());
        // An update of a kind that is not restamped keeps it; an
        // EndpointSlice changed outside a trace loses its.
        contexts.on_update("", "pods", &pod);
        assert!(contexts.get("u1").is_some());
        let slice = json!({"metadata": {"name": "s", "uid": "u1"}});
        contexts.on_update("discovery.k8s.io", "endpointslices", &slice);
        assert_eq!(contexts.get("u1"), None);
    }
}
