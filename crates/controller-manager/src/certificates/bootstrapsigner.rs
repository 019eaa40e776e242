//! The bootstrap signer (Kubernetes' bootstrapsigner controller): keeps
//! `kube-public/cluster-info` signed by every bootstrap token that allows
//! signing (`jws-kubeconfig-<token-id>`), and drops signatures of tokens that
//! are gone or expired. A joining node fetches cluster-info, checks the
//! signature with its token, and so trusts the CA inside without being told
//! its hash.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::Event;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const CLUSTER_INFO: &str = "cluster-info";
const KEY: &str = "kube-public/cluster-info";
const SIGNATURE_PREFIX: &str = "jws-kubeconfig-";

/// The tokens (id → secret) that may sign, from bootstrap token Secrets.
pub fn signing_tokens<'a>(
    secrets: impl Iterator<Item = &'a Secret>,
    now: chrono::DateTime<chrono::Utc>,
) -> BTreeMap<String, String> {
    let text = |s: &Secret, k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    secrets
        .filter(|s| s.type_.as_deref() == Some("bootstrap.kubernetes.io/token"))
        .filter(|s| s.metadata.namespace.as_deref() == Some("kube-system"))
        .filter(|s| text(s, "usage-bootstrap-signing").as_deref() == Some("true"))
        .filter(|s| {
            text(s, "expiration")
                .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e).ok())
                .is_none_or(|e| e > now)
        })
        .filter_map(|s| Some((text(s, "token-id")?, text(s, "token-secret")?)))
        .collect()
}

/// cluster-info's data with exactly the signatures `tokens` should have.
pub fn signed_data(
    data: &BTreeMap<String, String>,
    tokens: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = data
        .iter()
        .filter(|(k, _)| !k.starts_with(SIGNATURE_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(kubeconfig) = data.get("kubeconfig") {
        for (id, secret) in tokens {
            match minik8s_pki::jws::sign(kubeconfig, id, secret) {
                Ok(sig) => {
                    out.insert(format!("{SIGNATURE_PREFIX}{id}"), sig);
                }
                // A token that cannot sign (an empty secret) gets no signature.
                Err(e) => tracing::warn!(token = %id, error = %e, "signing cluster-info"),
            }
        }
    }
    out
}

pub struct BootstrapSigner {
    client: Client,
    configmaps: Cache<ConfigMap>,
    secrets: Cache<Secret>,
}

impl BootstrapSigner {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(BootstrapSigner {
            client,
            configmaps: informers.cache(),
            secrets: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .watches::<ConfigMap, _>(informers, |_, ev| {
                let cm = match ev {
                    Event::Deleted(_) => return Vec::new(),
                    ev => ev.object(),
                };
                let is_it = cm.metadata.namespace.as_deref() == Some("kube-public")
                    && cm.metadata.name.as_deref() == Some(CLUSTER_INFO);
                if is_it {
                    vec![KEY.to_string()]
                } else {
                    Vec::new()
                }
            })?
            .watches::<Secret, _>(informers, |_, ev| {
                let s = ev.object();
                if s.type_.as_deref() == Some("bootstrap.kubernetes.io/token") {
                    vec![KEY.to_string()]
                } else {
                    Vec::new()
                }
            })
    }
}

impl Reconciler for BootstrapSigner {
    const NAME: &'static str = "bootstrapsigner";

    async fn reconcile(&self, _key: &str) -> Result<Action, ClientError> {
        let Some(cm) = self.configmaps.get(KEY) else {
            return Ok(Action::Done);
        };
        let secrets = self.secrets.list();
        let tokens = signing_tokens(secrets.iter().map(|s| s.as_ref()), chrono::Utc::now());
        let data = cm.data.clone().unwrap_or_default();
        let want = signed_data(&data, &tokens);
        if want == data {
            return Ok(Action::Done);
        }
        let api = self
            .client
            .dynamic(registry::of::<ConfigMap>(), Some("kube-public"));
        let mut obj = serde_json::to_value(cm.as_ref()).unwrap_or_default();
        obj["data"] = Value::Object(
            want.into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect::<Map<_, _>>(),
        );
        match api.replace(CLUSTER_INFO, &obj).await {
            Ok(_) => Ok(Action::Done),
            Err(e) if e.is_conflict() => {
                Ok(Action::RequeueAfter(std::time::Duration::from_millis(100)))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn token(id: &str, secret: &str, signing: &str, expiration: Option<&str>) -> Secret {
        let mut data = BTreeMap::from([
            ("token-id".to_string(), ByteString(id.into())),
            ("token-secret".to_string(), ByteString(secret.into())),
            (
                "usage-bootstrap-signing".to_string(),
                ByteString(signing.into()),
            ),
        ]);
        if let Some(e) = expiration {
            data.insert("expiration".into(), ByteString(e.into()));
        }
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("bootstrap-token-{id}")),
                namespace: Some("kube-system".into()),
                ..Default::default()
            },
            type_: Some("bootstrap.kubernetes.io/token".into()),
            data: Some(data),
            ..Default::default()
        }
    }

    #[test]
    fn signatures_follow_the_tokens_that_may_sign() {
        let now = chrono::Utc::now();
        let secrets = [
            token("aaaaaa", "0123456789abcdef", "true", None),
            token("bbbbbb", "0123456789abcdef", "false", None),
            token(
                "cccccc",
                "0123456789abcdef",
                "true",
                Some("2000-01-01T00:00:00Z"),
            ),
        ];
        let tokens = signing_tokens(secrets.iter(), now);
        assert_eq!(tokens.keys().collect::<Vec<_>>(), vec!["aaaaaa"]);
        let data = BTreeMap::from([
            ("kubeconfig".to_string(), "text".to_string()),
            ("jws-kubeconfig-zzzzzz".to_string(), "stale".to_string()),
        ]);
        let signed = signed_data(&data, &tokens);
        assert_eq!(signed.len(), 2);
        assert!(minik8s_pki::jws::verify(
            "text",
            &signed["jws-kubeconfig-aaaaaa"],
            "aaaaaa",
            "0123456789abcdef"
        ));
    }
}
