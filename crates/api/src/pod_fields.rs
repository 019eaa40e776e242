//! Pod fields the minik8s kubelet does not honour yet. Refusing them would
//! break manifests and charts that set them in passing, so the pod is
//! accepted, and the user is told: a `Warning` header on the create (kubectl
//! prints it) and a Warning event from the kubelet when it starts the pod.
//! Never silently ignored. A field leaves this list when it is implemented.

use serde_json::Value;

fn truthy(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

fn non_empty(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    }
}

/// `<path>: <what happens instead>` for each field of a pod spec (at
/// `path`, `spec` for a pod) the kubelet does not honour.
pub fn not_honoured(spec: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |field: String, what: &str| {
        out.push(format!("{field}: not honoured by minik8s yet ({what})"))
    };
    let flags = [
        ("hostNetwork", "the pod gets its own network namespace"),
        ("hostPID", "the pod gets its own process namespace"),
        ("hostIPC", "the pod gets its own IPC namespace"),
        (
            "shareProcessNamespace",
            "each container has its own process namespace",
        ),
        ("setHostnameAsFQDN", "the hostname stays the short name"),
    ];
    for (field, what) in flags {
        if truthy(spec.get(field)) {
            note(format!("{path}.{field}"), what);
        }
    }
    let lists = [("hostAliases", "/etc/hosts is Docker's")];
    for (field, what) in lists {
        if non_empty(spec.get(field)) {
            note(format!("{path}.{field}"), what);
        }
    }
    if non_empty(spec.pointer("/securityContext/sysctls")) {
        note(
            format!("{path}.securityContext.sysctls"),
            "the node's values apply",
        );
    }
    let profiles = |sc: Option<&Value>, at: &str, note: &mut dyn FnMut(String, &str)| {
        for profile in ["seccompProfile", "appArmorProfile"] {
            let ty = sc
                .and_then(|s| s.pointer(&format!("/{profile}/type")))
                .and_then(Value::as_str);
            if matches!(ty, Some("Unconfined" | "Localhost")) {
                note(
                    format!("{at}.{profile}"),
                    "the runtime's default profile applies",
                );
            }
        }
    };
    profiles(
        spec.get("securityContext"),
        &format!("{path}.securityContext"),
        &mut note,
    );
    for (i, v) in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let items = v.pointer("/downwardAPI/items").and_then(Value::as_array);
        if items
            .into_iter()
            .flatten()
            .any(|item| item.get("resourceFieldRef").is_some())
        {
            note(
                format!("{path}.volumes[{i}].downwardAPI"),
                "resourceFieldRef items are not written",
            );
        }
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
            profiles(
                c.get("securityContext"),
                &format!("{at}.securityContext"),
                &mut note,
            );
            let mounts = c.get("volumeMounts").and_then(Value::as_array);
            if mounts
                .into_iter()
                .flatten()
                .any(|m| m.get("subPathExpr").is_some())
            {
                note(
                    format!("{at}.volumeMounts"),
                    "subPathExpr mounts the whole volume",
                );
            }
            let env = c.get("env").and_then(Value::as_array);
            if env
                .into_iter()
                .flatten()
                .any(|e| e.pointer("/valueFrom/resourceFieldRef").is_some())
            {
                note(
                    format!("{at}.env"),
                    "resourceFieldRef variables are left unset",
                );
            }
            for kind in ["requests", "limits"] {
                if c.pointer(&format!("/resources/{kind}/ephemeral-storage"))
                    .is_some()
                {
                    note(
                        format!("{at}.resources.{kind}[ephemeral-storage]"),
                        "local storage is not limited",
                    );
                }
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
            "hostNetwork": true, "hostPID": false,
            "volumes": [{"name": "m", "emptyDir": {"medium": "Memory"}}, {"name": "d", "emptyDir": {}},
                        {"name": "e", "downwardAPI": {"items": [{"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}}]}}],
            "containers": [{"name": "c", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                            "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]});
        let notes = not_honoured(&spec, "spec");
        let fields: Vec<&str> = notes.iter().map(|n| n.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.hostNetwork",
                "spec.volumes[2].downwardAPI",
                "spec.containers[0].resources.limits[ephemeral-storage]",
            ]
        );
        assert!(not_honoured(&json!({"containers": [{"name": "c"}]}), "spec").is_empty());
    }
}
