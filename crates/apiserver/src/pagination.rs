//! Paged lists (`?limit=N&continue=TOKEN`), as kubectl (`--chunk-size`,
//! 500 by default) and informers ask for large collections.
//!
//! ```text
//!  GET /api/v1/pods?limit=2        → items a, b   metadata.continue = T1 (rv 812, after "default/b")
//!  GET /api/v1/pods?limit=2&continue=T1  → items c, d at rv 812 (the same snapshot), continue = T2
//!  GET ...&continue=T2             → item e, no continue: the list is complete
//! ```
//!
//! Every page is read at the first page's revision, so the pages together
//! are one consistent list. The token is Kubernetes' own shape: base64url of
//! `{"v":"meta.k8s.io/v1","rv":812,"start":"default/b\u0000"}`.

use base64::Engine;
use minik8s_api::ApiError;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    /// The first key (relative to the resource's prefix) of the next page.
    start: String,
}

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// What a list request asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Page {
    /// At most this many items (None: all).
    pub limit: Option<usize>,
    /// Read at this revision (from the continue token).
    pub revision: Option<i64>,
    /// Keys (relative to the prefix) before this one were on earlier pages.
    pub start: Option<String>,
}

impl Page {
    /// From the `limit`, `continue` and `resourceVersion` parameters.
    pub fn parse(
        limit: Option<&str>,
        token: Option<&str>,
        resource_version: Option<&str>,
    ) -> Result<Page, ApiError> {
        let limit = match limit.filter(|l| !l.is_empty()) {
            None => None,
            Some(l) => match l.parse::<i64>() {
                Ok(n) if n > 0 => Some(n as usize),
                Ok(_) => None,
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
                        "invalid limit {l:?}: must be an integer"
                    )))
                }
            },
        };
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Page {
                limit,
                ..Page::default()
            });
        };
        if resource_version.is_some_and(|rv| !rv.is_empty() && rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let invalid =
            |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| {
                invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
            })?;
        let t: Token = serde_json::from_slice(&raw).map_err(|_| {
            invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        })?;
        if t.v != TOKEN_VERSION {
            return Err(invalid(&format!(
                "server does not recognize this encoded key version {:?}",
                t.v
            )));
        }
        if t.rv <= 0 {
            return Err(invalid(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        if t.start.contains("..") || t.start.starts_with('/') {
            return Err(invalid("path traversal not allowed"));
        }
        Ok(Page {
            limit,
            revision: Some(t.rv),
            start: Some(t.start),
        })
    }
}

/// The token for the page after `last_key` of a list read at `revision`.
pub fn continue_token(revision: i64, last_key: &str) -> String {
    let t = Token {
        v: TOKEN_VERSION.into(),
        rv: revision,
        // A NUL sorts right after the key itself: the next page starts past it.
        start: format!("{last_key}\u{0}"),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&t).unwrap_or_default())
}

/// Kubernetes' answer when the page's revision was compacted away.
pub fn expired() -> ApiError {
    ApiError::gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_are_400() {
        let t = continue_token(812, "default/b");
        let page = Page::parse(Some("2"), Some(&t), None).unwrap();
        assert_eq!(
            page,
            Page {
                limit: Some(2),
                revision: Some(812),
                start: Some("default/b\u{0}".into())
            }
        );
        assert!("default/b" < page.start.as_deref().unwrap());
        assert!("default/c" > page.start.as_deref().unwrap());
        assert_eq!(Page::parse(None, Some("!!"), None).unwrap_err().code, 400);
        assert_eq!(Page::parse(Some("x"), None, None).unwrap_err().code, 400);
        assert_eq!(Page::parse(Some("0"), None, None).unwrap().limit, None);
        let e = Page::parse(None, Some(&t), Some("5")).unwrap_err();
        assert_eq!(
            e.message,
            "specifying resource version is not allowed when using continue"
        );
    }
}
