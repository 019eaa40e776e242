//! Admission webhooks: an `AdmissionReview` (admission.k8s.io/v1) POSTed over
//! HTTPS to a URL or to a Service's endpoint, verified with the
//! configuration's `caBundle`; its answer allows, denies, or (mutating) patches.
//!
//! ```text
//!  mutate():   for each mutating webhook (configuration name order) that covers the request
//!                call ─▶ allowed? ─▶ JSONPatch applied ─▶ next; IfNeeded ones run again once if
//!                a later webhook changed the object
//!  validate(): every validating webhook that covers the request; one denial denies
//!  a webhook that cannot be called: failurePolicy Fail ─▶ 500, Ignore ─▶ skipped
//! ```

use super::matching::conditions_hold;
use super::Attributes;
use crate::ApiServer;
use base64::Engine;
use minik8s_api::patch::{apply_patch, PatchType};
use minik8s_api::ApiError;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// HTTPS clients per (caBundle, host, address), so TLS set-up is not redone per request.
#[derive(Default)]
pub struct WebhookClients(Mutex<HashMap<String, reqwest::Client>>);

/// Where to POST and how to verify the server.
struct Target {
    url: String,
    /// A Service's DNS name and the endpoint it stands for.
    resolve: Option<(String, SocketAddr)>,
    ca_bundle: String,
}

/// The webhooks of `configs`, each with its configuration's name, in order.
fn hooks(configs: &[Arc<Value>]) -> Vec<Value> {
    configs
        .iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn review(a: &Attributes, uid: &str, object: Option<&Value>) -> Value {
    let info = a.info;
    let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let gvr = json!({"group": info.group, "version": info.version, "resource": info.plural});
    let options = match a.operation {
        super::Operation::Create => "CreateOptions",
        super::Operation::Update => "UpdateOptions",
        super::Operation::Delete => "DeleteOptions",
    };
    let mut request = json!({"uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": a.name, "operation": a.operation.name(), "userInfo": a.user, "object": object, "oldObject": a.old,
        "dryRun": a.dry_run, "options": {"kind": options, "apiVersion": "meta.k8s.io/v1"}});
    if !a.subresource.is_empty() {
        request["subResource"] = json!(a.subresource);
        request["requestSubResource"] = json!(a.subresource);
    }
    if let Some(ns) = a.namespace.filter(|_| info.namespaced) {
        request["namespace"] = json!(ns);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// Kubernetes' ToStatusErr: a denial as the client sees it.
fn denial(hook: &str, status: &Value) -> ApiError {
    let code = status["code"].as_u64().filter(|c| *c >= 400).unwrap_or(400) as u16;
    let reason = status["reason"].as_str().unwrap_or("");
    let denied_by = format!("admission webhook \"{hook}\" denied the request");
    let message = match status["message"].as_str().filter(|m| !m.is_empty()) {
        Some(m) => format!("{denied_by}: {m}"),
        None if !reason.is_empty() => format!("{denied_by}: {reason}"),
        None => format!("{denied_by} without explanation"),
    };
    ApiError::new(code, reason, message)
}

impl ApiServer {
    /// Where a webhook's clientConfig points.
    async fn target(&self, hook: &Value) -> Result<Target, String> {
        let cc = &hook["clientConfig"];
        let ca_bundle = match cc["caBundle"].as_str() {
            Some(b64) => {
                let pem = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("caBundle is not base64: {e}"))?;
                String::from_utf8_lossy(&pem).into_owned()
            }
            None => String::new(),
        };
        if let Some(url) = cc["url"].as_str() {
            return Ok(Target {
                url: url.to_string(),
                resolve: None,
                ca_bundle,
            });
        }
        let svc = &cc["service"];
        let port = svc["port"].as_i64().unwrap_or(443);
        let path = svc["path"].as_str().unwrap_or("/");
        let (host, addr) = self.service_endpoint(svc).await?;
        Ok(Target {
            url: format!("https://{host}:{port}{path}"),
            resolve: Some((host, addr)),
            ca_bundle,
        })
    }

    fn webhook_client(&self, t: &Target) -> Result<reqwest::Client, String> {
        let key = format!("{}|{:?}", t.ca_bundle, t.resolve);
        let mut clients = self
            .webhook_clients
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let mut b = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
        if !t.ca_bundle.is_empty() {
            // Trusted as Go trusts it (a self-signed CA:TRUE serving
            // certificate in the bundle is accepted).
            let tls = minik8s_pki::trust::client_config(&t.ca_bundle)
                .map_err(|e| format!("caBundle: {e}"))?;
            b = b.use_preconfigured_tls(tls);
        }
        if let Some((host, addr)) = &t.resolve {
            b = b.resolve(host, *addr);
        }
        let client = b.build().map_err(|e| e.to_string())?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// Calls one webhook; Ok(the review's response) or Err(why it could not be called).
    async fn call_webhook(&self, hook: &Value, body: &Value) -> Result<Value, String> {
        let t = self.target(hook).await?;
        let timeout = hook["timeoutSeconds"].as_u64().unwrap_or(10);
        let client = self.webhook_client(&t)?;
        let sep = if t.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}timeout={timeout}s", t.url);
        let resp = client
            .post(&url)
            .timeout(Duration::from_secs(timeout))
            .json(body)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "failed to call webhook: Post \"{url}\": {}",
                    crate::proxy::error_chain(&e)
                )
            })?;
        let status = resp.status();
        let answer: Value = resp
            .json()
            .await
            .map_err(|e| format!("failed to call webhook: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "failed to call webhook: the server answered {status}"
            ));
        }
        let response = answer
            .get("response")
            .cloned()
            .ok_or("received an AdmissionReview without a response")?;
        if response["uid"] != body["request"]["uid"] {
            return Err(format!(
                "expected response.uid={}, got {}",
                body["request"]["uid"], response["uid"]
            ));
        }
        Ok(response)
    }

    /// Runs one webhook if it covers the request: Ok(None) when it did not
    /// apply or was ignored after failing, Ok(Some(response)) when it answered.
    async fn run_webhook(
        &self,
        hook: &Value,
        a: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        let a = &Attributes { object, ..*a };
        if !self.covers(hook, "rules", a).await {
            return Ok(None);
        }
        let name = hook["name"].as_str().unwrap_or("");
        let ignore = hook["failurePolicy"] == "Ignore";
        let null = Value::Null;
        let vars = [
            ("object", object.unwrap_or(&null)),
            ("oldObject", a.old.unwrap_or(&null)),
        ];
        match conditions_hold(&hook["matchConditions"], &vars) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(_) if ignore => return Ok(None),
            Err(e) => {
                return Err(ApiError::internal(format!(
                    "failed calling webhook \"{name}\": {e}"
                )))
            }
        }
        let uid = uuid::Uuid::new_v4().to_string();
        match self.call_webhook(hook, &review(a, &uid, object)).await {
            Ok(response) => Ok(Some(response)),
            Err(e) if ignore => {
                tracing::warn!(webhook = name, error = %e, "webhook failed; ignored (failurePolicy Ignore)");
                Ok(None)
            }
            Err(e) => Err(ApiError::internal(format!(
                "failed calling webhook \"{name}\": {e}"
            ))),
        }
    }
}

/// The mutating webhooks on `obj`; returns it as they left it.
pub async fn mutate(
    srv: &ApiServer,
    a: &Attributes<'_>,
    configs: &[Arc<Value>],
    mut obj: Value,
) -> Result<Value, ApiError> {
    let hooks = hooks(configs);
    // (webhook index, the object as it ran on) for IfNeeded reinvocation.
    let mut reinvoke: Vec<(usize, Value)> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let ran = apply_answer(srv, hook, a, &mut obj).await?;
        if ran && hook["reinvocationPolicy"] == "IfNeeded" {
            reinvoke.push((i, obj.clone()));
        }
    }
    for (i, seen) in reinvoke {
        if seen != obj {
            apply_answer(srv, &hooks[i], a, &mut obj).await?;
        }
    }
    Ok(obj)
}

/// Calls one mutating webhook and applies its answer; true when it ran.
async fn apply_answer(
    srv: &ApiServer,
    hook: &Value,
    a: &Attributes<'_>,
    obj: &mut Value,
) -> Result<bool, ApiError> {
    let name = hook["name"].as_str().unwrap_or("");
    let Some(response) = srv.run_webhook(hook, a, Some(obj)).await? else {
        return Ok(false);
    };
    if response["allowed"] != true {
        return Err(denial(name, &response["status"]));
    }
    if let Some(b64) = response["patch"].as_str() {
        if response["patchType"] != "JSONPatch" {
            return Err(ApiError::internal(format!(
                "failed calling webhook \"{name}\": unsupported patch type {}",
                response["patchType"]
            )));
        }
        let patch: Value = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|raw| serde_json::from_slice(&raw).ok())
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "failed calling webhook \"{name}\": the patch is not base64 JSON"
                ))
            })?;
        *obj = apply_patch(obj, &patch, PatchType::Json, false).map_err(|e| {
            ApiError::internal(format!("failed calling webhook \"{name}\": {}", e.message))
        })?;
    }
    Ok(true)
}

/// The validating webhooks; the first denial denies the request.
pub async fn validate(
    srv: &ApiServer,
    a: &Attributes<'_>,
    configs: &[Arc<Value>],
) -> Result<(), ApiError> {
    for hook in hooks(configs) {
        if let Some(response) = srv.run_webhook(&hook, a, a.object).await? {
            if response["allowed"] != true {
                return Err(denial(
                    hook["name"].as_str().unwrap_or(""),
                    &response["status"],
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_as_kubernetes_words_them() {
        let e = denial(
            "deny.example.com",
            &json!({"message": "pods with deny=yes are refused"}),
        );
        assert_eq!((e.code, e.message.as_str()), (400, "admission webhook \"deny.example.com\" denied the request: pods with deny=yes are refused"));
        let e = denial(
            "deny.example.com",
            &json!({"code": 403, "reason": "Forbidden"}),
        );
        assert_eq!(
            (e.code, e.reason.as_str(), e.message.as_str()),
            (
                403,
                "Forbidden",
                "admission webhook \"deny.example.com\" denied the request: Forbidden"
            )
        );
        let e = denial("deny.example.com", &Value::Null);
        assert_eq!(
            e.message,
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
    }
}
