//! Container environment: literal values, `$(VAR)` references to earlier
//! variables, and the downward API (`fieldRef`), as Kubernetes expands them.

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

/// `NAME=value` pairs: literal values, `$(VAR)` references to earlier ones, and the downward API.
pub fn environment(pod: &Pod, c: &Container, pod_ip: &str, host_ip: &str) -> Vec<String> {
    let mut resolved: Vec<(String, String)> = Vec::new();
    for e in c.env.iter().flatten() {
        let value = match (
            &e.value,
            e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()),
        ) {
            (Some(v), _) => expand(v, &resolved),
            (None, Some(fr)) => field_value(pod, &fr.field_path, pod_ip, host_ip),
            _ => String::new(),
        };
        resolved.push((e.name.clone(), value));
    }
    resolved
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
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
            environment(&pod, c, "10.244.0.5", "192.168.1.2"),
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
}
