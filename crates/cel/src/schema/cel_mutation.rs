//! CEL for MutatingAdmissionPolicies: expressions that build objects.
//!
//! An apply configuration is written as a typed object literal,
//! `Object{metadata: Object.metadata{labels: {"a": "b"}}}`, and a JSON patch
//! as a list of `JSONPatch{op: "add", path: "/x", value: ...}`. Kubernetes
//! derives the `Object.*` types from the kind's schema; here every type name
//! an expression constructs is registered as a struct that accepts any
//! fields, and the result is read back as JSON, which the apiserver then
//! merges or patches into the object (structure is checked when the mutated
//! object is validated, as for any write).
//!
//! ```text
//!  "Object{metadata: Object.metadata{labels: {...}}}"
//!     ─▶ scan the type names (Object, Object.metadata) ─▶ an Env that can build them
//!     ─▶ run with object, oldObject, request, params, variables ─▶ JSON
//! ```

use super::cel::{compile, kubernetes_env, to_cel, to_json};
use cel::common::types::{CelStruct, Type};
use cel::common::value::{CowVal, Val};
use cel::{Context, Env, ExecutionError, Program, StructType};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `jsonpatch.escapeKey(k)`, written so the `cel` crate can call it (it has
/// no namespaced functions): the source's calls are renamed to this.
const ESCAPE_KEY: &str = "jsonpatch_escapeKey";

/// A constructible type that takes whatever fields it is given.
struct FreeStruct(Type);

impl StructType for FreeStruct {
    fn get_type(&self) -> &Type {
        &self.0
    }
    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut s = CelStruct::new(self.0.name().to_string());
        for (name, value) in fields {
            s.add_field_value(name, value);
        }
        Ok(Box::new(s))
    }
}

/// The struct type names `source` constructs: `Object`, `Object.spec...`, `JSONPatch`.
fn constructed_types(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b'.');
        let rest = &source[i..];
        if starts_word && (rest.starts_with("Object") || rest.starts_with("JSONPatch")) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            if rest[end..].trim_start().starts_with('{') && !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
            i += end.max(1);
        } else {
            i += 1;
        }
    }
    out
}

/// A mutation's expression, ready to run.
pub struct Mutation {
    program: Program,
    env: Arc<Env>,
}

impl Mutation {
    /// Compiles `source`; the error says why it does not compile.
    pub fn compile(source: &str) -> Result<Mutation, String> {
        let renamed = source.replace("jsonpatch.escapeKey(", &format!("{ESCAPE_KEY}("));
        let program = compile(&renamed)?;
        let mut env = kubernetes_env();
        for name in constructed_types(&renamed) {
            env.add_type(FreeStruct(Type::new_struct(name)))
                .map_err(|e| format!("compilation failed: {e:?}"))?;
        }
        Ok(Mutation {
            program,
            env: Arc::new(env),
        })
    }

    /// Runs the expression with `vars` bound; its value as JSON.
    pub fn eval(&self, vars: &[(&str, &Value)]) -> Result<Value, String> {
        let mut ctx = Context::with_env(self.env.clone());
        for (name, v) in vars {
            ctx.add_variable_from_value(*name, to_cel(v));
        }
        ctx.add_function(ESCAPE_KEY, |key: Arc<String>| {
            key.replace('~', "~0").replace('/', "~1")
        })
        .map_err(|e| format!("{e:?}"))?;
        let value = self.program.execute(&ctx).map_err(|e| e.to_string())?;
        Ok(to_json(&value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn apply_configurations_and_json_patches_become_json() {
        let object = json!({"metadata": {"name": "cm", "labels": {"a": "1"}}});
        let m = Mutation::compile(
            r#"Object{metadata: Object.metadata{labels: {"team": object.metadata.name + "-owners"}}}"#,
        )
        .unwrap();
        assert_eq!(
            m.eval(&[("object", &object)]).unwrap(),
            json!({"metadata": {"labels": {"team": "cm-owners"}}})
        );
        let m = Mutation::compile(
            r#"[JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/x"), value: "y"},
                JSONPatch{op: "add", path: "/spec/selector", value: Object.spec.selector{matchLabels: {"env": "test"}}}]"#,
        )
        .unwrap();
        assert_eq!(
            m.eval(&[("object", &object)]).unwrap(),
            json!([{"op": "add", "path": "/metadata/annotations/example.com~1x", "value": "y"},
                   {"op": "add", "path": "/spec/selector", "value": {"matchLabels": {"env": "test"}}}])
        );
        assert_eq!(
            constructed_types("Object{a: Object.spec{b: MyObject{}}} + JSONPatch {}"),
            ["Object", "Object.spec", "JSONPatch"]
        );
        assert!(Mutation::compile("Object{").is_err());
    }
}
