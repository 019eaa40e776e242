//! Max-in-flight limits: under overload the apiserver answers 429 with
//! `Retry-After` at once instead of slowing every request down, as
//! Kubernetes' `--max-requests-inflight` filter does. Requests are counted
//! per class, so a flood of writes cannot starve reads, nor watches either.
//!
//! ```text
//!  request ─▶ authenticated ─▶ class ─▶ permit free? ─▶ handled (permit held until
//!                               │                        the response body is sent)
//!                               │          └─ none ─▶ 429 TooManyRequests, Retry-After: 1
//!        system:masters, /healthz /livez /readyz ─▶ never limited
//! ```

use crate::auth::UserInfo;
use axum::http::Method;
use minik8s_api::ApiError;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What kind of work a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// GET of objects, lists, discovery.
    Read,
    /// POST, PUT, PATCH, DELETE.
    Mutation,
    /// `?watch=true`: open for minutes.
    Watch,
    /// exec, attach, port-forward, logs, proxy: open as long as the user likes.
    LongRunning,
}

/// The limits, by class (0: unlimited).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub reads: usize,
    pub mutations: usize,
    pub watches: usize,
    pub long_running: usize,
}

/// The subresources Kubernetes treats as long-running.
const LONG_RUNNING: &[&str] = &["exec", "attach", "portforward", "log", "proxy"];

/// The class of a request from its method, path and `watch` flag; None for
/// requests never limited (health checks, which must answer under load).
pub fn classify(method: &Method, path: &str, watch: bool) -> Option<Class> {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if matches!(first, "healthz" | "livez" | "readyz") {
        return None;
    }
    // The web view's change feed streams as long as its page is open.
    if watch || path == crate::ui::WATCH {
        return Some(Class::Watch);
    }
    if is_long_running(path) {
        return Some(Class::LongRunning);
    }
    Some(match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Class::Read,
        _ => Class::Mutation,
    })
}

/// `.../pods/<name>/exec` and the like (also `nodes|services/<name>/proxy`).
fn is_long_running(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').rsplit('/').take(3).collect();
    match segments.as_slice() {
        [sub, _name, "pods"] => LONG_RUNNING.contains(sub),
        ["proxy", _name, "nodes" | "services"] => true,
        _ => false,
    }
}

/// One semaphore per class.
pub struct InFlight {
    reads: Option<Arc<Semaphore>>,
    mutations: Option<Arc<Semaphore>>,
    watches: Option<Arc<Semaphore>>,
    long_running: Option<Arc<Semaphore>>,
}

fn semaphore(limit: usize) -> Option<Arc<Semaphore>> {
    (limit > 0).then(|| Arc::new(Semaphore::new(limit)))
}

/// Kubernetes' answer when a class is full.
pub fn too_many_requests() -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
    );
    e.details = Some(Box::new(serde_json::json!({"retryAfterSeconds": 1})));
    e
}

impl InFlight {
    pub fn new(limits: Limits) -> InFlight {
        InFlight {
            reads: semaphore(limits.reads),
            mutations: semaphore(limits.mutations),
            watches: semaphore(limits.watches),
            long_running: semaphore(limits.long_running),
        }
    }

    /// A permit for a request of `class` by `user`, held while it is served;
    /// Ok(None) when it is not limited.
    pub fn admit(
        &self,
        class: Option<Class>,
        user: &UserInfo,
    ) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        // As Kubernetes' filter: the cluster's administrators are never turned away.
        if user.groups.iter().any(|g| g == "system:masters") {
            return Ok(None);
        }
        let sem = match class {
            None => return Ok(None),
            Some(Class::Read) => &self.reads,
            Some(Class::Mutation) => &self.mutations,
            Some(Class::Watch) => &self.watches,
            Some(Class::LongRunning) => &self.long_running,
        };
        match sem {
            None => Ok(None),
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(permit) => Ok(Some(permit)),
                Err(_) => Err(too_many_requests()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_fall_into_classes() {
        let c = |m: Method, p: &str, w: bool| classify(&m, p, w);
        assert_eq!(c(Method::GET, "/api/v1/pods", false), Some(Class::Read));
        assert_eq!(c(Method::GET, "/api/v1/pods", true), Some(Class::Watch));
        assert_eq!(
            c(Method::POST, "/api/v1/namespaces/d/pods", false),
            Some(Class::Mutation)
        );
        assert_eq!(
            c(Method::POST, "/api/v1/namespaces/d/pods/p/exec", false),
            Some(Class::LongRunning)
        );
        assert_eq!(
            c(Method::GET, "/api/v1/namespaces/d/pods/p/log", false),
            Some(Class::LongRunning)
        );
        // A ConfigMap named "log" is just an object.
        assert_eq!(
            c(Method::GET, "/api/v1/namespaces/d/configmaps/log", false),
            Some(Class::Read)
        );
        assert_eq!(
            c(Method::GET, "/api/v1/nodes/n1/proxy", false),
            Some(Class::LongRunning)
        );
        assert_eq!(c(Method::GET, "/readyz", false), None);
    }

    #[test]
    fn a_full_class_answers_429_and_masters_pass() {
        let f = InFlight::new(Limits {
            reads: 1,
            mutations: 0,
            watches: 1,
            long_running: 1,
        });
        let alice = UserInfo {
            username: "alice".into(),
            ..Default::default()
        };
        let held = f.admit(Some(Class::Read), &alice).unwrap();
        assert!(held.is_some());
        let e = f.admit(Some(Class::Read), &alice).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
        // Other classes are counted apart; mutations are unlimited here.
        assert!(f.admit(Some(Class::Watch), &alice).unwrap().is_some());
        assert!(f.admit(Some(Class::Mutation), &alice).unwrap().is_none());
        let admin = UserInfo {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        assert!(f.admit(Some(Class::Read), &admin).is_ok());
        drop(held);
        assert!(f.admit(Some(Class::Read), &alice).is_ok());
    }
}
