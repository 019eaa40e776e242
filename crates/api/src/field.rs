//! Field errors, as Kubernetes' `apimachinery/pkg/util/validation/field`:
//! what is wrong with one field of an object (its path, the value, why),
//! which the apiserver turns into a 422 `Status` with one cause per error.
//! Validation (minik8s-validation) makes them; every component reads them.

use serde_json::Value;
use std::fmt;

/// What is wrong with a field, mapped to `StatusCause.reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    TooMany,
    NotFound,
}

impl ErrorType {
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::NotFound => "FieldValueNotFound",
        }
    }
}

/// One field error, rendered like apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    /// The offending value, already rendered (`"abc"`, `-1`), for Invalid/NotSupported/Duplicate.
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(render(value)),
            detail: detail.into(),
        }
    }
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        FieldError {
            kind: ErrorType::NotSupported,
            field: field.into(),
            value: Some(render(value)),
            detail: format!("supported values: {}", list.join(", ")),
        }
    }
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        FieldError {
            kind: ErrorType::Duplicate,
            field: field.into(),
            value: Some(render(value)),
            detail: String::new(),
        }
    }
    /// A value over `max` bytes (the value itself is not repeated).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError {
            kind: ErrorType::TooLong,
            field: field.into(),
            value: None,
            detail: format!("may not be more than {max} bytes"),
        }
    }
    /// A list or map with more than `max` entries (`actual` of them).
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        FieldError {
            kind: ErrorType::TooMany,
            field: field.into(),
            value: Some(actual.to_string()),
            detail: format!("must have at most {max} items"),
        }
    }
    /// A reference to something that does not exist.
    pub fn not_found(field: impl Into<String>, value: &Value) -> Self {
        FieldError {
            kind: ErrorType::NotFound,
            field: field.into(),
            value: Some(render(value)),
            detail: String::new(),
        }
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: ErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// The part after `<field>: ` in the message, which is also the cause message.
    pub fn body(&self) -> String {
        let head = match self.kind {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::NotFound => "Not found",
        };
        let mut s = head.to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

pub type Errors = Vec<FieldError>;
