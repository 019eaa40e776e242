//! The little of the OpenAPI schema that field ownership needs: how each list
//! merges (`x-kubernetes-list-type` and `-list-map-keys`) and which maps are
//! atomic (`x-kubernetes-map-type: atomic`). A path is the field names from
//! the object's root, list items left out (`spec.template.spec.containers.ports`).

pub(super) enum ListShape {
    /// `listType: map`: items are told apart by these key fields.
    Keyed(&'static [&'static str]),
    /// `listType: set`: scalar items, each owned on its own.
    Set,
    /// `listType: atomic`: the list is one value.
    Atomic,
}

pub(super) fn list_shape(path: &[String]) -> ListShape {
    let Some(field) = path.last() else {
        return ListShape::Atomic;
    };
    let keys: &'static [&'static str] = match field.as_str() {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => &["name"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        // A Service's ports are keyed by port and protocol, a container's by
        // containerPort and protocol.
        "ports" if path.len() == 2 && path[0] == "spec" => &["port", "protocol"],
        "ports"
            if path
                .iter()
                .any(|p| p == "containers" || p == "initContainers") =>
        {
            &["containerPort", "protocol"]
        }
        "ownerReferences" => &["uid"],
        "conditions" => &["type"],
        "taints" => &["key", "effect"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "finalizers" => return ListShape::Set,
        _ => return ListShape::Atomic,
    };
    ListShape::Keyed(keys)
}

/// The value a missing key field has (the schema's default), if it has one.
pub(super) fn key_default(key: &str) -> Option<&'static str> {
    match key {
        "protocol" => Some("TCP"),
        _ => None,
    }
}

/// Label selectors (and a Service's selector) are atomic: one owner sets the
/// whole selector.
pub(super) fn atomic_map(path: &[String]) -> bool {
    matches!(
        path.last().map(String::as_str),
        Some("selector" | "labelSelector" | "namespaceSelector")
    )
}

/// Whether a map an update creates is itself owned (FieldsV1's `.`), as for
/// maps and optional structs (`labels`, `rollingUpdate`), but not for the
/// structs every object of its kind has (`spec`, `template`, `metadata`).
pub(super) fn map_has_own_member(path: &[String]) -> bool {
    !matches!(
        path.last().map(String::as_str),
        Some("metadata" | "spec" | "template" | "strategy" | "status")
    )
}
