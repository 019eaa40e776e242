//! The CSR signer (Kubernetes' csrsigning controller): signs approved
//! requests for the client signers with the cluster CA
//! (`--cluster-signing-dir`), for `spec.expirationSeconds` or one year.

use super::{has_condition, is_issued, request_pem, CLIENT_SIGNER, KUBELET_CLIENT_SIGNER};
use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;

/// Whether the signer should sign `csr` now.
pub fn should_sign(csr: &CertificateSigningRequest) -> bool {
    matches!(
        csr.spec.signer_name.as_str(),
        KUBELET_CLIENT_SIGNER | CLIENT_SIGNER
    ) && has_condition(csr, "Approved")
        && !has_condition(csr, "Denied")
        && !has_condition(csr, "Failed")
        && !is_issued(csr)
}

/// How long the certificate lives, in days (at least one).
pub fn lifetime_days(csr: &CertificateSigningRequest) -> i64 {
    csr.spec
        .expiration_seconds
        .map(|s| (i64::from(s) / 86_400).max(1))
        .unwrap_or(365)
}

pub struct CsrSigner {
    client: Client,
    requests: Cache<CertificateSigningRequest>,
    ca: minik8s_pki::Ca,
}

impl CsrSigner {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        ca: minik8s_pki::Ca,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(CsrSigner {
            client,
            requests: informers.cache(),
            ca,
        });
        Controller::new(ctl, WorkQueue::new()).for_own::<CertificateSigningRequest>(informers)
    }
}

impl Reconciler for CsrSigner {
    const NAME: &'static str = "csrsigning";

    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let Some(csr) = self.requests.get(name) else {
            return Ok(Action::Done);
        };
        if !should_sign(&csr) {
            return Ok(Action::Done);
        }
        let mut out = serde_json::to_value(csr.as_ref()).unwrap_or_default();
        match self.ca.sign_request(
            &request_pem(&csr),
            minik8s_pki::Usage::Client,
            lifetime_days(&csr),
        ) {
            Ok(cert) => {
                out["status"]["certificate"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(cert));
            }
            Err(e) => {
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let mut conditions = out["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                conditions.push(json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                                       "message": e.to_string(), "lastUpdateTime": now, "lastTransitionTime": now}));
                out["status"]["conditions"] = json!(conditions);
            }
        }
        let api = self
            .client
            .dynamic(registry::of::<CertificateSigningRequest>(), None);
        match api.replace_sub(name, "status", &out).await {
            Ok(_) => {
                tracing::info!(csr = name, signer = csr.spec.signer_name, "signed");
                Ok(Action::Done)
            }
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(Action::Done),
            Err(e) => Err(e),
        }
    }
}
