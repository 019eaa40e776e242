//! `metav1.Status` errors with the reasons, codes and messages of apimachinery's
//! `pkg/api/errors`, shared by the apiserver (which sends them) and clients
//! (which parse them).

use crate::field::FieldError;
use crate::registry::ResourceInfo;
use serde_json::{json, Value};
use std::fmt;

/// An API error: everything a `Status` body carries.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// Boxed: most errors carry none, and it keeps `Result<_, ApiError>` small.
    pub details: Option<Box<Value>>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

fn details(info: &ResourceInfo, name: &str) -> Value {
    json!({"name": name, "group": info.group, "kind": info.plural})
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
        }
    }

    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(info, name))),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{}\" not found", info.group_resource(), name),
            )
        }
    }

    pub fn unknown_path() -> Self {
        ApiError {
            details: Some(Box::new(json!({}))),
            ..Self::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(info, name))),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{}\" already exists", info.group_resource(), name),
            )
        }
    }

    pub fn conflict(info: &ResourceInfo, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(info, name))),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": {}",
                    info.group_resource(),
                    name,
                    why
                ),
            )
        }
    }

    /// The usual optimistic-concurrency conflict.
    pub fn modified(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict(info, name, "the object has been modified; please apply your changes to the latest version and try again")
    }

    pub fn invalid(info: &ResourceInfo, name: &str, errs: &[FieldError]) -> Self {
        let kind = if info.group.is_empty() {
            info.kind.to_string()
        } else {
            format!("{}.{}", info.kind, info.group)
        };
        let list: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let causes: Vec<Value> = errs
            .iter()
            .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field}))
            .collect();
        ApiError {
            details: Some(Box::new(
                json!({"name": name, "group": info.group, "kind": info.kind, "causes": causes}),
            )),
            ..Self::new(
                422,
                "Invalid",
                format!("{kind} \"{name}\" is invalid: {joined}"),
            )
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn forbidden(info: &ResourceInfo, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(info, name))),
            ..Self::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{}\" is forbidden: {}",
                    info.group_resource(),
                    name,
                    why
                ),
            )
        }
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 for a body in a media type the endpoint does not take; `accepted`
    /// lists the ones it does, as Kubernetes' message does.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }
    pub fn is_conflict(&self) -> bool {
        self.code == 409 && self.reason == "Conflict"
    }
    pub fn is_already_exists(&self) -> bool {
        self.code == 409 && self.reason == "AlreadyExists"
    }
    pub fn is_gone(&self) -> bool {
        self.code == 410
    }

    /// A watch from a resourceVersion the store has not reached (after a
    /// restore to an older state, say): Kubernetes' 504 with the
    /// `ResourceVersionTooLarge` cause. Like 410, it tells a client to relist.
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        let mut e = ApiError::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(Box::new(
            json!({"causes": [{"reason": "ResourceVersionTooLarge",
            "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        ));
        e
    }

    /// Whether this is [`ApiError::too_large_resource_version`].
    pub fn is_too_large_resource_version(&self) -> bool {
        self.code == 504
            && self.details.as_ref().is_some_and(|d| {
                d["causes"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "ResourceVersionTooLarge"))
            })
    }

    /// The `Status` JSON body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code});
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s
    }

    /// Parses a `Status` body; falls back to the raw text when the body is not one.
    pub fn from_body(code: u16, body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => ApiError {
                code: v
                    .get("code")
                    .and_then(Value::as_u64)
                    .map(|c| c as u16)
                    .unwrap_or(code),
                reason: v
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                message: v
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                details: v.get("details").cloned().map(Box::new),
            },
            _ => ApiError::new(code, "", String::from_utf8_lossy(body).trim().to_string()),
        }
    }

    /// The field causes of an Invalid error.
    pub fn causes(&self) -> Vec<(String, String)> {
        self.details
            .as_ref()
            .and_then(|d| d.get("causes"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c.get("field")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            c.get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
