//! Pod fields the minik8s kubelet does not honour yet. Refusing them would
//! break manifests and charts that set them in passing, so the pod is
//! accepted, and the user is told: a `Warning` header on the create (kubectl
//! prints it) and a Warning event from the kubelet when it starts the pod.
//! Never silently ignored. A field leaves this list when it is implemented.

use serde_json::Value;

/// `<path>: <what happens instead>` for each field of a pod spec (at
/// `path`, `spec` for a pod) the kubelet does not honour.
pub fn not_honoured(spec: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |field: String, what: &str| {
        out.push(format!("{field}: not honoured by minik8s yet ({what})"))
    };
    if spec.get("hostUsers") == Some(&Value::Bool(false)) {
        note(
            format!("{path}.hostUsers"),
            "the pod runs in the node's user namespace",
        );
    }
    if spec.pointer("/securityContext/supplementalGroupsPolicy") == Some(&Value::from("Strict")) {
        note(
            format!("{path}.securityContext.supplementalGroupsPolicy"),
            "the image's groups of the user are added too (Merge)",
        );
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{path}.{list}[{i}]");
            if c.pointer("/securityContext/procMount") == Some(&Value::from("Unmasked")) {
                note(
                    format!("{at}.securityContext.procMount"),
                    "/proc stays masked as Docker masks it",
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_field_the_kubelet_ignores_is_named() {
        let spec = json!({
            "hostNetwork": true, "hostPID": false, "hostUsers": false, "schedulingGates": [],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
            "volumes": [{"name": "m", "emptyDir": {"medium": "Memory"}}, {"name": "d", "emptyDir": {}},
                        {"name": "e", "downwardAPI": {"items": [{"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}}]}}],
            "securityContext": {"seccompProfile": {"type": "Unconfined"},
                                "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
            "containers": [{"name": "c", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "procMount": "Unmasked"},
                            "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]});
        let notes = not_honoured(&spec, "spec");
        let fields: Vec<&str> = notes.iter().map(|n| n.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.hostUsers",
                "spec.containers[0].securityContext.procMount",
            ]
        );
        assert!(not_honoured(&json!({"containers": [{"name": "c"}]}), "spec").is_empty());
    }
}
