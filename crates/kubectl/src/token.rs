//! `kubectl create token SERVICE_ACCOUNT`: a token for a ServiceAccount from
//! the TokenRequest API (`serviceaccounts/NAME/token`), as the real kubectl
//! asks for it; the token is printed alone, for scripts (`> token`).
//!
//! ```text
//!  kubectl -n monitoring create token prometheus --duration 24h
//!    POST /api/v1/namespaces/monitoring/serviceaccounts/prometheus/token
//!         {"kind": "TokenRequest", "spec": {"expirationSeconds": 86400}}
//!    ◀── status.token (a JWT the apiserver signed)
//! ```

use crate::Ctx;
use anyhow::{anyhow, Context, Result};
use minik8s_api::meta::parse_duration;
use minik8s_client::rest::content;
use serde_json::{json, Value};

/// The TokenRequest body for `duration` (Go duration text; none: the
/// server's default) and `audiences`.
pub fn token_request(duration: Option<&str>, audiences: &[String]) -> Result<Value> {
    let mut spec = json!({"audiences": audiences});
    if let Some(d) = duration {
        let d = parse_duration(d)
            .map_err(|e| anyhow!("invalid argument {d:?} for \"--duration\" flag: {e}"))?;
        if d.as_secs() == 0 {
            return Err(anyhow!("--duration must be greater than or equal to 0s"));
        }
        spec["expirationSeconds"] = json!(d.as_secs());
    }
    Ok(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}))
}

/// Asks for a token of `account` in the context's namespace and prints it.
pub async fn create_token(
    ctx: &Ctx,
    account: &str,
    duration: Option<&str>,
    audiences: &[String],
) -> Result<i32> {
    let body = token_request(duration, audiences)?;
    let path = format!(
        "/api/v1/namespaces/{}/serviceaccounts/{account}/token",
        ctx.namespace
    );
    let answer = ctx
        .client
        .request(
            reqwest::Method::POST,
            &path,
            Some((content::JSON, serde_json::to_vec(&body)?)),
            content::JSON,
        )
        .await
        .with_context(|| format!("creating a token for serviceaccount {account:?}"))?;
    let token = answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("the server's TokenRequest has no status.token"))?;
    println!("{token}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_become_expiration_seconds() {
        let body = super::token_request(Some("8760h"), &[]).unwrap();
        assert_eq!(body["spec"]["expirationSeconds"], 31_536_000);
        assert_eq!(body["kind"], "TokenRequest");
        let body = super::token_request(None, &["api".into()]).unwrap();
        assert!(body["spec"].get("expirationSeconds").is_none());
        assert_eq!(body["spec"]["audiences"][0], "api");
        assert!(super::token_request(Some("soon"), &[]).is_err());
    }
}
