//! The kubelet's ServiceAccount token manager: the tokens of pods'
//! projected `serviceAccountToken` sources, asked from the TokenRequest API
//! bound to the pod, and asked again once 80 % of their lifetime has passed
//! (or after 24 h), as Kubernetes' kubelet token manager does. The volume
//! is republished on the next sync, so the pod always reads a live token.

use minik8s_client::Client;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// (pod uid, service account, audience, expirationSeconds).
type Key = (String, String, String, i64);

#[derive(Debug, Clone)]
struct Issued {
    token: String,
    issued: i64,
    expires: i64,
}

/// Whether a token issued at `issued`, expiring at `expires`, is due for renewal at `now`.
pub fn needs_refresh(issued: i64, expires: i64, now: i64) -> bool {
    let ttl = (expires - issued).max(0);
    now >= issued + ttl * 8 / 10 || now - issued > 24 * 3600
}

#[derive(Default)]
pub struct TokenManager {
    tokens: Mutex<HashMap<Key, Issued>>,
}

impl TokenManager {
    /// Forgets the tokens of a pod that is gone (the pod worker ends): a
    /// node that runs thousands of short pods must not keep each one's
    /// token until it expires.
    pub fn forget_pod(&self, pod_uid: &str) {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(uid, ..), _| uid != pod_uid);
    }

    /// Whether a token of this pod is kept.
    pub fn holds_for(&self, pod_uid: &str) -> bool {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .any(|(uid, ..)| uid == pod_uid)
    }

    /// The token for `pod`'s service account and `audience` ("" = the
    /// apiserver's), asking for a new one when due.
    pub async fn get(
        &self,
        client: &Client,
        pod: &k8s_openapi::api::core::v1::Pod,
        audience: &str,
        expiration: i64,
    ) -> anyhow::Result<String> {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let sa = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into());
        let key = (uid.clone(), sa.clone(), audience.to_string(), expiration);
        let now = chrono::Utc::now().timestamp();
        {
            let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            // Tokens of pods long gone expire out of the cache.
            tokens.retain(|_, t| t.expires > now - 3600);
            if let Some(t) = tokens.get(&key) {
                if !needs_refresh(t.issued, t.expires, now) {
                    return Ok(t.token.clone());
                }
            }
        }
        let audiences: Vec<&str> = if audience.is_empty() {
            vec![]
        } else {
            vec![audience]
        };
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": audiences, "expirationSeconds": expiration,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}}});
        let answer: Value = client
            .request(
                reqwest::Method::POST,
                &format!("/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"),
                Some((
                    minik8s_client::rest::content::JSON,
                    serde_json::to_vec(&request)?,
                )),
                minik8s_client::rest::content::JSON,
            )
            .await
            .map_err(|e| anyhow::anyhow!("failed to fetch token: {e}"))?;
        let token = answer["status"]["token"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("failed to fetch token: the answer has no token"))?
            .to_string();
        let expires = answer["status"]["expirationTimestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp())
            .unwrap_or(now + expiration);
        tracing::debug!(pod = name, sa, expires, "service account token issued");
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key,
                Issued {
                    token: token.clone(),
                    issued: now,
                    expires,
                },
            );
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_at_four_fifths_of_their_life() {
        assert!(!needs_refresh(1000, 2000, 1500));
        assert!(!needs_refresh(1000, 2000, 1799));
        assert!(needs_refresh(1000, 2000, 1800));
        assert!(needs_refresh(0, 10 * 24 * 3600, 24 * 3600 + 1));
    }
}
