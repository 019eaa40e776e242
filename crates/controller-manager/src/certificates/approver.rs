//! The CSR approver (Kubernetes' csrapproving controller): approves, without
//! a human, the client certificates nodes ask for, after asking the
//! authorizer (SubjectAccessReview) whether the requester may:
//!
//! - a kubelet's first certificate (`system:node:<name>` in `system:nodes`,
//!   signer kube-apiserver-client-kubelet) asked with a bootstrap token:
//!   `create certificatesigningrequests/nodeclient`;
//! - a kubelet renewing its own: `create certificatesigningrequests/selfnodeclient`;
//! - minik8s only, as k3s gives its agents one: a `system:kube-proxy` client
//!   certificate asked with a bootstrap token, so a joining node's kube-proxy
//!   has an identity too.
//!
//! Anything else waits for `kubectl certificate approve`.

use super::{has_condition, request_pem, CLIENT_SIGNER, KUBELET_CLIENT_SIGNER};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;

/// Which automatic approval a request qualifies for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoApproval {
    /// A node's first certificate, asked with a bootstrap token.
    NodeClient,
    /// A node renewing its own certificate.
    SelfNodeClient,
    /// A joining node's kube-proxy.
    KubeProxy,
}

impl AutoApproval {
    /// The subresource the requester must be allowed to create.
    fn permission(self) -> &'static str {
        match self {
            AutoApproval::NodeClient => "nodeclient",
            AutoApproval::SelfNodeClient => "selfnodeclient",
            AutoApproval::KubeProxy => "nodeclient",
        }
    }
    fn message(self) -> &'static str {
        match self {
            AutoApproval::NodeClient | AutoApproval::SelfNodeClient => {
                "Auto approving kubelet client certificate after SubjectAccessReview."
            }
            AutoApproval::KubeProxy => {
                "Auto approving kube-proxy client certificate for a joining node after SubjectAccessReview."
            }
        }
    }
}

const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

/// The automatic approval `csr` qualifies for (None: a human decides).
pub fn auto_approval(csr: &CertificateSigningRequest) -> Option<AutoApproval> {
    if has_condition(csr, "Approved") || has_condition(csr, "Denied") {
        return None;
    }
    let usages = csr.spec.usages.clone().unwrap_or_default();
    if !usages.iter().any(|u| u == "client auth")
        || usages.iter().any(|u| !CLIENT_USAGES.contains(&u.as_str()))
    {
        return None;
    }
    let (cn, orgs) = minik8s_pki::request_subject(&request_pem(csr)).ok()?;
    let requester = csr.spec.username.as_deref().unwrap_or("");
    let groups = csr.spec.groups.clone().unwrap_or_default();
    match csr.spec.signer_name.as_str() {
        KUBELET_CLIENT_SIGNER => {
            if !cn.starts_with("system:node:")
                || cn.len() == "system:node:".len()
                || orgs != ["system:nodes"]
            {
                return None;
            }
            if requester == cn {
                Some(AutoApproval::SelfNodeClient)
            } else {
                Some(AutoApproval::NodeClient)
            }
        }
        CLIENT_SIGNER
            if cn == "system:kube-proxy"
                && orgs.is_empty()
                && groups.iter().any(|g| g == "system:bootstrappers") =>
        {
            Some(AutoApproval::KubeProxy)
        }
        _ => None,
    }
}

pub struct CsrApprover {
    client: Client,
    requests: Cache<CertificateSigningRequest>,
}

impl CsrApprover {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(CsrApprover {
            client,
            requests: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new()).for_own::<CertificateSigningRequest>(informers)
    }

    /// Asks the authorizer whether the requester may create `sub`.
    async fn requester_may(
        &self,
        csr: &CertificateSigningRequest,
        sub: &str,
    ) -> Result<bool, ClientError> {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": csr.spec.username, "uid": csr.spec.uid, "groups": csr.spec.groups,
                     "extra": csr.spec.extra,
                     "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                            "subresource": sub, "verb": "create"}}});
        let body = serde_json::to_vec(&review).unwrap_or_default();
        let answer = self
            .client
            .request(
                reqwest::Method::POST,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                Some((minik8s_client::rest::content::JSON, body)),
                minik8s_client::rest::content::JSON,
            )
            .await?;
        Ok(answer["status"]["allowed"] == true)
    }
}

impl Reconciler for CsrApprover {
    const NAME: &'static str = "csrapproving";

    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let Some(csr) = self.requests.get(name) else {
            return Ok(Action::Done);
        };
        let Some(kind) = auto_approval(&csr) else {
            return Ok(Action::Done);
        };
        if !self.requester_may(&csr, kind.permission()).await? {
            tracing::info!(csr = name, requester = ?csr.spec.username, "not auto-approved: the requester may not create certificatesigningrequests/{}", kind.permission());
            return Ok(Action::Done);
        }
        let mut approved = serde_json::to_value(csr.as_ref()).unwrap_or_default();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let condition = json!({"type": "Approved", "status": "True", "reason": "AutoApproved",
                               "message": kind.message(), "lastUpdateTime": now, "lastTransitionTime": now});
        let mut conditions = approved["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        conditions.push(condition);
        approved["status"]["conditions"] = json!(conditions);
        let api = self
            .client
            .dynamic(registry::of::<CertificateSigningRequest>(), None);
        match api.replace_sub(name, "approval", &approved).await {
            Ok(_) => {
                tracing::info!(csr = name, ?kind, "approved");
                Ok(Action::Done)
            }
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(Action::Done),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn csr(
        cn: &str,
        orgs: &[&str],
        signer: &str,
        requester: &str,
        groups: &[&str],
    ) -> CertificateSigningRequest {
        let (pem, _) = minik8s_pki::certificate_request(cn, orgs).unwrap();
        serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer, "usages": ["digital signature", "key encipherment", "client auth"],
            "username": requester, "groups": groups}}))
        .unwrap()
    }

    #[test]
    fn nodes_and_joining_kube_proxies_are_approved_nothing_else() {
        let boot = ["system:bootstrappers", "system:authenticated"];
        assert_eq!(
            auto_approval(&csr(
                "system:node:w1",
                &["system:nodes"],
                KUBELET_CLIENT_SIGNER,
                "system:bootstrap:abcdef",
                &boot
            )),
            Some(AutoApproval::NodeClient)
        );
        assert_eq!(
            auto_approval(&csr(
                "system:node:w1",
                &["system:nodes"],
                KUBELET_CLIENT_SIGNER,
                "system:node:w1",
                &["system:nodes"]
            )),
            Some(AutoApproval::SelfNodeClient)
        );
        assert_eq!(
            auto_approval(&csr(
                "system:kube-proxy",
                &[],
                CLIENT_SIGNER,
                "system:bootstrap:abcdef",
                &boot
            )),
            Some(AutoApproval::KubeProxy)
        );
        // Not a node's name, the wrong group, another signer, a user's request.
        assert_eq!(
            auto_approval(&csr(
                "alice",
                &["system:nodes"],
                KUBELET_CLIENT_SIGNER,
                "system:bootstrap:a",
                &boot
            )),
            None
        );
        assert_eq!(
            auto_approval(&csr(
                "system:node:w1",
                &["system:masters"],
                KUBELET_CLIENT_SIGNER,
                "x",
                &boot
            )),
            None
        );
        assert_eq!(
            auto_approval(&csr(
                "system:kube-proxy",
                &["system:masters"],
                CLIENT_SIGNER,
                "x",
                &boot
            )),
            None
        );
        assert_eq!(
            auto_approval(&csr(
                "system:kube-proxy",
                &[],
                CLIENT_SIGNER,
                "alice",
                &["students"]
            )),
            None
        );
        assert_eq!(
            auto_approval(&csr("bob", &[], CLIENT_SIGNER, "alice", &["students"])),
            None
        );
    }
}
