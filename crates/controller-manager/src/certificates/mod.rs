//! CertificateSigningRequests: the approver (`approver.rs`) approves the
//! requests nodes make for their client certificates, the signer
//! (`signer.rs`) signs approved ones with the cluster CA, and the bootstrap
//! signer (`bootstrapsigner.rs`) lets a joining node check the cluster's CA
//! with nothing but its join token.
//!
//! ```text
//!  kubelet (bootstrap token) ─create CSR─▶ apiserver (spec.username = requester)
//!      approver: node client cert? requester may create …/nodeclient? ─▶ Approved
//!      signer:   Approved, no certificate ─▶ CA signs ─▶ status.certificate
//!  kubelet ◀── status.certificate ── writes its kubeconfig, system:node:<name>
//! ```

pub mod approver;
pub mod bootstrapsigner;
pub mod signer;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// Whether the request has a condition of `kind` ("Approved", "Denied", "Failed").
pub fn has_condition(csr: &CertificateSigningRequest, kind: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status != "False"))
}

/// Whether the request was already signed.
pub fn is_issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// The PEM certificate request.
pub fn request_pem(csr: &CertificateSigningRequest) -> String {
    String::from_utf8_lossy(&csr.spec.request.0).into_owned()
}
