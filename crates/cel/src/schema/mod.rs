//! Structural schemas of custom resources (apiextensions.k8s.io/v1
//! `openAPIV3Schema`): what the apiserver does with a CustomResourceDefinition's
//! schema on every write of one of its objects.
//!
//! ```text
//!  body ─▶ default (defaults.rs) ─▶ validate (validate.rs, formats.rs, CEL rules in cel.rs)
//!       ─▶ prune unknown fields (defaults.rs) ─▶ store
//! ```
//!
//! The schema is k8s-openapi's `JSONSchemaProps`; a structural schema gives
//! every field a type, so pruning and defaulting need no guessing. Printer
//! columns and the scale subresource read objects with [`jsonpath`].

pub mod cel;
pub mod cel_mutation;
mod defaults;
mod formats;
pub mod jsonpath;
pub mod structural;
mod validate;

pub use defaults::{apply_defaults, prune};
pub use validate::validate;

pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps as Schema, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// The schema of the items of an array (`items`), if it has one.
pub fn items(s: &Schema) -> Option<&Schema> {
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(one)) => Some(one),
        Some(JSONSchemaPropsOrArray::Schemas(many)) => many.first(),
        None => None,
    }
}

/// The schema of the values of a map (`additionalProperties` with a schema).
pub fn additional(s: &Schema) -> Option<&Schema> {
    match &s.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(one)) => Some(one),
        _ => None,
    }
}

/// Unknown fields are kept below this schema.
fn preserves_unknown(s: &Schema) -> bool {
    s.x_kubernetes_preserve_unknown_fields == Some(true)
        || matches!(
            s.additional_properties,
            Some(JSONSchemaPropsOrBool::Bool(true))
        )
}

/// `a.b` or `b` at the top.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A map key in a path, as apimachinery writes it: `labels[app]`.
fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}
