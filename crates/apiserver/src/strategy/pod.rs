//! Pod: server-set fields on create (default tolerations, the LWS pod
//! admission, phase Pending and the QoS class) and graceful deletion (a
//! running pod is marked and its kubelet confirms once its containers stopped).

use super::Context;
use minik8s_validation::FieldError;
use serde_json::{json, Value};

pub struct Lifecycle;

impl super::Strategy for Lifecycle {
    fn prepare_for_create(&self, ctx: &Context, pod: &mut Value) -> Result<(), FieldError> {
        add_default_tolerations(pod, ctx.default_toleration_seconds);
        default_service_account(pod);
        // Built-in admission of LeaderWorkerSet pods (upstream's pod webhook).
        minik8s_validation::lws_pod::admit_pod(pod)?;
        pod["status"] = json!({"phase": "Pending", "qosClass": minik8s_api::resources::qos_class(&pod["spec"])});
        // A gated pod says why it waits (Kubernetes' applySchedulingGatedCondition).
        let gated = pod
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        if gated {
            pod["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": null, "lastTransitionTime": minik8s_api::meta::now_rfc3339()}]);
        }
        Ok(())
    }

    /// The ServiceAccount and Priority admissions, which read other objects.
    /// ServiceAccount: a pod
    /// without `imagePullSecrets` gets the account's, and (with a token
    /// signer, the secure port on) its token volume unless the pod or,
    /// when the pod does not say, the account sets
    /// `automountServiceAccountToken: false`. Priority: see `priority.rs`.
    fn admit_create<'a>(
        &'a self,
        ctx: &'a Context<'a>,
        pod: &'a mut Value,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let account = pod
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str);
            let sa = match (account, minik8s_api::meta::namespace(pod)) {
                (Some(account), Some(ns)) => {
                    let info =
                        minik8s_api::registry::of::<k8s_openapi::api::core::v1::ServiceAccount>();
                    // A store error is not the pod's: it is admitted as if
                    // the account said nothing.
                    match ctx.store.get(&info.key(Some(ns), account)).await {
                        Ok(Some(kv)) => serde_json::from_slice::<Value>(&kv.value).ok(),
                        _ => None,
                    }
                }
                _ => None,
            };
            let sa = sa.unwrap_or(Value::Null);
            let has_own = pod
                .pointer("/spec/imagePullSecrets")
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty());
            let secrets = sa
                .get("imagePullSecrets")
                .filter(|l| l.as_array().is_some_and(|l| !l.is_empty()));
            if let (false, Some(secrets)) = (has_own, secrets) {
                pod["spec"]["imagePullSecrets"] = secrets.clone();
            }
            if ctx.signs_tokens {
                let automount = sa
                    .get("automountServiceAccountToken")
                    .and_then(Value::as_bool);
                crate::auth::serviceaccount::add_token_volume(pod, automount);
            }
            super::runtime_class::admit_pod(ctx, pod).await?;
            super::priority::admit_pod(ctx, pod).await
        })
    }

    /// Fields the kubelet does not honour yet: said, not silently ignored.
    fn warnings(&self, pod: &Value) -> Vec<String> {
        minik8s_api::pod_fields::not_honoured(pod.get("spec").unwrap_or(&Value::Null), "spec")
    }

    /// None when the pod is deleted at once: unbound, finished, or a grace
    /// period of 0.
    fn grace_period(&self, pod: &Value, requested: Option<i64>) -> Option<i64> {
        let bound = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !bound || phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let grace = requested
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30);
        (grace > 0).then_some(grace)
    }
}

/// Kubernetes' DefaultTolerationSeconds admission: pods tolerate a not-ready or
/// unreachable node for `seconds` (300 by default) before eviction unless they
/// say otherwise.
fn add_default_tolerations(pod: &mut Value, (not_ready, unreachable): (i64, i64)) {
    let spec = &mut pod["spec"];
    if !spec.get("tolerations").is_some_and(Value::is_array) {
        spec["tolerations"] = json!([]);
    }
    let tolerations = spec["tolerations"].as_array_mut().expect("array");
    for (key, seconds) in [
        ("node.kubernetes.io/not-ready", not_ready),
        ("node.kubernetes.io/unreachable", unreachable),
    ] {
        let present = tolerations.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str);
            let effect = t.get("effect").and_then(Value::as_str);
            (k == Some(key)
                || (k.is_none() && t.get("operator").and_then(Value::as_str) == Some("Exists")))
                && effect.is_none_or(|e| e == "NoExecute")
        });
        if !present {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}));
        }
    }
}

/// The ServiceAccount admission's default: a pod without one runs as its
/// namespace's `default` account (and `serviceAccount`, the deprecated
/// alias, says the same). Tokens come with the security work.
fn default_service_account(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let named = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .or_else(|| {
            spec.get("serviceAccount")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
        })
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(named));
    spec.insert("serviceAccount".into(), json!(named));
}
