//! ServiceAccount tokens: the TokenRequest API (`serviceaccounts/token`),
//! the authenticator for the JWTs it issues, and the admission step that
//! gives every pod the projected `kube-api-access-*` volume (as Kubernetes'
//! ServiceAccount admission plugin does).
//!
//! ```text
//!  kubelet ─POST serviceaccounts/default/token {audiences, expirationSeconds, boundObjectRef: pod}─▶
//!     JWT {iss, aud, exp, sub: system:serviceaccount:ns:default, kubernetes.io: {pod, serviceaccount}}
//!  pod ─Authorization: Bearer <JWT>─▶ authenticate: signature, issuer, audience, expiry,
//!     the ServiceAccount (and the bound pod) still exist with the same uid
//!     ─▶ user system:serviceaccount:ns:name in system:serviceaccounts, system:serviceaccounts:ns
//! ```

use super::UserInfo;
use crate::ApiServer;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::Resource as _;
use minik8s_api::{meta, registry, ApiError};
use minik8s_validation::FieldError;
use serde_json::{json, Value};

/// The issuer (and default audience) of the cluster's tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Where pods find their token, CA and namespace.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token lifetime the pod volume asks for (Kubernetes' 3607 s).
const VOLUME_TOKEN_SECONDS: i64 = 3607;

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Whether what a token names was deleted more than the token leeway ago.
/// A pod that is terminating keeps its token (a preStop hook may call the
/// API), as Kubernetes' validator does.
fn deleted_long_ago(obj: &Value, now: i64) -> bool {
    let leeway = minik8s_pki::tokens::LEEWAY_SECONDS as i64;
    obj.pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t.timestamp() < now - leeway)
}

impl ApiServer {
    /// `POST .../serviceaccounts/{name}/token`: a TokenRequest answered with a token.
    pub async fn token_request(
        &self,
        ns: &str,
        name: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        let Some(signer) = self.sa_signer.get() else {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server has no service-account signing key (the secure port is off)",
            ));
        };
        let (sa, _) = self
            .read(registry::of::<ServiceAccount>(), Some(ns), name)
            .await?;
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let mut expiration = spec["expirationSeconds"].as_i64().unwrap_or(3600);
        if expiration < 600 {
            let info = registry::of::<ServiceAccount>();
            return Err(ApiError::invalid(
                info,
                name,
                &[FieldError::invalid(
                    "spec.expirationSeconds",
                    &json!(expiration),
                    "may not specify a duration less than 10 minutes",
                )],
            ));
        }
        if let Some(max) = self.auth.max_token_seconds {
            expiration = expiration.min(max);
        }
        let audiences: Vec<String> = serde_json::from_value(spec["audiences"].clone())
            .ok()
            .filter(|a: &Vec<String>| !a.is_empty())
            .unwrap_or_else(|| vec![ISSUER.to_string()]);
        let iat = now();
        let mut private =
            json!({"namespace": ns, "serviceaccount": {"name": name, "uid": meta::uid(&sa)}});
        let bound = spec.get("boundObjectRef").filter(|b| b.is_object());
        if let Some(b) = bound {
            let kind = b["kind"].as_str().unwrap_or("");
            let bname = b["name"].as_str().unwrap_or("");
            if kind != Pod::KIND {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to a {kind}: only Pod is supported"
                )));
            }
            let (pod, _) = self.read(registry::of::<Pod>(), Some(ns), bname).await?;
            if b["uid"]
                .as_str()
                .is_some_and(|u| !u.is_empty() && u != meta::uid(&pod))
            {
                return Err(ApiError::conflict(
                    registry::of::<Pod>(),
                    bname,
                    "the bound object's uid does not match",
                ));
            }
            private["pod"] = json!({"name": bname, "uid": meta::uid(&pod)});
            if let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
                private["node"] = json!({"name": node});
            }
        }
        let claims = json!({"iss": ISSUER, "aud": audiences, "iat": iat, "nbf": iat, "exp": iat + expiration,
            "jti": uuid::Uuid::new_v4().to_string(),
            "sub": format!("system:serviceaccount:{ns}:{name}"), "kubernetes.io": private});
        let token = signer
            .sign(&claims)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let expires = chrono::DateTime::from_timestamp(iat + expiration, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default();
        let mut out_spec = spec.clone();
        out_spec["audiences"] = json!(audiences);
        out_spec["expirationSeconds"] = json!(expiration);
        Ok(
            json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                  "metadata": {"name": name, "namespace": ns, "creationTimestamp": Value::Null},
                  "spec": out_spec, "status": {"token": token, "expirationTimestamp": expires}}),
        )
    }

    /// The ServiceAccount a token names, if it is one of ours, current, for
    /// this apiserver, and what it is bound to still exists.
    pub(crate) async fn service_account_user(&self, token: &str) -> Option<UserInfo> {
        // Signature, issuer, audience and times: the signer's checks.
        let claims = self.sa_signer.get()?.verify(token, ISSUER, ISSUER)?;
        let now = now();
        let private = &claims["kubernetes.io"];
        let ns = private["namespace"].as_str()?;
        let name = private["serviceaccount"]["name"].as_str()?;
        let (sa, _) = self
            .read(registry::of::<ServiceAccount>(), Some(ns), name)
            .await
            .ok()?;
        if meta::uid(&sa) != private["serviceaccount"]["uid"].as_str()?
            || deleted_long_ago(&sa, now)
        {
            return None;
        }
        let mut extra = std::collections::BTreeMap::new();
        if let Some(pod) = private.get("pod") {
            let pname = pod["name"].as_str()?;
            let (p, _) = self
                .read(registry::of::<Pod>(), Some(ns), pname)
                .await
                .ok()?;
            if meta::uid(&p) != pod["uid"].as_str()? || deleted_long_ago(&p, now) {
                return None;
            }
            extra.insert(
                "authentication.kubernetes.io/pod-name".to_string(),
                vec![pname.to_string()],
            );
            extra.insert(
                "authentication.kubernetes.io/pod-uid".to_string(),
                vec![meta::uid(&p).to_string()],
            );
        }
        if let Some(node) = private["node"]["name"].as_str() {
            extra.insert(
                "authentication.kubernetes.io/node-name".to_string(),
                vec![node.to_string()],
            );
        }
        if let Some(jti) = claims["jti"].as_str() {
            extra.insert(
                "authentication.kubernetes.io/credential-id".to_string(),
                vec![format!("JTI={jti}")],
            );
        }
        Some(UserInfo {
            username: format!("system:serviceaccount:{ns}:{name}"),
            uid: meta::uid(&sa).to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ],
            extra,
        })
    }
}

/// ServiceAccount admission: the pod gets a projected volume with a token,
/// the cluster CA and its namespace, mounted in every container, unless it
/// says `automountServiceAccountToken: false` (or, when it says nothing, its
/// account does: `account_automount`) or mounts that path itself.
pub fn add_token_volume(pod: &mut Value, account_automount: Option<bool>) {
    let automount = pod
        .pointer("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or(account_automount)
        .unwrap_or(true);
    if !automount {
        return;
    }
    let containers = ["containers", "initContainers"];
    let mounts_it_already = containers.iter().any(|list| {
        pod["spec"][list].as_array().into_iter().flatten().any(|c| {
            c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["mountPath"] == MOUNT_PATH)
        })
    });
    if mounts_it_already {
        return;
    }
    let suffix: String = uuid::Uuid::new_v4().simple().to_string()[..5].to_string();
    let name = format!("kube-api-access-{suffix}");
    let volume = json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": VOLUME_TOKEN_SECONDS, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}});
    match pod["spec"]["volumes"].as_array_mut() {
        Some(v) => v.push(volume),
        None => pod["spec"]["volumes"] = json!([volume]),
    }
    for list in containers {
        for c in pod["spec"][list].as_array_mut().into_iter().flatten() {
            let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
            match c["volumeMounts"].as_array_mut() {
                Some(m) => m.push(mount),
                None => c["volumeMounts"] = json!([mount]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_outlives_what_it_names_by_the_leeway_only() {
        let at = |t: i64| {
            let ts = chrono::DateTime::from_timestamp(t, 0).unwrap().to_rfc3339();
            json!({"metadata": {"deletionTimestamp": ts}})
        };
        let now = 2_000_000_000;
        assert!(!deleted_long_ago(&json!({"metadata": {}}), now));
        assert!(
            !deleted_long_ago(&at(now + 30), now),
            "terminating gracefully"
        );
        assert!(!deleted_long_ago(&at(now - 59), now));
        assert!(deleted_long_ago(&at(now - 61), now));
    }

    #[test]
    fn pods_get_the_token_volume_unless_they_opt_out() {
        let mut pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}]}});
        add_token_volume(&mut pod, None);
        let v = &pod["spec"]["volumes"][0];
        assert!(v["name"].as_str().unwrap().starts_with("kube-api-access-"));
        assert_eq!(
            v["projected"]["sources"][0]["serviceAccountToken"]["path"],
            "token"
        );
        for c in pod["spec"]["containers"].as_array().unwrap() {
            let m = c["volumeMounts"].as_array().unwrap().last().unwrap();
            assert_eq!(m["mountPath"], MOUNT_PATH);
            assert_eq!(m["readOnly"], true);
        }
        let mut opted_out =
            json!({"spec": {"automountServiceAccountToken": false, "containers": [{"name": "a"}]}});
        add_token_volume(&mut opted_out, Some(true));
        assert!(opted_out["spec"].get("volumes").is_none());
        // The account's choice holds when the pod says nothing; the pod's wins.
        let mut quiet = json!({"spec": {"containers": [{"name": "a"}]}});
        add_token_volume(&mut quiet, Some(false));
        assert!(quiet["spec"].get("volumes").is_none());
        let mut insists =
            json!({"spec": {"automountServiceAccountToken": true, "containers": [{"name": "a"}]}});
        add_token_volume(&mut insists, Some(false));
        assert!(insists["spec"]["volumes"].is_array());
    }
}
