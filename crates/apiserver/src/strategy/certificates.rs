//! CertificateSigningRequests (certificates.k8s.io/v1): a request must carry
//! a PEM certificate request, a signer and usages; its spec never changes
//! after creation. Who asked is recorded from the request's user, whatever
//! the body says; approval and signing are controllers'.

use super::Strategy;
use base64::Engine;
use minik8s_validation::{Errors, FieldError, NameRule};
use serde_json::{json, Value};

pub struct Lifecycle;

/// The PEM certificate request in `spec.request` (base64 in JSON).
pub fn request_pem(csr: &Value) -> Option<String> {
    let b = csr.pointer("/spec/request")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    String::from_utf8(bytes).ok()
}

impl Strategy for Lifecycle {
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    fn record_creator(&self, user: &crate::auth::UserInfo, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("username".into(), json!(user.username));
            spec.insert("uid".into(), json!(user.uid));
            spec.insert("groups".into(), json!(user.groups));
            if user.extra.is_empty() {
                spec.remove("extra");
            } else {
                spec.insert("extra".into(), json!(user.extra));
            }
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        let mut errs = Vec::new();
        if let Some(old) = old {
            if old.get("spec") != obj.get("spec") {
                errs.push(FieldError::invalid(
                    "spec",
                    &json!("..."),
                    "field is immutable",
                ));
            }
            return errs;
        }
        match request_pem(obj) {
            None => errs.push(FieldError::required("spec.request", "")),
            Some(pem) => {
                if let Err(e) = minik8s_pki::request_subject(&pem) {
                    errs.push(FieldError::invalid(
                        "spec.request",
                        &json!("<certificate request>"),
                        format!("PEM block type must be CERTIFICATE REQUEST ({e})"),
                    ));
                }
            }
        }
        let signer = obj
            .pointer("/spec/signerName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if signer.is_empty() {
            errs.push(FieldError::required("spec.signerName", ""));
        } else if !signer.contains('/') {
            errs.push(FieldError::invalid(
                "spec.signerName",
                &json!(signer),
                "must be a fully qualified domain and path of the form 'example.com/signer-name'",
            ));
        }
        if obj
            .pointer("/spec/usages")
            .and_then(Value::as_array)
            .is_none_or(|u| u.is_empty())
        {
            errs.push(FieldError::required("spec.usages", ""));
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::UserInfo;

    #[test]
    fn the_requester_is_who_creates_not_what_the_body_claims() {
        let mut csr = json!({"spec": {"request": "x", "username": "system:admin",
            "groups": ["system:masters"], "extra": {"k": ["v"]}}});
        let user = UserInfo {
            username: "system:bootstrap:abcdef".into(),
            uid: String::new(),
            groups: vec!["system:bootstrappers".into()],
            extra: Default::default(),
        };
        Lifecycle.record_creator(&user, &mut csr);
        assert_eq!(csr["spec"]["username"], "system:bootstrap:abcdef");
        assert_eq!(csr["spec"]["groups"], json!(["system:bootstrappers"]));
        assert!(csr["spec"].get("extra").is_none(), "{csr}");
        assert_eq!(csr["spec"]["request"], "x");
    }
}
