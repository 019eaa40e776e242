//! Registry credentials from a pod's `imagePullSecrets` (Secrets of type
//! `kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg`), matched
//! to an image's registry as the real kubelet's credential keyring does:
//! every entry whose registry (and path prefix) the image lies under, most
//! specific first; the pull tries each in turn.
//!
//! ```text
//!  image 127.0.0.1:5000/team/app:1 ──registry──▶ 127.0.0.1:5000
//!  Secret .dockerconfigjson {"auths": {"127.0.0.1:5000": {"auth": base64(user:password)}}}
//!                                           └──▶ (user, password) for the pull
//! ```

use base64::Engine;
use serde_json::Value;

/// One registry login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
    /// The registry the login is for, as the secret names it.
    pub server: String,
}

/// Docker Hub, as image names without a registry mean it.
const DOCKER_HUB: &str = "docker.io";

/// An image's registry host and repository path (`docker.io` for short names).
pub fn registry_and_path(image: &str) -> (String, String) {
    let name = image.split('@').next().unwrap_or(image);
    let (first, rest) = match name.split_once('/') {
        Some((first, rest)) => (first, rest),
        None => return (DOCKER_HUB.into(), format!("library/{name}")),
    };
    if first.contains('.') || first.contains(':') || first == "localhost" {
        let host = if first == "index.docker.io" || first == "registry-1.docker.io" {
            DOCKER_HUB
        } else {
            first
        };
        (host.into(), rest.into())
    } else {
        (DOCKER_HUB.into(), name.into())
    }
}

/// A config key's registry host and path prefix: `https://index.docker.io/v1/`
/// is Docker Hub; a scheme and the API version path are dropped.
fn key_host_and_prefix(key: &str) -> (String, String) {
    let bare = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let (host, path) = bare.split_once('/').unwrap_or((bare, ""));
    let path = path.trim_end_matches('/');
    let path = if path == "v1" || path == "v2" {
        ""
    } else {
        path
    };
    let host = match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => DOCKER_HUB,
        h => h,
    };
    (host.to_string(), path.to_string())
}

/// The logins of one docker config (`.dockerconfigjson`'s `auths`, or a
/// `.dockercfg` map), by key.
fn logins(config: &Value) -> Vec<(String, Credential)> {
    let auths = config
        .get("auths")
        .and_then(Value::as_object)
        .or_else(|| config.as_object());
    let mut out = Vec::new();
    for (key, entry) in auths.into_iter().flatten() {
        let field = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
        let (mut username, mut password) =
            (field("username").to_string(), field("password").to_string());
        if username.is_empty() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(field("auth"))
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            if let Some((u, p)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
                (username, password) = (u.to_string(), p.to_string());
            }
        }
        if !username.is_empty() {
            out.push((
                key.clone(),
                Credential {
                    username,
                    password,
                    server: key.clone(),
                },
            ));
        }
    }
    out
}

/// The logins that apply to `image`, most specific (longest path prefix) first.
pub fn for_image(image: &str, configs: &[Value]) -> Vec<Credential> {
    let (host, path) = registry_and_path(image);
    let mut matching: Vec<(usize, Credential)> = configs
        .iter()
        .flat_map(logins)
        .filter_map(|(key, cred)| {
            let (key_host, prefix) = key_host_and_prefix(&key);
            let under =
                prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"));
            (key_host == host && under).then_some((prefix.len(), cred))
        })
        .collect();
    matching.sort_by_key(|(specificity, _)| std::cmp::Reverse(*specificity));
    matching.into_iter().map(|(_, c)| c).collect()
}

/// The docker config a pull secret holds, by its type's key.
pub fn config_of(data: &std::collections::BTreeMap<String, Vec<u8>>) -> Option<Value> {
    [".dockerconfigjson", ".dockercfg"]
        .iter()
        .find_map(|k| data.get(*k))
        .and_then(|bytes| serde_json::from_slice(bytes).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_name_their_registry() {
        assert_eq!(
            registry_and_path("busybox"),
            ("docker.io".into(), "library/busybox".into())
        );
        assert_eq!(
            registry_and_path("team/app:1"),
            ("docker.io".into(), "team/app:1".into())
        );
        assert_eq!(
            registry_and_path("127.0.0.1:5000/team/app:1"),
            ("127.0.0.1:5000".into(), "team/app:1".into())
        );
        assert_eq!(
            registry_and_path("localhost/app"),
            ("localhost".into(), "app".into())
        );
    }

    #[test]
    fn logins_match_the_registry_most_specific_first() {
        let auth = base64::engine::general_purpose::STANDARD.encode("student:s3cret");
        let configs = [
            json!({"auths": {"127.0.0.1:5000": {"auth": auth},
                             "127.0.0.1:5000/team": {"username": "team", "password": "t"},
                             "https://index.docker.io/v1/": {"username": "hub", "password": "h"}}}),
            json!({"other.example:443": {"username": "x", "password": "y"}}),
        ];
        let users = |image: &str| -> Vec<String> {
            for_image(image, &configs)
                .into_iter()
                .map(|c| c.username)
                .collect()
        };
        assert_eq!(users("127.0.0.1:5000/team/app:1"), ["team", "student"]);
        assert_eq!(users("127.0.0.1:5000/teams/app:1"), ["student"]);
        assert_eq!(users("busybox:1.36"), ["hub"]);
        assert_eq!(users("other.example:443/app"), ["x"]);
        assert!(users("quay.io/app").is_empty());
        let c = &for_image("127.0.0.1:5000/app", &configs)[0];
        assert_eq!(
            (c.password.as_str(), c.server.as_str()),
            ("s3cret", "127.0.0.1:5000")
        );
    }
}
