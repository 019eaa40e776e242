//! Query parameters and JSON responses, shared by every part of the request
//! path (a leaf: it depends on nothing else in the crate).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use minik8s_api::ApiError;
use serde_json::Value;
use std::collections::HashMap;

pub fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub fn error_response(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

/// Adds `Warning: 299 - "text"` headers (kubectl prints them as `Warning: text`).
pub fn add_warnings(resp: &mut Response, warnings: Vec<String>) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = header::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
}

/// Query parameters (last value wins).
pub struct Params(HashMap<String, String>);

impl Params {
    pub fn parse(q: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
        Ok(Params(pairs.into_iter().collect()))
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }
    /// apimachinery's rule: only missing, "0" and "false" (any case) are false.
    pub fn flag(&self, k: &str) -> bool {
        match self.0.get(k) {
            None => false,
            Some(v) => !(v == "0" || v.eq_ignore_ascii_case("false")),
        }
    }
    pub fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        self.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid {k}: {v:?}")))
            })
            .transpose()
    }
}
