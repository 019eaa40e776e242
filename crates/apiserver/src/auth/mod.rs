//! Who is asking and what they may do: the first two stages of every request.
//!
//! ```text
//!  request ─▶ authenticate ─────────────▶ impersonate ─▶ authorize ─────────▶ handler
//!             client certificate (TLS)     Impersonate-*   system:masters
//!             bearer token (static file)   headers         RBAC (rbac.rs over
//!             none: anonymous, 401 except                  the PolicyCache)
//!             the public paths
//! ```
//!
//! The plain-HTTP port (`--listen`, 127.0.0.1 by default) is the loopback
//! port old Kubernetes had: a request without credentials there is
//! `system:unsecured` in `system:masters` (everything allowed), so only
//! someone already on the machine reaches it. The secure port (`--secure-listen`,
//! TLS) trusts nobody without credentials.

pub mod bootstrap;
pub mod cache;
pub mod node;
pub mod policy;
pub mod rbac;
pub mod request_info;
pub mod reviews;
pub mod serviceaccount;
pub mod sessions;

use crate::ApiServer;
use axum::http::HeaderMap;
use minik8s_api::ApiError;
use request_info::Attributes;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The identity a request acts as (Kubernetes' `user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

pub const ALL_AUTHENTICATED: &str = "system:authenticated";
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
pub const SUPERUSER_GROUP: &str = "system:masters";
pub const ANONYMOUS: &str = "system:anonymous";

impl UserInfo {
    pub fn new(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Who sends requests without credentials.
    pub fn anonymous() -> UserInfo {
        UserInfo::new(ANONYMOUS, &[ALL_UNAUTHENTICATED])
    }

    /// Whoever uses the plain-HTTP loopback port without credentials.
    pub fn unsecured() -> UserInfo {
        UserInfo::new("system:unsecured", &[SUPERUSER_GROUP, ALL_AUTHENTICATED])
    }

    /// Adds `system:authenticated`, as every authenticator's result gets it.
    fn authenticated(mut self) -> UserInfo {
        if !self.groups.iter().any(|g| g == ALL_AUTHENTICATED) {
            self.groups.push(ALL_AUTHENTICATED.into());
        }
        self
    }

    pub fn is_superuser(&self) -> bool {
        self.groups.iter().any(|g| g == SUPERUSER_GROUP)
    }
}

/// How a connection authenticated below HTTP, set by the TLS listener on
/// every request it carries. Requests without it came in on the plain port.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The verified client certificate's CN (user) and O (groups).
    pub client_cert: Option<UserInfo>,
}

/// The static token file (`--token-auth-file`): `token,user,uid,"group1,group2"`
/// per line, as kube-apiserver reads it.
#[derive(Debug, Default, Clone)]
pub struct StaticTokens(BTreeMap<String, UserInfo>);

impl StaticTokens {
    pub fn load(path: &Path) -> anyhow::Result<StaticTokens> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the token file {}: {e}", path.display()))?;
        StaticTokens::parse(&text)
            .map_err(|e| anyhow::anyhow!("token file {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<StaticTokens, String> {
        let mut out = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line);
            if fields.len() < 3 {
                return Err(format!(
                    "line {}: want token,user,uid[,\"groups\"], got {} fields",
                    n + 1,
                    fields.len()
                ));
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            out.insert(
                fields[0].clone(),
                UserInfo {
                    username: fields[1].clone(),
                    uid: fields[2].clone(),
                    groups,
                    extra: BTreeMap::new(),
                },
            );
        }
        Ok(StaticTokens(out))
    }

    pub fn lookup(&self, token: &str) -> Option<&UserInfo> {
        self.0.get(token)
    }
}

/// One CSV line with double-quoted fields.
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// The paths anyone may read without credentials (Kubernetes'
/// system:public-info-viewer paths, and cluster-info and the join script
/// for joining nodes).
pub fn is_public_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz"
            | "/livez"
            | "/readyz"
            | "/version"
            | "/version/"
            | "/api/v1/namespaces/kube-public/configmaps/cluster-info"
            | crate::node_bundle::JOIN_SCRIPT
            | sessions::LOGIN
    ) || ["/healthz/", "/livez/", "/readyz/"]
        .iter()
        .any(|p| path.starts_with(p))
}

/// `401 Unauthorized`, as Kubernetes answers it.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// Kubernetes' 403 for a denied request: `pods "web" is forbidden: User
/// "alice" cannot get resource "pods" in API group "" in the namespace "b"`,
/// with the authorizer's reason appended when it has one.
pub fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let who = &user.username;
    let mut msg = if !a.resource_request {
        format!("User {who:?} cannot {} path {:?}", a.verb, a.path)
    } else {
        let res = a.combined_resource();
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {who:?} cannot {} resource {res:?} in API group {:?} {scope}",
            a.verb, a.api_group
        )
    };
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let group_resource = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let message = match (group_resource.is_empty(), a.name.is_empty()) {
        (true, _) => format!("forbidden: {msg}"),
        (false, true) => format!("{group_resource} is forbidden: {msg}"),
        (false, false) => format!("{group_resource} {:?} is forbidden: {msg}", a.name),
    };
    // As metav1.StatusDetails serializes: empty fields are left out.
    let mut details = serde_json::Map::new();
    for (k, v) in [
        ("name", &a.name),
        ("group", &a.api_group),
        ("kind", &a.resource),
    ] {
        if !v.is_empty() {
            details.insert(k.into(), json!(v));
        }
    }
    ApiError {
        details: Some(Box::new(Value::Object(details))),
        ..ApiError::new(403, "Forbidden", message)
    }
}

/// How the apiserver authorizes (`--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything authenticated is allowed.
    AlwaysAllow,
    /// `system:masters`, then RBAC.
    Rbac,
}

/// Authentication and authorization state of one apiserver.
pub struct Auth {
    pub tokens: StaticTokens,
    pub mode: Mode,
    /// `--service-account-max-token-expiration`: the longest token issued.
    pub max_token_seconds: Option<i64>,
}

impl ApiServer {
    /// Authentication, impersonation and authorization of one request: who
    /// is asking, and whether they may (401 and 403 come from here, before
    /// the body is read).
    pub async fn admit_request(
        &self,
        conn: Option<&Connection>,
        method: &axum::http::Method,
        path: &str,
        headers: &HeaderMap,
        watch: bool,
    ) -> Result<UserInfo, ApiError> {
        let user = match self.authenticate(headers, conn).await? {
            Some(user) => user,
            None => match self.sessions.user_of(method, path, headers) {
                Some(user) => user,
                None if is_public_path(path) => UserInfo::anonymous(),
                None => return Err(unauthorized()),
            },
        };
        let user = self.impersonate(user, headers)?;
        let attrs = request_info::parse(method.as_str(), path, watch);
        self.check(&user, &attrs)?;
        Ok(user)
    }

    /// The identity behind a request, `Ok(None)` for an anonymous one.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        conn: Option<&Connection>,
    ) -> Result<Option<UserInfo>, ApiError> {
        let bearer = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if let Some(cert) = conn.and_then(|c| c.client_cert.clone()) {
            return Ok(Some(cert.authenticated()));
        }
        if let Some(token) = bearer {
            if let Some(user) = self.auth.tokens.lookup(token) {
                return Ok(Some(user.clone().authenticated()));
            }
            if let Some(user) = self.bootstrap_token_user(token).await {
                return Ok(Some(user.authenticated()));
            }
            if token.matches('.').count() == 2 {
                if let Some(user) = self.service_account_user(token).await {
                    return Ok(Some(user.authenticated()));
                }
            }
            return Err(unauthorized());
        }
        match conn {
            None => Ok(Some(UserInfo::unsecured())),
            Some(_) => Ok(None),
        }
    }

    /// Whether a write by `user` is checked against what they hold (RBAC's
    /// escalation prevention): not the superuser's, not without authorization.
    pub fn checks_writer(&self, user: &UserInfo) -> bool {
        self.auth.mode != Mode::AlwaysAllow && !user.is_superuser()
    }

    /// Whether `user` may do `a` (Ok with the reason, or Err with why not).
    pub fn authorize(&self, user: &UserInfo, a: &Attributes) -> Result<String, String> {
        if self.auth.mode == Mode::AlwaysAllow || user.is_superuser() {
            return Ok(String::new());
        }
        let mut node_reason = String::new();
        if let Some(node) = node::node_name(user) {
            match self.authorize_node(node, user, a) {
                Ok(reason) => return Ok(reason),
                Err(why) => node_reason = why,
            }
        }
        self.policy.policy().authorize(user, a).map_err(|errors| {
            if !node_reason.is_empty() {
                return node_reason;
            }
            if errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: [{}]", errors.join(", "))
            }
        })
    }

    /// Authorizes `a` for `user`, as a 403 when denied. A kubelet deleting a
    /// pod no node has (already gone) gets the 404 it would get with the
    /// real NodeRestriction, not a 403: its last delete of a pod removed
    /// meanwhile (a namespace being deleted) is then done, not refused.
    pub fn check(&self, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
        self.authorize(user, a).map(|_| ()).map_err(|reason| {
            let unknown_pod = node::node_name(user).is_some()
                && a.resource_request
                && a.verb == "delete"
                && (
                    a.api_group.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                ) == ("", "pods", "")
                && self.nodes.pod_node(&a.namespace, &a.name).is_none();
            if unknown_pod {
                ApiError::not_found(
                    minik8s_api::registry::of::<k8s_openapi::api::core::v1::Pod>(),
                    &a.name,
                )
            } else {
                forbidden(user, a, &reason)
            }
        })
    }

    /// Applies the `Impersonate-*` headers: `user` acts as someone else if it
    /// may `impersonate` them (users, groups, serviceaccounts, uids, extras).
    pub fn impersonate(&self, user: UserInfo, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect()
        };
        let Some(as_user) = values("impersonate-user").into_iter().next() else {
            if !values("impersonate-group").is_empty() || !values("impersonate-uid").is_empty() {
                return Err(ApiError::internal(
                    "requested [{Kind:Group}] without impersonating a user",
                ));
            }
            return Ok(user);
        };
        let mut target = UserInfo {
            username: as_user.clone(),
            ..Default::default()
        };
        let mut checks = Vec::new();
        match as_user
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
        {
            Some((ns, name)) => {
                let mut a = Attributes::resource("impersonate", "", "serviceaccounts", ns);
                a.name = name.into();
                checks.push(a);
                target.groups = vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
            None => {
                let mut a = Attributes::resource("impersonate", "", "users", "");
                a.name = as_user.clone();
                checks.push(a);
            }
        }
        for g in values("impersonate-group") {
            let mut a = Attributes::resource("impersonate", "", "groups", "");
            a.name = g.clone();
            checks.push(a);
            target.groups.push(g);
        }
        if let Some(uid) = values("impersonate-uid").into_iter().next() {
            let mut a = Attributes::resource("impersonate", "authentication.k8s.io", "uids", "");
            a.name = uid.clone();
            checks.push(a);
            target.uid = uid;
        }
        for (name, value) in headers {
            let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
                continue;
            };
            let value = value.to_str().unwrap_or("").to_string();
            let mut a =
                Attributes::resource("impersonate", "authentication.k8s.io", "userextras", "");
            a.subresource = key.to_string();
            a.name = value.clone();
            checks.push(a);
            target.extra.entry(key.to_string()).or_default().push(value);
        }
        for a in &checks {
            self.check(&user, a)?;
        }
        if target.username != ANONYMOUS {
            target = target.authenticated();
        }
        Ok(target)
    }
}

/// The `userInfo` of reviews (`username`, `uid`, `groups`, `extra`).
pub fn user_json(user: &UserInfo) -> Value {
    serde_json::to_value(user).unwrap_or_default()
}

#[cfg(test)]
mod tests;
