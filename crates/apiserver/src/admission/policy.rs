//! ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): CEL
//! validations run in the apiserver, no webhook. A policy applies through
//! its bindings; each binding says what a failure does (Deny, Warn, Audit).
//!
//! ```text
//!  binding ─▶ its policy ─▶ matchConstraints (and the binding's matchResources) cover the request?
//!          ─▶ params (paramRef) ─▶ matchConditions ─▶ variables ─▶ validations
//!          ─▶ a false one: Deny ─▶ 422 Invalid (or the validation's reason); Warn ─▶ a Warning header
//! ```

use super::matching::conditions_hold;
use super::Attributes;
use crate::warnings::Warnings;
use crate::ApiServer;
use minik8s_api::meta;
use minik8s_api::ApiError;
use minik8s_cel::schema::cel;
use serde_json::{json, Value};
use std::sync::Arc;

/// The `request` variable: the admission attributes as CEL sees them.
pub(super) fn request(a: &Attributes) -> Value {
    let info = a.info;
    json!({"kind": {"group": info.group, "version": info.version, "kind": info.kind},
        "resource": {"group": info.group, "version": info.version, "resource": info.plural},
        "subResource": a.subresource, "name": a.name, "namespace": a.namespace.unwrap_or(""),
        "operation": a.operation.name(), "userInfo": a.user, "dryRun": a.dry_run})
}

/// The error a denial gives, by the validation's reason (Invalid by default).
pub(super) fn denied(a: &Attributes, reason: &str, message: &str) -> ApiError {
    match reason {
        "Forbidden" => ApiError::forbidden(a.info, a.name, message),
        "Unauthorized" => ApiError::new(401, "Unauthorized", message),
        "RequestEntityTooLarge" => ApiError::new(413, "RequestEntityTooLarge", message),
        _ => {
            let mut e = ApiError::new(
                422,
                "Invalid",
                format!(
                    "The {} \"{}\" is invalid: : {message}",
                    a.info.group_resource(),
                    a.name
                ),
            );
            e.details = Some(Box::new(
                json!({"name": a.name, "group": a.info.group, "kind": a.info.plural,
                "causes": [{"message": message, "field": ""}]}),
            ));
            e
        }
    }
}

/// Runs every binding's policy; the first denial (of a Deny binding) denies.
pub async fn validate(
    srv: &ApiServer,
    a: &Attributes<'_>,
    policies: &[Arc<Value>],
    bindings: &[Arc<Value>],
    warnings: &Warnings,
) -> Result<(), ApiError> {
    for binding in bindings {
        let spec = &binding["spec"];
        let Some(policy) = srv.bound_policy(policies, binding, a).await else {
            continue;
        };
        let (p, b) = (meta::name(policy), meta::name(binding));
        let fail = |why: String| {
            denied(
                a,
                "Invalid",
                &format!(
                    "ValidatingAdmissionPolicy '{p}' with binding '{b}' denied request: {why}"
                ),
            )
        };
        let ignore = policy["spec"]["failurePolicy"] == "Ignore";
        let params = match srv.policy_params(policy, binding, a).await {
            Ok(params) => params,
            Err(_) if ignore => continue,
            Err(why) => return Err(fail(why)),
        };
        let actions: Vec<&str> = spec["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for message in run_policy(policy, a, &params) {
            match message {
                Err(_) if ignore => {}
                Err(why) => return Err(fail(why)),
                Ok((reason, text)) => {
                    let full = format!(
                        "ValidatingAdmissionPolicy '{p}' with binding '{b}' denied request: {text}"
                    );
                    if actions.contains(&"Warn") {
                        warnings.push(format!("Validation failed for ValidatingAdmissionPolicy '{p}' with binding '{b}': {text}"));
                    }
                    if actions.contains(&"Deny") {
                        return Err(denied(a, &reason, &full));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A policy's `variables`, each bound in order (a later one may use an
/// earlier one), as the `variables` object its expressions see.
pub(super) fn variables(spec: &Value, base: &[(&str, &Value)]) -> Result<Value, String> {
    let mut variables = serde_json::Map::new();
    for v in spec["variables"].as_array().into_iter().flatten() {
        let vars_value = Value::Object(variables.clone());
        let mut vars = base.to_vec();
        vars.push(("variables", &vars_value));
        let expr = v["expression"].as_str().unwrap_or("null");
        let name = v["name"].as_str().unwrap_or("");
        let value = cel::compile(expr)
            .and_then(|p| cel::eval(&p, &vars))
            .map_err(|e| format!("variable '{name}' resulted in error: {e}"))?;
        variables.insert(name.to_string(), cel::to_json(&value));
    }
    Ok(Value::Object(variables))
}

/// The failed validations of one policy: Ok((reason, message)) for a false
/// expression, Err for one that could not be evaluated.
fn run_policy(
    policy: &Value,
    a: &Attributes,
    params: &Value,
) -> Vec<Result<(String, String), String>> {
    let spec = &policy["spec"];
    let null = Value::Null;
    let req = request(a);
    let base: Vec<(&str, &Value)> = vec![
        ("object", a.object.unwrap_or(&null)),
        ("oldObject", a.old.unwrap_or(&null)),
        ("request", &req),
        ("params", params),
    ];
    match conditions_hold(&spec["matchConditions"], &base) {
        Ok(true) => {}
        Ok(false) => return Vec::new(),
        Err(e) => return vec![Err(e)],
    }
    let vars_value = match variables(spec, &base) {
        Ok(v) => v,
        Err(e) => return vec![Err(e)],
    };
    let mut vars = base;
    vars.push(("variables", &vars_value));
    let mut out = Vec::new();
    for v in spec["validations"].as_array().into_iter().flatten() {
        let expr = v["expression"].as_str().unwrap_or("true");
        match cel::compile(expr).and_then(|p| cel::eval_bool(&p, &vars)) {
            Ok(true) => {}
            Ok(false) => {
                let from_expression = v["messageExpression"]
                    .as_str()
                    .and_then(|m| {
                        cel::compile(m)
                            .and_then(|p| cel::eval_string(&p, &vars))
                            .ok()
                    })
                    .filter(|m| !m.trim().is_empty());
                let message = from_expression
                    .or_else(|| v["message"].as_str().map(str::to_string))
                    .unwrap_or_else(|| format!("failed expression: {expr}"));
                out.push(Ok((
                    v["reason"].as_str().unwrap_or("Invalid").to_string(),
                    message,
                )));
            }
            Err(e) => out.push(Err(format!("expression '{expr}' resulted in error: {e}"))),
        }
    }
    out
}

impl ApiServer {
    /// The policy `binding` applies, if it covers the request: its
    /// `matchConstraints`, narrowed by the binding's `matchResources`.
    pub(super) async fn bound_policy<'p>(
        &self,
        policies: &'p [Arc<Value>],
        binding: &Value,
        a: &Attributes<'_>,
    ) -> Option<&'p Arc<Value>> {
        let spec = &binding["spec"];
        let policy = policies
            .iter()
            .find(|p| meta::name(p) == spec["policyName"].as_str().unwrap_or(""))?;
        if !self
            .covers(&policy["spec"]["matchConstraints"], "resourceRules", a)
            .await
        {
            return None;
        }
        let narrowed = &spec["matchResources"];
        let narrows = narrowed["resourceRules"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        if narrows && !self.covers(narrowed, "resourceRules", a).await {
            return None;
        }
        Some(policy)
    }

    /// The `params` of a binding: the object its paramRef names, of the
    /// policy's paramKind (null without a paramKind).
    pub(super) async fn policy_params(
        &self,
        policy: &Value,
        binding: &Value,
        a: &Attributes<'_>,
    ) -> Result<Value, String> {
        let kind = &policy["spec"]["paramKind"];
        if kind.is_null() {
            return Ok(Value::Null);
        }
        let reference = &binding["spec"]["paramRef"];
        let info = self
            .registry
            .by_kind(
                kind["apiVersion"].as_str().unwrap_or(""),
                kind["kind"].as_str().unwrap_or(""),
            )
            .ok_or_else(|| {
                format!("failed to configure binding: paramKind {kind} is not served")
            })?;
        let ns = reference["namespace"]
            .as_str()
            .or(a.namespace)
            .filter(|_| info.namespaced);
        let name = reference["name"].as_str().unwrap_or("");
        match self.read(&info, ns, name).await {
            Ok((obj, _)) => Ok(obj),
            Err(_) if reference["parameterNotFoundAction"] == "Allow" => Ok(Value::Null),
            Err(_) => Err("failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::auth::UserInfo;
    use minik8s_api::registry;

    #[test]
    fn failed_validations_give_their_messages() {
        let user = UserInfo::default();
        let deploy = json!({"metadata": {"name": "nginx"}, "spec": {"replicas": 7}});
        let a = Attributes {
            info: registry::of::<k8s_openapi::api::apps::v1::Deployment>(),
            subresource: "",
            namespace: Some("default"),
            name: "nginx",
            operation: Operation::Create,
            object: Some(&deploy),
            old: None,
            user: &user,
            dry_run: false,
        };
        let policy = json!({"spec": {"variables": [{"name": "limit", "expression": "5"}], "validations": [
            {"expression": "object.spec.replicas <= variables.limit"},
            {"expression": "object.spec.replicas <= 6", "messageExpression": "'replicas ' + string(object.spec.replicas) + ' > 6'", "reason": "Forbidden"},
            {"expression": "request.operation == 'CREATE'"},
            {"expression": "object.spec.nope > 1"}]}});
        let out = run_policy(&policy, &a, &Value::Null);
        assert_eq!(
            out[0],
            Ok((
                "Invalid".into(),
                "failed expression: object.spec.replicas <= variables.limit".into()
            ))
        );
        assert_eq!(out[1], Ok(("Forbidden".into(), "replicas 7 > 6".into())));
        assert!(
            out[2].as_ref().is_err_and(
                |e| e.starts_with("expression 'object.spec.nope > 1' resulted in error")
            ),
            "{out:?}"
        );
        assert_eq!(out.len(), 3);
        let e = denied(
            &a,
            "Invalid",
            "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression: x",
        );
        assert_eq!((e.code, e.message.as_str()), (422, "The deployments.apps \"nginx\" is invalid: : ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression: x"));
    }
}
