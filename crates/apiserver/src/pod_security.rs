//! Pod Security admission: each namespace's `pod-security.kubernetes.io/`
//! labels choose a level (privileged, baseline, restricted) to `enforce`
//! (refuse the pod, 403), to `warn` (a `Warning:` header kubectl prints) and
//! to `audit` (a log line). Pods are checked when created and when their
//! spec changes; the pod templates of workloads (Deployments, Jobs…) are
//! only warned about, as Kubernetes does, since their pods are checked when
//! made. The checks themselves are `minik8s_validation::podsecurity`.

use crate::ApiServer;
use k8s_openapi::api::core::v1::Namespace;
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::{meta, ApiError};
use minik8s_validation::podsecurity::{self, Level};
use minik8s_validation::PodSpecAt;
use serde_json::Value;

const PREFIX: &str = "pod-security.kubernetes.io/";

/// A mode's level and version from the namespace's labels (privileged when unset).
fn mode(labels: &Value, which: &str) -> (Level, String) {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let level = label(&format!("{PREFIX}{which}"))
        .and_then(Level::parse)
        .unwrap_or(Level::Privileged);
    let version = label(&format!("{PREFIX}{which}-version"))
        .unwrap_or("latest")
        .to_string();
    (level, version)
}

/// The pod spec a write carries (a pod's own, or a workload's template, as
/// its kind's strategy says) and whether the object is a pod.
fn pod_spec<'a>(
    strategy: &dyn crate::strategy::Strategy,
    obj: &'a Value,
) -> Option<(&'a Value, bool)> {
    let at = strategy.pod_spec_at()?;
    at.find(obj).map(|spec| (spec, at == PodSpecAt::Pod))
}

impl ApiServer {
    /// Pod Security admission of a write of `obj` (`old` on update) into
    /// namespace `ns`: Err(403) when the enforce level refuses a pod; the
    /// warn level's findings go to `warnings`.
    pub(crate) async fn pod_security(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        obj: &Value,
        old: Option<&Value>,
        warnings: &crate::rest::Warnings,
    ) -> Result<(), ApiError> {
        let strategy = self.strategy(info);
        let (Some(ns), Some((spec, is_pod))) = (ns, pod_spec(&*strategy, obj)) else {
            return Ok(());
        };
        // Only changes to what is checked are checked again.
        if old
            .and_then(|o| pod_spec(&*strategy, o))
            .is_some_and(|(s, _)| s == spec)
        {
            return Ok(());
        }
        // The namespaces cache has the labels; a namespace it has not seen yet
        // is read from the store.
        let namespace = match self.namespaces.labels(ns) {
            Some(labels) => labels,
            None => match self.read(registry::of::<Namespace>(), None, ns).await {
                Ok((obj, _)) => std::sync::Arc::new(
                    obj.pointer("/metadata/labels")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
                Err(_) => return Ok(()),
            },
        };
        let (enforce, enforce_version) = mode(&namespace, "enforce");
        if is_pod && enforce != Level::Privileged {
            let v = podsecurity::check(enforce, spec);
            if !v.is_empty() {
                return Err(ApiError::forbidden(
                    info,
                    meta::name(obj),
                    &podsecurity::message(enforce, &enforce_version, &v),
                ));
            }
        }
        // Workloads are warned about at the enforce level too (their pods
        // would be refused), and everything at the warn level.
        let (warn, warn_version) = mode(&namespace, "warn");
        let mut levels = vec![(warn, warn_version)];
        if !is_pod {
            levels.push((enforce, enforce_version));
        }
        levels.sort_by_key(|l| std::cmp::Reverse(l.0));
        if let Some((level, version)) = levels.into_iter().find(|(l, _)| *l != Level::Privileged) {
            let v = podsecurity::check(level, spec);
            if !v.is_empty() {
                let text = podsecurity::message(level, &version, &v);
                warnings.push(format!("would {}", text.replacen("violates", "violate", 1)));
            }
        }
        let (audit, audit_version) = mode(&namespace, "audit");
        if audit != Level::Privileged {
            let v = podsecurity::check(audit, spec);
            if !v.is_empty() {
                tracing::info!(namespace = ns, kind = %info.kind, name = meta::name(obj),
                               audit = %podsecurity::message(audit, &audit_version, &v), "pod security audit");
            }
        }
        Ok(())
    }
}
