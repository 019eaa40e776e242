//! MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
//! Kubernetes 1.36): mutations written in CEL and run in the apiserver, no
//! webhook. A policy applies through its bindings, in binding-name order,
//! before the mutating webhooks (as Kubernetes orders its plugins).
//!
//! ```text
//!  binding ─▶ its policy ─▶ matchConstraints (and the binding's matchResources) cover the request?
//!          ─▶ params (paramRef) ─▶ matchConditions ─▶ variables ─▶ each mutation in order:
//!             ApplyConfiguration: Object{...} merged into the object (merge keys kept)
//!             JSONPatch: [JSONPatch{...}] applied as a JSON patch
//!          ─▶ an error: failurePolicy Fail ─▶ the write is refused; Ignore ─▶ skipped
//!  webhooks changed the object after ─▶ policies with reinvocationPolicy IfNeeded run once more
//! ```

use super::matching::conditions_hold;
use super::policy::{denied, request, variables};
use super::Attributes;
use crate::ApiServer;
use minik8s_api::meta;
use minik8s_api::patch::{apply_patch, PatchType};
use minik8s_api::ApiError;
use minik8s_cel::schema::cel_mutation::Mutation;
use serde_json::Value;
use std::sync::Arc;

/// Which policies run: all of them, or only those that asked to be
/// reinvoked (`reinvocationPolicy: IfNeeded`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    First,
    Reinvocation,
}

/// Runs the bound policies over `obj`; returns the mutated object and
/// whether a policy that may be reinvoked applied.
pub async fn mutate(
    srv: &ApiServer,
    a: &Attributes<'_>,
    policies: &[Arc<Value>],
    bindings: &[Arc<Value>],
    mut obj: Value,
    pass: Pass,
) -> Result<(Value, bool), ApiError> {
    let mut bindings: Vec<&Arc<Value>> = bindings.iter().collect();
    bindings.sort_by(|x, y| meta::name(x).cmp(meta::name(y)));
    let mut reinvocable = false;
    let mut namespace: Option<Value> = None;
    for binding in bindings {
        let current = Attributes {
            object: Some(&obj),
            ..*a
        };
        let Some(policy) = srv.bound_policy(policies, binding, &current).await else {
            continue;
        };
        let if_needed = policy["spec"]["reinvocationPolicy"] == "IfNeeded";
        if pass == Pass::Reinvocation && !if_needed {
            continue;
        }
        let (p, b) = (meta::name(policy), meta::name(binding));
        let ignore = policy["spec"]["failurePolicy"] == "Ignore";
        let fail = |why: String| {
            denied(
                a,
                "Invalid",
                &format!("MutatingAdmissionPolicy '{p}' with binding '{b}' denied request: {why}"),
            )
        };
        let params = match srv.policy_params(policy, binding, &current).await {
            Ok(params) => params,
            Err(_) if ignore => continue,
            Err(why) => return Err(fail(why)),
        };
        // Read once per request, and only when a policy applies.
        if namespace.is_none() {
            namespace = Some(match a.namespace.filter(|_| a.info.namespaced) {
                Some(ns) => srv.namespace_object(ns).await,
                None => Value::Null,
            });
        }
        let namespace = namespace.as_ref().unwrap_or(&Value::Null);
        let strategic = srv.strategy(a.info).strategic_merge();
        match run_policy(policy, &current, &params, namespace, strategic) {
            Ok(Some(mutated)) => {
                obj = mutated;
                reinvocable |= if_needed;
            }
            Ok(None) => {}
            Err(_) if ignore => {}
            Err(why) => return Err(fail(why)),
        }
    }
    Ok((obj, reinvocable))
}

/// One policy over `a.object`: Ok(Some(the mutated object)), Ok(None) when
/// its match conditions do not hold, Err when a step fails.
fn run_policy(
    policy: &Value,
    a: &Attributes,
    params: &Value,
    namespace: &Value,
    strategic: bool,
) -> Result<Option<Value>, String> {
    let spec = &policy["spec"];
    let null = Value::Null;
    let req = request(a);
    let mut obj = a.object.cloned().unwrap_or(Value::Null);
    let base: Vec<(&str, &Value)> = vec![
        ("oldObject", a.old.unwrap_or(&null)),
        ("request", &req),
        ("params", params),
        ("namespaceObject", namespace),
    ];
    let first = with_object(&base, &obj);
    if !conditions_hold(&spec["matchConditions"], &first)? {
        return Ok(None);
    }
    let vars_value = variables(spec, &first)?;
    for m in spec["mutations"].as_array().into_iter().flatten() {
        let (kind, expr) = match m["patchType"].as_str() {
            Some("JSONPatch") => (PatchType::Json, &m["jsonPatch"]["expression"]),
            _ => (PatchType::Strategic, &m["applyConfiguration"]["expression"]),
        };
        let expr = expr.as_str().unwrap_or("");
        let mut vars = with_object(&base, &obj);
        vars.push(("variables", &vars_value));
        let patch = Mutation::compile(expr)
            .and_then(|p| p.eval(&vars))
            .map_err(|e| format!("expression '{expr}' resulted in error: {e}"))?;
        if kind == PatchType::Strategic && !patch.is_object() {
            return Err(format!(
                "expression '{expr}' must return an Object, got {patch}"
            ));
        }
        // An apply configuration merges: maps field by field, lists by
        // their merge keys (a custom resource's by replacement).
        let kind = match kind {
            PatchType::Strategic if !strategic => PatchType::Merge,
            k => k,
        };
        obj = apply_patch(&obj, &patch, kind, strategic)
            .map_err(|e| format!("applying the mutation of '{expr}': {}", e.message))?;
    }
    Ok(Some(obj))
}

/// The variables of `base` with `object` bound to `obj` (the object as the
/// mutations so far left it).
fn with_object<'a>(base: &[(&'a str, &'a Value)], obj: &'a Value) -> Vec<(&'a str, &'a Value)> {
    let mut vars = base.to_vec();
    vars.push(("object", obj));
    vars
}

impl ApiServer {
    /// The namespace of a request as CEL's `namespaceObject` (null when unknown).
    pub(super) async fn namespace_object(&self, ns: &str) -> Value {
        let info = minik8s_api::registry::of::<k8s_openapi::api::core::v1::Namespace>();
        match self.read(info, None, ns).await {
            Ok((obj, _)) => obj,
            Err(_) => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::auth::UserInfo;
    use serde_json::json;

    #[test]
    fn apply_configurations_merge_and_json_patches_apply_in_order() {
        let user = UserInfo::default();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "labels": {"keep": "me"}}, "data": {"a": "1"}});
        let a = Attributes {
            info: minik8s_api::registry::of::<k8s_openapi::api::core::v1::ConfigMap>(),
            subresource: "",
            namespace: Some("default"),
            name: "settings",
            operation: Operation::Create,
            object: Some(&cm),
            old: None,
            user: &user,
            dry_run: false,
        };
        let policy = json!({"spec": {"variables": [{"name": "team", "expression": "'blue'"}],
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{labels: {'team': variables.team}}}"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/data/b', value: object.metadata.labels.team + '-' + params.data.suffix}]"}}]}});
        let params = json!({"data": {"suffix": "x"}});
        let out = run_policy(&policy, &a, &params, &Value::Null, true)
            .unwrap()
            .unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"keep": "me", "team": "blue"})
        );
        assert_eq!(out["data"], json!({"a": "1", "b": "blue-x"}));
        // A condition that does not hold leaves the object alone.
        let skip = json!({"spec": {"matchConditions": [{"name": "never", "expression": "false"}],
            "mutations": policy["spec"]["mutations"]}});
        assert!(run_policy(&skip, &a, &params, &Value::Null, true)
            .unwrap()
            .is_none());
        // A failing expression is an error the failure policy decides on.
        let broken = json!({"spec": {"mutations": [{"patchType": "JSONPatch",
            "jsonPatch": {"expression": "[JSONPatch{op: 'remove', path: '/data/missing'}]"}}]}});
        assert!(run_policy(&broken, &a, &params, &Value::Null, true).is_err());
    }
}
