//! Bootstrap tokens: how a new node proves it may join before it has a
//! certificate. A token `abcdef.0123456789abcdef` names the Secret
//! `kube-system/bootstrap-token-abcdef` (type `bootstrap.kubernetes.io/token`)
//! and authenticates as `system:bootstrap:abcdef` in `system:bootstrappers`
//! (plus the secret's `auth-extra-groups`), as Kubernetes' bootstrap token
//! authenticator does. What a bootstrapper may do is RBAC's: create
//! CertificateSigningRequests and read `kube-public/cluster-info`.

use super::UserInfo;
use crate::ApiServer;
use k8s_openapi::api::core::v1::Secret;
use minik8s_api::registry;
use serde_json::{json, Value};

pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";
/// The extra group kubeadm gives its node tokens (what our default bindings name).
pub const NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// `(id, secret)` of a well-formed token.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// A new random token.
pub fn new_token() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    let mut pick = |n: usize| -> String {
        (0..n)
            .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
            .collect()
    };
    format!("{}.{}", pick(6), pick(16))
}

/// The Secret that holds `token` (for the joining nodes of a cluster).
pub fn token_secret(token: &str, description: &str) -> Option<Value> {
    let (id, secret) = parse_token(token)?;
    Some(
        json!({"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "stringData": {"token-id": id, "token-secret": secret, "description": description,
                       "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
                       "auth-extra-groups": NODE_TOKEN_GROUP}}),
    )
}

fn data(secret: &Value, key: &str) -> Option<String> {
    use base64::Engine;
    let b = secret.pointer(&format!("/data/{key}"))?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    String::from_utf8(bytes).ok()
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The user a token's Secret makes of it, if the Secret allows authentication.
pub fn user_of(
    secret: &Value,
    id: &str,
    token_secret: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<UserInfo> {
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE)
        || minik8s_api::meta::is_deleting(secret)
        || data(secret, "usage-bootstrap-authentication").as_deref() != Some("true")
        || !same(&data(secret, "token-secret")?, token_secret)
        || data(secret, "token-id").as_deref() != Some(id)
    {
        return None;
    }
    if let Some(exp) = data(secret, "expiration") {
        let exp = chrono::DateTime::parse_from_rfc3339(&exp).ok()?;
        if exp < now {
            return None;
        }
    }
    let mut groups = vec![BOOTSTRAPPERS.to_string()];
    for g in data(secret, "auth-extra-groups")
        .unwrap_or_default()
        .split(',')
    {
        let g = g.trim();
        if g.starts_with("system:bootstrappers:") && !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    Some(UserInfo {
        username: format!("system:bootstrap:{id}"),
        groups,
        ..Default::default()
    })
}

impl ApiServer {
    /// The bootstrapper a token names, if it is one.
    pub(crate) async fn bootstrap_token_user(&self, token: &str) -> Option<UserInfo> {
        let (id, token_secret) = parse_token(token)?;
        let (secret, _) = self
            .read(
                registry::of::<Secret>(),
                Some("kube-system"),
                &format!("bootstrap-token-{id}"),
            )
            .await
            .ok()?;
        user_of(&secret, id, token_secret, chrono::Utc::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(token: &str, expiration: Option<&str>) -> Value {
        use base64::Engine;
        let mut s = token_secret(token, "test").unwrap();
        let mut data = serde_json::Map::new();
        let mut string_data = s["stringData"].as_object().unwrap().clone();
        if let Some(e) = expiration {
            string_data.insert("expiration".into(), json!(e));
        }
        for (k, v) in string_data {
            data.insert(
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap())),
            );
        }
        s["data"] = Value::Object(data);
        s
    }

    #[test]
    fn tokens_authenticate_as_bootstrappers_until_they_expire() {
        let token = new_token();
        let (id, secret) = parse_token(&token).unwrap();
        let now = chrono::Utc::now();
        let user = user_of(&stored(&token, None), id, secret, now).unwrap();
        assert_eq!(user.username, format!("system:bootstrap:{id}"));
        assert_eq!(user.groups, vec![BOOTSTRAPPERS, NODE_TOKEN_GROUP]);
        assert!(user_of(&stored(&token, None), id, "0000000000000000", now).is_none());
        assert!(user_of(
            &stored(&token, Some("2000-01-01T00:00:00Z")),
            id,
            secret,
            now
        )
        .is_none());
        assert!(user_of(
            &stored(&token, Some("2999-01-01T00:00:00Z")),
            id,
            secret,
            now
        )
        .is_some());
        assert!(parse_token("abc.def").is_none());
        assert!(parse_token("ABCDEF.0123456789abcdef").is_none());
    }
}
