//! Container environment: literal values, `$(VAR)` references to earlier
//! variables, the downward API (`fieldRef`), and ConfigMap and Secret keys
//! (`configMapKeyRef`, `secretKeyRef`, `envFrom`), as Kubernetes expands them.

use crate::config_data::{Kind, PodConfig};
use k8s_openapi::api::core::v1::{Container, Pod};

/// The value of a downward-API field path.
fn field_value(pod: &Pod, path: &str, pod_ip: &str, host_ip: &str) -> String {
    let map_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    let entry = |map: &Option<std::collections::BTreeMap<String, String>>, k: &str| {
        map.as_ref()
            .and_then(|l| l.get(k))
            .cloned()
            .unwrap_or_default()
    };
    if let Some(k) = map_key("metadata.labels['") {
        return entry(&pod.metadata.labels, &k);
    }
    if let Some(k) = map_key("metadata.annotations['") {
        return entry(&pod.metadata.annotations, &k);
    }
    let spec = pod.spec.as_ref();
    match path {
        "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
        "metadata.uid" => pod.metadata.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        _ => String::new(),
    }
}

/// Kubernetes' rule for names taken from `envFrom` keys (others are skipped).
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// Sets `name`, replacing an earlier value (`env` overrides `envFrom`).
fn set(vars: &mut Vec<(String, String)>, name: &str, value: String) {
    match vars.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = value,
        None => vars.push((name.to_string(), value)),
    }
}

/// `NAME=value` pairs: `envFrom` first (ConfigMaps and Secrets, with their
/// prefix), then `env`: literal values, `$(VAR)` references to earlier ones,
/// the downward API, and ConfigMap and Secret keys. Err is the message of
/// the CreateContainerConfigError a missing required reference causes.
pub fn environment(
    pod: &Pod,
    c: &Container,
    pod_ip: &str,
    host_ip: &str,
    cfg: &PodConfig,
) -> Result<Vec<String>, String> {
    let mut resolved: Vec<(String, String)> = cfg.service_env.clone();
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let source = match (&from.config_map_ref, &from.secret_ref) {
            (Some(r), _) => cfg.get(Kind::ConfigMap, &r.name, r.optional.unwrap_or(false))?,
            (None, Some(r)) => cfg.get(Kind::Secret, &r.name, r.optional.unwrap_or(false))?,
            (None, None) => None,
        };
        for (k, v) in source.into_iter().flatten() {
            let name = format!("{prefix}{k}");
            if is_env_name(&name) {
                set(
                    &mut resolved,
                    &name,
                    String::from_utf8_lossy(v).into_owned(),
                );
            }
        }
    }
    for e in c.env.iter().flatten() {
        let from = e.value_from.as_ref();
        let value = if let Some(v) = &e.value {
            expand(v, &resolved)
        } else if let Some(fr) = from.and_then(|f| f.field_ref.as_ref()) {
            field_value(pod, &fr.field_path, pod_ip, host_ip)
        } else if let Some(r) = from.and_then(|f| f.resource_field_ref.as_ref()) {
            let container = r.container_name.as_deref().filter(|n| !n.is_empty());
            cfg.resources.value(
                container.unwrap_or(&c.name),
                &r.resource,
                r.divisor.as_ref(),
            )?
        } else if let Some(r) = from.and_then(|f| f.config_map_key_ref.as_ref()) {
            match cfg.key(
                Kind::ConfigMap,
                &r.name,
                &r.key,
                r.optional.unwrap_or(false),
            )? {
                Some(v) => String::from_utf8_lossy(&v).into_owned(),
                None => continue,
            }
        } else if let Some(r) = from.and_then(|f| f.secret_key_ref.as_ref()) {
            match cfg.key(Kind::Secret, &r.name, &r.key, r.optional.unwrap_or(false))? {
                Some(v) => String::from_utf8_lossy(&v).into_owned(),
                None => continue,
            }
        } else {
            String::new()
        };
        set(&mut resolved, &e.name, value);
    }
    Ok(resolved
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect())
}

/// A container's `command` or `args` with `$(VAR)` expanded against its
/// environment (`NAME=value` pairs), as Kubernetes expands them.
pub fn expand_list(list: &Option<Vec<String>>, env: &[String]) -> Option<Vec<String>> {
    let vars: Vec<(String, String)> = env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    list.as_ref()
        .map(|l| l.iter().map(|s| expand(s, &vars)).collect())
}

/// One string (`subPathExpr`) with `$(VAR)` expanded against the
/// container's environment (`NAME=value` pairs).
pub fn expand_with(s: &str, env: &[String]) -> String {
    let vars: Vec<(String, String)> = env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    expand(s, &vars)
}

/// Kubernetes' `$(VAR)` expansion against variables defined earlier (`$$` escapes).
fn expand(s: &str, vars: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(inner) = after
            .strip_prefix('(')
            .and_then(|a| a.find(')').map(|end| (&a[..end], &a[end + 1..])))
        {
            match vars.iter().rev().find(|(k, _)| k == inner.0) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(inner.0);
                    out.push(')');
                }
            }
            rest = inner.1;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_values_references_and_downward_api() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "$(A)-2 $$(A) $(NOPE)"},
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}))
        .unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            environment(&pod, c, "10.244.0.5", "192.168.1.2", &PodConfig::default()).unwrap(),
            vec![
                "A=1",
                "B=1-2 $(A) $(NOPE)",
                "NAME=p",
                "NS=ns",
                "IP=10.244.0.5",
                "APP=x",
                "NODE=n1"
            ]
        );
    }

    #[test]
    fn config_maps_and_secrets_feed_env_and_env_from() {
        use crate::config_data::Data;
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "envFrom": [{"configMapRef": {"name": "app"}, "prefix": "APP_"}, {"secretRef": {"name": "creds"}}],
                "env": [{"name": "APP_MODE", "value": "override"},
                        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                        {"name": "MAYBE", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "nope", "optional": true}}}]}]}}))
        .unwrap();
        let data = |kv: &[(&str, &str)]| -> Option<Data> {
            Some(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect(),
            )
        };
        let mut cfg = PodConfig {
            namespace: "ns".into(),
            ..Default::default()
        };
        cfg.objects.insert(
            (Kind::ConfigMap, "app".into()),
            data(&[("MODE", "prod"), ("bad key", "x")]),
        );
        cfg.objects.insert(
            (Kind::Secret, "creds".into()),
            data(&[("password", "s3cret")]),
        );
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            environment(&pod, c, "", "", &cfg).unwrap(),
            ["APP_MODE=override", "password=s3cret", "PW=s3cret"]
        );
        cfg.objects.insert((Kind::Secret, "creds".into()), None);
        assert_eq!(
            environment(&pod, c, "", "", &cfg),
            Err("secret \"creds\" not found".to_string())
        );
    }
}
