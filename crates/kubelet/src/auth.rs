//! Who may use the kubelet's port (Kubernetes' kubelet authentication and
//! authorization, webhook mode): TLS with a client certificate from the
//! cluster CA, or a bearer token the apiserver vouches for (TokenReview);
//! then the apiserver decides (SubjectAccessReview) on `nodes/<sub>` of this
//! node. Anonymous requests get 401, as with `--anonymous-auth=false`.
//!
//! ```text
//!  GET /containerLogs/... ─▶ client cert CN/O, or TokenReview(token) ─▶ user
//!     ─▶ SubjectAccessReview{user, get nodes/proxy NODE} ─▶ allowed? ─▶ handler
//!  /stats/* → nodes/stats, /metrics* → nodes/metrics, /logs/* → nodes/log, other → nodes/proxy
//! ```

use crate::Kubelet;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use minik8s_pki::serve::ClientCert;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A user as the kubelet knows it: name, groups (and uid, extra from a token).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// The nodes subresource a kubelet path is authorized as.
pub fn subresource(path: &str) -> &'static str {
    if path.starts_with("/stats") {
        "stats"
    } else if path.starts_with("/metrics") {
        "metrics"
    } else if path.starts_with("/logs") {
        "log"
    } else if path.starts_with("/spec") {
        "spec"
    } else {
        "proxy"
    }
}

/// The verb of an HTTP method, as the kubelet's authorizer names it.
pub fn verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "get",
    }
}

/// A decision's question: who, which verb, which nodes subresource.
type Question = (User, &'static str, &'static str);

/// Recent answers of the apiserver (tokens and decisions), kept briefly as
/// the kubelet's webhook caches do.
#[derive(Default)]
pub struct Decisions {
    tokens: Mutex<Recent<String, Option<User>>>,
    allowed: Mutex<Recent<Question, bool>>,
}

const TOKEN_TTL: Duration = Duration::from_secs(120);
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);

/// Answers each cache keeps at most: the keys come from callers (any bearer
/// token sent to the port), so the cache is bounded by size, not only by age.
const MAX_ANSWERS: usize = 1024;

/// Answers by key with the time they were given, at most [`MAX_ANSWERS`]:
/// when full, expired answers go first, then the oldest.
struct Recent<K, V> {
    answers: HashMap<K, (V, Instant)>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            answers: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Recent<K, V> {
    /// The answer for `key` if younger than `ttl(answer)`.
    fn get(&self, key: &K, ttl: impl Fn(&V) -> Duration) -> Option<V> {
        let (v, at) = self.answers.get(key)?;
        (at.elapsed() < ttl(v)).then(|| v.clone())
    }

    fn insert(&mut self, key: K, v: V, longest_ttl: Duration) {
        if self.answers.len() >= MAX_ANSWERS && !self.answers.contains_key(&key) {
            self.answers.retain(|_, (_, at)| at.elapsed() < longest_ttl);
            if self.answers.len() >= MAX_ANSWERS {
                let oldest = self
                    .answers
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    self.answers.remove(&k);
                }
            }
        }
        self.answers.insert(key, (v, Instant::now()));
    }
}

impl Kubelet {
    async fn review(&self, path: &str, body: Value) -> Option<Value> {
        let bytes = serde_json::to_vec(&body).ok()?;
        self.client
            .request(
                reqwest::Method::POST,
                path,
                Some((minik8s_client::rest::content::JSON, bytes)),
                minik8s_client::rest::content::JSON,
            )
            .await
            .map_err(|e| tracing::warn!(error = %e, path, "review failed"))
            .ok()
    }

    async fn token_user(&self, token: &str) -> Option<User> {
        if let Some(user) = self
            .decisions
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&token.to_string(), |_| TOKEN_TTL)
        {
            return user;
        }
        let answer = self
            .review(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
            )
            .await?;
        let status = &answer["status"];
        let user = (status["authenticated"] == true).then(|| User {
            name: status["user"]["username"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            groups: serde_json::from_value(status["user"]["groups"].clone()).unwrap_or_default(),
        });
        self.decisions
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_string(), user.clone(), TOKEN_TTL);
        user
    }

    async fn allowed(&self, user: &User, verb: &'static str, sub: &'static str) -> bool {
        let key = (user.clone(), verb, sub);
        if let Some(ok) = self
            .decisions
            .allowed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key, |ok| if *ok { ALLOWED_TTL } else { DENIED_TTL })
        {
            return ok;
        }
        let answer = self
            .review(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                       "spec": {"user": user.name, "groups": user.groups,
                                "resourceAttributes": {"verb": verb, "resource": "nodes", "subresource": sub,
                                                       "name": self.config.node_name}}}),
            )
            .await;
        let ok = answer.is_some_and(|a| a["status"]["allowed"] == true);
        self.decisions
            .allowed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, ok, ALLOWED_TTL);
        ok
    }
}

/// The middleware in front of every route but `/healthz`.
pub async fn authenticate_and_authorize(
    State(k): State<Arc<Kubelet>>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let cert = req
        .extensions()
        .get::<ClientCert>()
        .and_then(|c| c.0.clone());
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let user = match (cert, bearer) {
        (Some((name, groups)), _) => Some(User { name, groups }),
        (None, Some(token)) => k.token_user(&token).await,
        (None, None) => None,
    };
    let Some(user) = user else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    };
    let (v, sub) = (verb(req.method().as_str()), subresource(req.uri().path()));
    if !k.allowed(&user, v, sub).await {
        let msg = format!(
            "Forbidden (user={}, verb={v}, resource=nodes, subresource(s)=[{sub}])",
            user.name
        );
        return (StatusCode::FORBIDDEN, msg).into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_methods_map_to_node_subresources_and_verbs() {
        assert_eq!(subresource("/stats/summary"), "stats");
        assert_eq!(subresource("/metrics/cadvisor"), "metrics");
        assert_eq!(subresource("/logs/syslog"), "log");
        assert_eq!(subresource("/containerLogs/ns/p/c"), "proxy");
        assert_eq!(subresource("/exec/ns/p/c"), "proxy");
        assert_eq!(verb("GET"), "get");
        assert_eq!(verb("POST"), "create");
    }

    #[test]
    fn answers_are_bounded_by_count_and_age() {
        let mut cache = Recent::<String, bool>::default();
        for i in 0..5 * MAX_ANSWERS {
            cache.insert(format!("token-{i}"), true, TOKEN_TTL);
        }
        assert_eq!(cache.answers.len(), MAX_ANSWERS);
        // The newest stay, the oldest went.
        let newest = format!("token-{}", 5 * MAX_ANSWERS - 1);
        assert_eq!(cache.get(&newest, |_| TOKEN_TTL), Some(true));
        assert_eq!(cache.get(&"token-0".to_string(), |_| TOKEN_TTL), None);
        // An answer older than its time to live is not served.
        assert_eq!(cache.get(&newest, |_| Duration::ZERO), None);
    }
}
