//! The cluster's certificates: one CA, certificates it issues, kubeconfigs
//! that carry them. Used by the apiserver (its serving certificate, reading
//! client certificates), the master (the components' identities), the
//! certificate signer (CSRs of joining kubelets) and `add-user`.
//!
//! ```text
//!  <pki-dir>/ca.crt, ca.key            the cluster CA (rcgen, ECDSA P-256, 10 years)
//!            apiserver.crt/.key        serving: localhost, 127.0.0.1, the host's names and
//!                                      addresses, kubernetes.default.svc…, the Service IP
//!            apiserver-kubelet-client  the apiserver's identity towards kubelets
//!            admin.conf, scheduler.conf, controller-manager.conf, kube-proxy.conf
//!                                      kubeconfigs with a client certificate each
//! ```
//!
//! A client certificate's CN is the user name and its O values are the
//! groups, as Kubernetes reads them.

#[cfg(feature = "serve")]
pub mod connections;
mod jwt_crypto;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "serve")]
pub mod trust;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("{0}")]
    Invalid(String),
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

/// A PEM certificate and its PEM private key.
#[derive(Debug, Clone)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The cluster CA.
pub struct Ca {
    pub cert_pem: String,
    key: KeyPair,
    /// The CA as an issuer (its parameters re-signed with its own key: the
    /// same name and key, which is all an issuer needs).
    issuer: rcgen::Certificate,
}

fn name(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    dn.push(DnType::CommonName, cn);
    dn
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = OffsetDateTime::now_utc();
    // A little back-dating absorbs clock skew between lab VMs.
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(days);
}

fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|e| PkiError::Io(path.into(), e))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| PkiError::Io(path.into(), e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| PkiError::Io(path.into(), e))
}

impl Ca {
    /// A new CA named `cn`, valid ten years.
    pub fn generate(cn: &str) -> Result<Ca, PkiError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(cn, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        validity(&mut params, 3650);
        let key = KeyPair::generate()?;
        let issuer = params.self_signed(&key)?;
        Ok(Ca {
            cert_pem: issuer.pem(),
            key,
            issuer,
        })
    }

    /// The CA from its PEM certificate and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, PkiError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = CertificateParams::from_ca_cert_pem(cert_pem)?.self_signed(&key)?;
        Ok(Ca {
            cert_pem: cert_pem.to_string(),
            key,
            issuer,
        })
    }

    /// The CA kept in `dir` (`ca.crt`, `ca.key`).
    pub fn load(dir: &Path) -> Result<Ca, PkiError> {
        Ca::from_pem(&read(&dir.join("ca.crt"))?, &read(&dir.join("ca.key"))?)
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// `message` signed with the CA's key (ECDSA P-256, SHA-256, the DER
    /// signature `openssl dgst -sha256 -verify` checks against the CA
    /// certificate's public key): how the master vouches for the node bundle
    /// it serves, so a worker that trusts the CA can check what it installs.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, PkiError> {
        use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &self.key.serialize_der(),
            &rng,
        )
        .map_err(|e| PkiError::Invalid(format!("the CA key is not an ECDSA P-256 key: {e}")))?;
        key.sign(&rng, message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|e| PkiError::Invalid(format!("signing with the CA key: {e}")))
    }

    /// Whether `signature` is [`Ca::sign`]'s of `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_ASN1};
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, self.key.public_key_raw())
            .verify(message, signature)
            .is_ok()
    }

    /// A certificate for `cn` in groups `orgs`, valid for the names and
    /// addresses in `sans` (servers), for `days`.
    pub fn issue(
        &self,
        cn: &str,
        orgs: &[&str],
        sans: &[String],
        usage: Usage,
        days: i64,
    ) -> Result<CertKey, PkiError> {
        let mut params = CertificateParams::new(sans.to_vec())?;
        params.distinguished_name = name(cn, orgs);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        validity(&mut params, days);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer, &self.key)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Signs a PEM certificate request (the CSR API's signer): the subject
    /// is the request's, the usage and lifetime are the signer's.
    pub fn sign_request(&self, csr_pem: &str, usage: Usage, days: i64) -> Result<String, PkiError> {
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
        csr.params.is_ca = IsCa::NoCa;
        csr.params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        csr.params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        validity(&mut csr.params, days);
        Ok(csr.signed_by(&self.issuer, &self.key)?.pem())
    }
}

/// A new key and a PEM certificate request for `cn` in `orgs` (what a
/// joining kubelet sends): (request PEM, key PEM).
pub fn certificate_request(cn: &str, orgs: &[&str]) -> Result<(String, String), PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(cn, orgs);
    let key = KeyPair::generate()?;
    let csr = params.serialize_request(&key)?;
    Ok((csr.pem()?, key.serialize_pem()))
}

/// The subject of a certificate request: (CN, O values).
pub fn request_subject(csr_pem: &str) -> Result<(String, Vec<String>), PkiError> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
    let dn = &csr.params.distinguished_name;
    let cn = dn.get(&DnType::CommonName).map(dn_text).unwrap_or_default();
    let orgs = dn
        .iter()
        .filter(|(t, _)| **t == DnType::OrganizationName)
        .map(|(_, v)| dn_text(v))
        .collect();
    Ok((cn, orgs))
}

fn dn_text(v: &rcgen::DnValue) -> String {
    match v {
        rcgen::DnValue::Utf8String(s) => s.clone(),
        rcgen::DnValue::PrintableString(s) => s.as_str().to_string(),
        rcgen::DnValue::Ia5String(s) => s.as_str().to_string(),
        rcgen::DnValue::TeletexString(s) => s.as_str().to_string(),
        other => format!("{other:?}"),
    }
}

/// The user a DER client certificate names: (CN, O values).
pub fn certificate_subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())?
        .to_string();
    let orgs = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_string)
        .collect();
    Some((cn, orgs))
}

/// A kubeconfig with everything embedded: one cluster, one user (client
/// certificate), one context, current.
pub fn kubeconfig(cluster: &str, server: &str, ca_pem: &str, user: &str, cert: &CertKey) -> String {
    let credentials = serde_json::json!({"client-certificate-data": b64(&cert.cert_pem),
                                         "client-key-data": b64(&cert.key_pem)});
    kubeconfig_for(cluster, server, ca_pem, user, credentials)
}

/// A kubeconfig that authenticates with a bearer token.
pub fn token_kubeconfig(
    cluster: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    token: &str,
) -> String {
    kubeconfig_for(
        cluster,
        server,
        ca_pem,
        user,
        serde_json::json!({"token": token}),
    )
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// One cluster (its CA embedded), one user with `credentials`, one current context.
fn kubeconfig_for(
    cluster: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    credentials: serde_json::Value,
) -> String {
    let context = format!("{user}@{cluster}");
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    });
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// The components of the control plane that get a kubeconfig: (file, user, groups).
pub const COMPONENT_IDENTITIES: &[(&str, &str, &[&str])] = &[
    ("admin.conf", "kubernetes-admin", &["system:masters"]),
    ("scheduler.conf", "system:kube-scheduler", &[]),
    (
        "controller-manager.conf",
        "system:kube-controller-manager",
        &[],
    ),
    ("kube-proxy.conf", "system:kube-proxy", &[]),
];

/// The cluster's PKI directory, created on first use.
pub struct ClusterPki {
    pub dir: PathBuf,
    pub ca: Ca,
}

impl ClusterPki {
    /// Loads the PKI in `dir`, or creates it: the CA, the apiserver's serving
    /// certificate for `sans`, its kubelet client certificate, and the
    /// components' kubeconfigs pointing at `server`. The serving certificate
    /// is issued again whenever `sans` names something it lacks.
    pub fn ensure(dir: &Path, sans: &[String], server: &str) -> Result<ClusterPki, PkiError> {
        std::fs::create_dir_all(dir).map_err(|e| PkiError::Io(dir.into(), e))?;
        let ca = if dir.join("ca.crt").exists() {
            Ca::load(dir)?
        } else {
            let ca = Ca::generate("minik8s-ca")?;
            write(&dir.join("ca.key"), &ca.key_pem(), true)?;
            write(&dir.join("ca.crt"), &ca.cert_pem, false)?;
            ca
        };
        let pki = ClusterPki {
            dir: dir.into(),
            ca,
        };
        let serving = dir.join("apiserver.crt");
        let current = std::fs::read_to_string(&serving).ok();
        if current.as_deref().is_none_or(|pem| !covers(pem, sans)) {
            let c = pki
                .ca
                .issue("kube-apiserver", &[], sans, Usage::Server, 3650)?;
            write(&dir.join("apiserver.key"), &c.key_pem, true)?;
            write(&serving, &c.cert_pem, false)?;
        }
        if !dir.join("apiserver-kubelet-client.crt").exists() {
            let c = pki.ca.issue(
                "kube-apiserver-kubelet-client",
                &["system:masters"],
                &[],
                Usage::Client,
                3650,
            )?;
            write(&dir.join("apiserver-kubelet-client.key"), &c.key_pem, true)?;
            write(
                &dir.join("apiserver-kubelet-client.crt"),
                &c.cert_pem,
                false,
            )?;
        }
        for (file, user, groups) in COMPONENT_IDENTITIES {
            let path = dir.join(file);
            if !path.exists() {
                let c = pki.ca.issue(user, groups, &[], Usage::Client, 3650)?;
                write(
                    &path,
                    &kubeconfig("minik8s", server, &pki.ca.cert_pem, user, &c),
                    true,
                )?;
            }
        }
        Ok(pki)
    }

    /// The serving certificate and key (PEM).
    pub fn serving(&self) -> Result<CertKey, PkiError> {
        Ok(CertKey {
            cert_pem: read(&self.dir.join("apiserver.crt"))?,
            key_pem: read(&self.dir.join("apiserver.key"))?,
        })
    }

    /// The apiserver's client certificate towards kubelets.
    pub fn kubelet_client(&self) -> Result<CertKey, PkiError> {
        Ok(CertKey {
            cert_pem: read(&self.dir.join("apiserver-kubelet-client.crt"))?,
            key_pem: read(&self.dir.join("apiserver-kubelet-client.key"))?,
        })
    }

    /// Writes a kubeconfig for a new user (CN `user`, O `groups`) to `path`.
    pub fn write_user_kubeconfig(
        &self,
        path: &Path,
        server: &str,
        user: &str,
        groups: &[&str],
        days: i64,
    ) -> Result<(), PkiError> {
        let c = self.ca.issue(user, groups, &[], Usage::Client, days)?;
        write(
            path,
            &kubeconfig("minik8s", server, &self.ca.cert_pem, user, &c),
            true,
        )
    }
}

/// Whether a PEM certificate's subjectAltNames include every one of `sans`.
fn covers(cert_pem: &str, sans: &[String]) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) else {
        return false;
    };
    let Ok(cert) = pem.parse_x509() else {
        return false;
    };
    let have: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                        4 => Some(std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()),
                        16 => <[u8; 16]>::try_from(*b)
                            .ok()
                            .map(|a| std::net::Ipv6Addr::from(a).to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    sans.iter().all(|s| have.contains(s))
}

/// Detached JWS signatures (HS256) of `cluster-info` by bootstrap tokens,
/// as Kubernetes' bootstrap signer writes them: a node that knows a token
/// can check that the kubeconfig (and the CA in it) came from the cluster.
/// The signature is jsonwebtoken's (over [`jwt_crypto`]); the header names
/// the token, as go-jose writes it.
pub mod jws {
    use base64::Engine;
    use jsonwebtoken::{crypto, Algorithm, DecodingKey, EncodingKey};

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    fn header(id: &str) -> String {
        b64(format!("{{\"alg\":\"HS256\",\"kid\":\"{id}\"}}").as_bytes())
    }

    /// `<header>..<signature>` of `content` by token `id.secret`.
    pub fn sign(content: &str, id: &str, secret: &str) -> Result<String, super::PkiError> {
        super::jwt_crypto::install();
        let header = header(id);
        let signing_input = format!("{header}.{}", b64(content.as_bytes()));
        let sig = EncodingKey::from_secret(secret.as_bytes())
            .and_then(|key| crypto::sign(signing_input.as_bytes(), &key, Algorithm::HS256))
            .map_err(|e| super::PkiError::Invalid(format!("signing with token {id}: {e}")))?;
        Ok(format!("{header}..{sig}"))
    }

    /// Whether `detached` is token `id.secret`'s signature of `content`.
    pub fn verify(content: &str, detached: &str, id: &str, secret: &str) -> bool {
        super::jwt_crypto::install();
        let Some((header, sig)) = detached.split_once("..") else {
            return false;
        };
        // The header must name the token that signed.
        let named = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header)
            .is_ok_and(|h| String::from_utf8_lossy(&h).contains(&format!("\"kid\":\"{id}\"")));
        if !named || sig.is_empty() {
            return false;
        }
        let signing_input = format!("{header}.{}", b64(content.as_bytes()));
        DecodingKey::from_secret(secret.as_bytes())
            .and_then(|key| crypto::verify(sig, signing_input.as_bytes(), &key, Algorithm::HS256))
            .unwrap_or(false)
    }
}

/// Reads a PEM file's certificates as DER (for trust stores).
pub fn pem_certificates(pem: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .map(|p| p.contents)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_name_user_and_groups() {
        let ca = Ca::generate("test-ca").unwrap();
        let c = ca
            .issue("alice", &["students"], &[], Usage::Client, 1)
            .unwrap();
        let der = pem_certificates(&c.cert_pem);
        assert_eq!(der.len(), 1);
        let (cn, orgs) = certificate_subject(&der[0]).unwrap();
        assert_eq!(cn, "alice");
        assert_eq!(orgs, vec!["students"]);
        // A CA loaded back issues certificates too.
        let again = Ca::from_pem(&ca.cert_pem, &ca.key_pem()).unwrap();
        again.issue("bob", &[], &[], Usage::Client, 1).unwrap();
    }

    #[test]
    fn requests_are_signed_with_their_subject() {
        let ca = Ca::generate("test-ca").unwrap();
        let (csr, _key) = certificate_request("system:node:w1", &["system:nodes"]).unwrap();
        assert_eq!(
            request_subject(&csr).unwrap(),
            (
                "system:node:w1".to_string(),
                vec!["system:nodes".to_string()]
            )
        );
        let cert = ca.sign_request(&csr, Usage::Client, 1).unwrap();
        let (cn, orgs) = certificate_subject(&pem_certificates(&cert)[0]).unwrap();
        assert_eq!(
            (cn.as_str(), orgs),
            ("system:node:w1", vec!["system:nodes".to_string()])
        );
    }

    #[test]
    fn jws_signatures_check_out_only_with_the_token() {
        let sig = jws::sign("kubeconfig text", "abcdef", "0123456789abcdef").unwrap();
        // The JWS detached form: HS256 over `<header>.<payload>`, as go-jose
        // (Kubernetes' bootstrap signer) writes it, checked with ring here.
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let header = b64(br#"{"alg":"HS256","kid":"abcdef"}"#);
        let input = format!("{header}.{}", b64(b"kubeconfig text"));
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
        let expected = b64(ring::hmac::sign(&key, input.as_bytes()).as_ref());
        assert_eq!(sig, format!("{header}..{expected}"));
        assert!(jws::verify(
            "kubeconfig text",
            &sig,
            "abcdef",
            "0123456789abcdef"
        ));
        assert!(!jws::verify(
            "kubeconfig text!",
            &sig,
            "abcdef",
            "0123456789abcdef"
        ));
        assert!(!jws::verify(
            "kubeconfig text",
            &sig,
            "abcdef",
            "0000000000000000"
        ));
        assert!(!jws::verify(
            "kubeconfig text",
            &sig,
            "other0",
            "0123456789abcdef"
        ));
        assert!(!jws::verify(
            "kubeconfig text",
            &format!("{header}.."),
            "abcdef",
            "0123456789abcdef"
        ));
        assert!(
            jws::sign("x", "abcdef", "").is_err(),
            "an empty secret signs nothing"
        );
    }

    #[test]
    fn cluster_pki_is_created_once_and_reissued_for_new_names() {
        let dir = tempfile::tempdir().unwrap();
        let sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let pki = ClusterPki::ensure(dir.path(), &sans, "https://127.0.0.1:6443").unwrap();
        let first = pki.serving().unwrap().cert_pem;
        assert!(covers(&first, &sans));
        let ca = pki.ca.cert_pem.clone();
        let again = ClusterPki::ensure(dir.path(), &sans, "https://127.0.0.1:6443").unwrap();
        assert_eq!(again.ca.cert_pem, ca);
        assert_eq!(again.serving().unwrap().cert_pem, first);
        let more = vec!["localhost".to_string(), "10.96.0.1".to_string()];
        let third = ClusterPki::ensure(dir.path(), &more, "https://127.0.0.1:6443").unwrap();
        assert!(covers(&third.serving().unwrap().cert_pem, &more));
        assert!(dir.path().join("admin.conf").exists());
    }
}

/// ServiceAccount tokens: JWTs (ES256) signed by the cluster's
/// service-account key (`<pki-dir>/sa.key`), as kube-apiserver's
/// `--service-account-signing-key-file` signs them. jsonwebtoken encodes and
/// validates them (signature, `exp` and `nbf` with Kubernetes' one-minute
/// leeway, issuer, audience); [`super::jwt_crypto`] does the ECDSA.
pub mod tokens {
    use base64::Engine;
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
    use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
    use serde_json::Value;
    use std::path::Path;

    /// Clock skew allowed on a token's times, and after a deletion of what
    /// it names (go-jose's default, which Kubernetes' token validator uses).
    pub const LEEWAY_SECONDS: u64 = 60;

    pub struct Signer {
        encoding: EncodingKey,
        decoding: DecodingKey,
        /// The key id in every token's header: a hash of the public key.
        pub kid: String,
    }

    impl Signer {
        /// The key in `dir/sa.key`, made on first use.
        pub fn load_or_create(dir: &Path) -> Result<Signer, super::PkiError> {
            let path = dir.join("sa.key");
            let pem = match std::fs::read_to_string(&path) {
                Ok(p) => p,
                Err(_) => {
                    let key = rcgen::KeyPair::generate()?;
                    let pem = key.serialize_pem();
                    super::write(&path, &pem, true)?;
                    pem
                }
            };
            Signer::from_pem(&pem)
        }

        pub fn from_pem(pem: &str) -> Result<Signer, super::PkiError> {
            let der = rcgen::KeyPair::from_pem(pem)?.serialize_der();
            // ring checks that it is a P-256 key and gives its public point.
            let rng = ring::rand::SystemRandom::new();
            let key =
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                    .map_err(|e| super::PkiError::Invalid(format!("service-account key: {e}")))?;
            let public = key.public_key().as_ref();
            let digest = ring::digest::digest(&ring::digest::SHA256, public);
            Ok(Signer {
                kid: base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(&digest.as_ref()[..16]),
                encoding: EncodingKey::from_ec_der(&der),
                decoding: DecodingKey::from_ec_der(public),
            })
        }

        /// A signed token carrying `claims`: the header `{"alg":"ES256","kid":…}`
        /// as Kubernetes writes it.
        pub fn sign(&self, claims: &Value) -> Result<String, super::PkiError> {
            super::jwt_crypto::install();
            let mut header = Header::new(Algorithm::ES256);
            header.typ = None;
            header.kid = Some(self.kid.clone());
            jsonwebtoken::encode(&header, claims, &self.encoding)
                .map_err(|e| super::PkiError::Invalid(format!("signing a token: {e}")))
        }

        /// The claims of a token this key signed for `audience`, issued by
        /// `issuer`, not expired, already valid and issued by now (each time
        /// within the leeway, and a number: a time of another type is
        /// refused, never read as absent); the caller checks what the claims
        /// bind the token to.
        pub fn verify(&self, token: &str, issuer: &str, audience: &str) -> Option<Value> {
            super::jwt_crypto::install();
            let mut rules = Validation::new(Algorithm::ES256);
            rules.leeway = LEEWAY_SECONDS;
            rules.validate_nbf = true;
            rules.set_issuer(&[issuer]);
            rules.set_audience(&[audience]);
            rules.set_required_spec_claims(&["exp", "iss", "aud"]);
            let claims = jsonwebtoken::decode::<Value>(token, &self.decoding, &rules)
                .ok()?
                .claims;
            // jsonwebtoken checks `exp` and `nbf`; `iat` is ours to check.
            let latest = (jsonwebtoken::get_current_timestamp() + LEEWAY_SECONDS) as i64;
            let issued = match claims.get("iat") {
                None => true,
                Some(iat) => iat.as_i64().is_some_and(|iat| iat <= latest),
            };
            issued.then_some(claims)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn tokens_verify_only_unchanged_current_and_with_the_key() {
            const ISS: &str = "https://kubernetes.default.svc.cluster.local";
            let dir = tempfile::tempdir().unwrap();
            let signer = Signer::load_or_create(dir.path()).unwrap();
            let now = jsonwebtoken::get_current_timestamp() as i64;
            let claims = serde_json::json!({"iss": ISS, "aud": [ISS], "sub": "system:serviceaccount:default:default",
                "iat": now, "nbf": now, "exp": now + 3600});
            let token = signer.sign(&claims).unwrap();
            assert_eq!(signer.verify(&token, ISS, ISS), Some(claims.clone()));
            // Kubernetes' header: the algorithm and the key id, nothing else.
            let header = jsonwebtoken::decode_header(&token).unwrap();
            assert_eq!(
                (header.alg, header.kid.as_deref(), header.typ),
                (Algorithm::ES256, Some(signer.kid.as_str()), None)
            );
            let again = Signer::load_or_create(dir.path()).unwrap();
            assert!(again.verify(&token, ISS, ISS).is_some(), "the key is kept");
            let mut forged = token.clone();
            forged.replace_range(token.len() - 3.., "AAA");
            assert!(signer.verify(&forged, ISS, ISS).is_none());
            let other = Signer::load_or_create(tempfile::tempdir().unwrap().path()).unwrap();
            assert!(other.verify(&token, ISS, ISS).is_none());
            // Another audience or issuer, expired, not yet valid.
            assert!(signer.verify(&token, ISS, "vault").is_none());
            assert!(signer.verify(&token, "https://elsewhere", ISS).is_none());
            let with = |patch: Value| {
                let mut c = claims.clone();
                c.as_object_mut()
                    .unwrap()
                    .extend(patch.as_object().unwrap().clone());
                signer.sign(&c).unwrap()
            };
            let accepts = |patch: Value| signer.verify(&with(patch), ISS, ISS).is_some();
            assert!(!accepts(serde_json::json!({"exp": now - 61})), "expired");
            assert!(accepts(serde_json::json!({"exp": now - 30})), "leeway");
            assert!(
                !accepts(serde_json::json!({"nbf": now + 120})),
                "not yet valid"
            );
            assert!(
                !accepts(serde_json::json!({"iat": now + 120})),
                "issued in the future"
            );
            assert!(accepts(serde_json::json!({"iat": now + 30})), "leeway");
            // A time claim of another type is refused, not read as absent
            // (CVE-2026-25537 in jsonwebtoken before 10.3).
            for bad in [
                serde_json::json!({"nbf": (now + 99999).to_string()}),
                serde_json::json!({"exp": (now + 3600).to_string()}),
                serde_json::json!({"iat": (now - 10).to_string()}),
                serde_json::json!({"iat": null}),
            ] {
                assert!(!accepts(bad.clone()), "{bad}");
            }
            // The algorithm is ours, not the token's: HS256 over the public
            // key, or no signature at all, is refused.
            let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
            let body = token.split('.').nth(1).unwrap();
            let none = format!("{}.{body}.", b64(br#"{"alg":"none"}"#));
            assert!(signer.verify(&none, ISS, ISS).is_none());
            let hs_input = format!("{}.{body}", b64(br#"{"alg":"HS256"}"#));
            let public = signer.decoding.try_get_as_bytes().unwrap();
            let tag = ring::hmac::sign(
                &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public),
                hs_input.as_bytes(),
            );
            let confused = format!("{hs_input}.{}", b64(tag.as_ref()));
            assert!(signer.verify(&confused, ISS, ISS).is_none());
        }
    }
}
