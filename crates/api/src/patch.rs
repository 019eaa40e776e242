//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
//! Kubernetes' strategic merge patch for the list merge keys of the kinds we serve.

use crate::ApiError;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    /// Server-side apply; treated as a merge of the full manifest.
    Apply,
}

impl PatchType {
    /// The patch type named by a request's `Content-Type`.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// The most operations one JSON patch may carry (Kubernetes' limit; more is 413).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Applies `patch` of type `kind` to `original`. `strategic_ok` is false for kinds
/// without strategic-merge metadata (custom resources), which fall back to merge patch.
///
/// Errors are Kubernetes' answers: a patch that is not one is 400; a JSON
/// patch that does not apply (a failed `test`, a path that is not there) is
/// 422, as the apiserver's patcher answers it (clients such as kopf rely on
/// the code to tell a lost race from a broken request).
pub fn apply_patch(
    original: &Value,
    patch: &Value,
    kind: PatchType,
    strategic_ok: bool,
) -> Result<Value, ApiError> {
    match kind {
        PatchType::Merge | PatchType::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            let mut out = original.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            if ops.0.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(ApiError::new(
                    413,
                    "RequestEntityTooLarge",
                    format!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                        ops.0.len()
                    ),
                ));
            }
            let mut out = original.clone();
            // Applied to a copy that a failure throws away, so without the
            // crate's undo (which can panic on some patches of "/": found by
            // tests/properties.rs). Kubernetes' answer names no operation:
            // the generic 422 message.
            let invalid = || {
                ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
            };
            for op in &ops.0 {
                match op {
                    // Go's json-patch reads a missing member as null, so
                    // `test` with null is how clients say "not set yet"
                    // (kube-runtime adds its first finalizer this way).
                    json_patch::PatchOperation::Test(t) if t.value.is_null() => {
                        if !missing_or_null(&out, t.path.as_str()) {
                            return Err(invalid());
                        }
                    }
                    op => json_patch::patch_unsafe(&mut out, std::slice::from_ref(op))
                        .map_err(|_| invalid())?,
                }
            }
            Ok(out)
        }
        PatchType::Strategic if !strategic_ok => {
            apply_patch(original, patch, PatchType::Merge, false)
        }
        PatchType::Strategic => {
            let patch = patch.as_object().ok_or_else(|| {
                ApiError::bad_request("strategic merge patch must be a JSON object")
            })?;
            let original = original.as_object().cloned().unwrap_or_default();
            match merge_map(original, patch, &mut Vec::new()).map_err(ApiError::bad_request)? {
                Some(m) => Ok(Value::Object(m)),
                None => Ok(Value::Object(Map::new())),
            }
        }
    }
}

/// True when `pointer` names a null value, or a member missing from an
/// object that exists (what Go's json-patch `test` compares as null).
fn missing_or_null(doc: &Value, pointer: &str) -> bool {
    if let Some(v) = doc.pointer(pointer) {
        return v.is_null();
    }
    match pointer.rsplit_once('/') {
        Some((parent, _)) => doc.pointer(parent).is_some_and(Value::is_object),
        None => false,
    }
}

/// The merge key of the list at `path` (field names from the root), if it merges by key.
fn merge_key(path: &[String]) -> Option<&'static str> {
    let field = path.last()?.as_str();
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        // Service spec.ports merge on `port`; container ports on `containerPort`.
        "ports" if path.len() == 2 && path[0] == "spec" => "port",
        "ports" => "containerPort",
        "ownerReferences" => "uid",
        "conditions" | "addresses" => "type",
        "taints" => "key",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars that merge as sets rather than being replaced.
fn is_set_list(path: &[String]) -> bool {
    matches!(path.last().map(String::as_str), Some("finalizers"))
}

/// Merges `patch` into `original`; `None` means the map itself is deleted (`$patch: delete`).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = patch.clone();
            m.remove("$patch");
            return Ok(Some(strip_directives(m)));
        }
        Some("delete") => return Ok(None),
        Some(other) => return Err(format!("unknown patch type: {other}")),
        None => {}
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        original.retain(|k, _| keep.contains(&k.as_str()) || patch.contains_key(k));
    }
    let mut orders: Vec<(String, &Vec<Value>)> = Vec::new();
    for (key, pv) in patch {
        if key == "$retainKeys" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            if let Some(list) = pv.as_array() {
                orders.push((field.to_string(), list));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (original.get_mut(field), pv.as_array())
            {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        match pv {
            Value::Null => {
                original.remove(key);
            }
            Value::Object(pm) => {
                let base = match original.remove(key) {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                if let Some(merged) = merge_map(base, pm, path)? {
                    original.insert(key.clone(), Value::Object(merged));
                }
            }
            Value::Array(pl) => {
                let base = match original.remove(key) {
                    Some(Value::Array(l)) => l,
                    _ => Vec::new(),
                };
                let merged = merge_list(base, pl, path)?;
                original.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                original.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    for (field, order) in orders {
        path.push(field.clone());
        if let Some(Value::Array(list)) = original.get_mut(&field) {
            apply_order(list, order, merge_key(path));
        }
        path.pop();
    }
    Ok(Some(original))
}

fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    path: &mut Vec<String>,
) -> Result<Vec<Value>, String> {
    // `{"$patch": "replace"}` as an element replaces the whole list with the other elements.
    if patch
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(patch
            .iter()
            .filter(|e| e.get("$patch").is_none())
            .cloned()
            .map(|e| match e {
                Value::Object(m) => Value::Object(strip_directives(m)),
                v => v,
            })
            .collect());
    }
    if is_set_list(path) {
        let mut out = original;
        for v in patch {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        return Ok(out);
    }
    let Some(key) = merge_key(path) else {
        return Ok(patch
            .iter()
            .cloned()
            .map(|e| match e {
                Value::Object(m) => Value::Object(strip_directives(m)),
                v => v,
            })
            .collect());
    };
    let mut out = original;
    for pe in patch {
        let Some(pm) = pe.as_object() else {
            return Err(format!(
                "element of list {} must be an object with merge key {key}",
                path.join(".")
            ));
        };
        let id = pm.get(key).cloned().unwrap_or(Value::Null);
        let pos = out.iter().position(|e| e.get(key) == Some(&id));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            out.retain(|e| e.get(key) != Some(&id));
            continue;
        }
        match pos {
            Some(i) => {
                let base = out[i].as_object().cloned().unwrap_or_default();
                match merge_map(base, pm, path)? {
                    Some(m) => out[i] = Value::Object(m),
                    None => {
                        out.remove(i);
                    }
                }
            }
            None => out.push(Value::Object(strip_directives(pm.clone()))),
        }
    }
    Ok(out)
}

/// Reorders `list` to follow `order` (by merge key, or by value for scalar lists);
/// elements the order does not mention keep their relative place at the end.
fn apply_order(list: &mut [Value], order: &[Value], key: Option<&str>) {
    let id = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let rank = |v: &Value| -> usize {
        let i = id(v);
        order
            .iter()
            .position(|o| match key {
                Some(k) => o.get(k) == Some(&i),
                None => *o == i,
            })
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(rank);
}

fn strip_directives(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        match v {
            Value::Object(inner) => *inner = strip_directives(std::mem::take(inner)),
            Value::Array(items) => {
                for it in items.iter_mut() {
                    if let Value::Object(inner) = it {
                        *inner = strip_directives(std::mem::take(inner));
                    }
                }
            }
            _ => {}
        }
    }
    m
}

/// A three-way JSON merge patch as client-side `kubectl apply` computes it for
/// kinds without strategic metadata: fields removed since `original` (the
/// last-applied configuration) become `null`, fields of `modified` that differ
/// from `current` are set. Lists are replaced whole.
pub fn three_way_merge_patch(original: &Value, modified: &Value, current: &Value) -> Value {
    fn diff(original: Option<&Value>, modified: &Value, current: Option<&Value>) -> Option<Value> {
        match (modified, current) {
            (Value::Object(m), Some(Value::Object(c))) => {
                let o = original.and_then(Value::as_object);
                let mut out = Map::new();
                for (k, mv) in m {
                    if let Some(d) = diff(o.and_then(|o| o.get(k)), mv, c.get(k)) {
                        out.insert(k.clone(), d);
                    }
                }
                if let Some(o) = o {
                    for k in o.keys() {
                        if !m.contains_key(k) && c.contains_key(k) {
                            out.insert(k.clone(), Value::Null);
                        }
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            (mv, Some(cv)) if mv == cv => None,
            // A list the user did not change since the last apply, which the server only
            // filled with defaults, is unchanged (what strategic merge achieves by keys).
            (Value::Array(_), Some(cv))
                if original == Some(modified) && is_subset(modified, cv) =>
            {
                None
            }
            (mv, _) => Some(mv.clone()),
        }
    }
    /// Everything in `a` is also in `b` (objects by key, lists element by element).
    fn is_subset(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => x
                .iter()
                .all(|(k, v)| y.get(k).is_some_and(|w| is_subset(v, w))),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(v, w)| is_subset(v, w))
            }
            _ => a == b,
        }
    }
    diff(Some(original), modified, Some(current)).unwrap_or_else(|| Value::Object(Map::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(orig: Value, patch: Value) -> Value {
        apply_patch(&orig, &patch, PatchType::Strategic, true).unwrap()
    }

    #[test]
    fn kubectl_apply_removing_container_env_and_label() {
        let orig = json!({
            "metadata": {"labels": {"app": "x", "tier": "web"}},
            "spec": {"containers": [
                {"name": "c1", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "c2", "image": "busybox"}
            ]}
        });
        let patch = json!({"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},"labels":{"tier":null}},
           "spec":{"$setElementOrder/containers":[{"name":"c1"}],
                   "containers":[{"$setElementOrder/env":[{"name":"A"}],"env":[{"$patch":"delete","name":"B"}],"image":"nginx:2","name":"c1"},
                                 {"$patch":"delete","name":"c2"}]}});
        let out = smp(orig, patch);
        assert_eq!(out["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}"
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c1", "image": "nginx:2", "env": [{"name": "A", "value": "1"}]}])
        );
    }

    #[test]
    fn service_ports_merge_on_port() {
        let orig = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let patch = json!({"spec":{"$setElementOrder/ports":[{"port":80}],"ports":[{"port":80,"targetPort":9090},{"$patch":"delete","port":443}]}});
        assert_eq!(
            smp(orig, patch)["spec"]["ports"],
            json!([{"port": 80, "targetPort": 9090}])
        );
    }

    #[test]
    fn edit_changes_one_container_and_keeps_others() {
        let orig = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}});
        let patch = json!({"spec":{"$setElementOrder/containers":[{"name":"b"},{"name":"a"}],"containers":[{"image":"3","name":"b"}]}});
        assert_eq!(
            smp(orig, patch)["spec"]["containers"],
            json!([{"name": "b", "image": "3"}, {"name": "a", "image": "1"}])
        );
    }

    #[test]
    fn lists_without_merge_key_are_replaced_and_finalizers_union() {
        let orig =
            json!({"metadata": {"finalizers": ["a"]}, "spec": {"tolerations": [{"key": "x"}]}});
        let patch =
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [{"key": "y"}]}});
        let out = smp(orig, patch);
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "y"}]));
        let out = smp(
            out,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn json_patch_answers_kubernetes_codes() {
        let orig = json!({"metadata": {"finalizers": ["a"]}});
        // A failed `test` (kopf's guard on finalizers) is 422, as is a missing path.
        for ops in [
            json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "b"}]),
            json!([{"op": "remove", "path": "/metadata/labels/x"}]),
        ] {
            let e = apply_patch(&orig, &ops, PatchType::Json, true).unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{ops}");
            assert_eq!(
                e.message,
                "the server rejected our request due to an error in our request"
            );
        }
        // Not a JSON patch at all: 400.
        let e = apply_patch(&orig, &json!({"op": "add"}), PatchType::Json, true).unwrap_err();
        assert_eq!(e.code, 400);
        // Too many operations: 413.
        let many = Value::Array(vec![
            json!({"op": "test", "path": "/metadata", "value": {}});
            MAX_JSON_PATCH_OPERATIONS + 1
        ]);
        assert_eq!(
            apply_patch(&orig, &many, PatchType::Json, true)
                .unwrap_err()
                .code,
            413
        );
        // A failing patch whose undo the json-patch crate cannot do: still an error, no panic.
        let undo = json!([{"op": "replace", "path": "/", "value": null},
                          {"op": "move", "path": "/0/", "from": "/"}]);
        assert_eq!(
            apply_patch(&json!({"": null}), &undo, PatchType::Json, false)
                .unwrap_err()
                .code,
            422
        );
        // `test` with null passes on a missing member of an existing object
        // (then the add that follows applies), not on a missing parent.
        let first = json!([{"op": "test", "path": "/metadata/labels", "value": null},
                           {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]);
        assert_eq!(
            apply_patch(&orig, &first, PatchType::Json, true).unwrap()["metadata"]["labels"],
            json!({"a": "b"})
        );
        let again = apply_patch(&orig, &first, PatchType::Json, true).unwrap();
        assert_eq!(
            apply_patch(&again, &first, PatchType::Json, true)
                .unwrap_err()
                .code,
            422,
            "set now: the test fails"
        );
        let deep = json!([{"op": "test", "path": "/spec/missing/x", "value": null}]);
        assert_eq!(
            apply_patch(&orig, &deep, PatchType::Json, true)
                .unwrap_err()
                .code,
            422
        );
        let ok = json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
                        {"op": "remove", "path": "/metadata/finalizers/0"}]);
        assert_eq!(
            apply_patch(&orig, &ok, PatchType::Json, true).unwrap(),
            json!({"metadata": {"finalizers": []}})
        );
    }

    #[test]
    fn replace_directive_and_merge_patch() {
        let orig = json!({"spec": {"selector": {"a": "1", "b": "2"}}});
        let out = smp(
            orig.clone(),
            json!({"spec": {"selector": {"$patch": "replace", "c": "3"}}}),
        );
        assert_eq!(out["spec"]["selector"], json!({"c": "3"}));
        let out = apply_patch(
            &orig,
            &json!({"spec": {"selector": {"a": null}}}),
            PatchType::Merge,
            true,
        )
        .unwrap();
        assert_eq!(out["spec"]["selector"], json!({"b": "2"}));
        let out = apply_patch(
            &orig,
            &json!([{"op": "replace", "path": "/spec/selector/a", "value": "9"}]),
            PatchType::Json,
            true,
        )
        .unwrap();
        assert_eq!(out["spec"]["selector"]["a"], "9");
        assert!(apply_patch(
            &orig,
            &json!([{"op": "remove", "path": "/nope"}]),
            PatchType::Json,
            true
        )
        .is_err());
    }

    #[test]
    fn three_way() {
        let original =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}});
        let modified = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 3}});
        let current = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "server"}, "uid": "u"}, "spec": {"replicas": 1}});
        let p = three_way_merge_patch(&original, &modified, &current);
        assert_eq!(
            p,
            json!({"metadata": {"labels": {"b": null}}, "spec": {"replicas": 3}})
        );
        assert_eq!(
            three_way_merge_patch(
                &modified,
                &modified,
                &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 3}})
            ),
            json!({})
        );
    }
}
