//! `kubectl invoke FUNCTION`: calls a serverless Function through the
//! gateway the master serves (`--serverless-port`, 8090), as `curl` would:
//!
//! ```text
//!   kubectl invoke hello --data '{"name": "x"}'   ─▶ POST http://MASTER:8090/function/NS/hello
//!   kubectl invoke hello --async                  ─▶ 202 {"id": ...}
//!   kubectl invoke hello --call ID                ─▶ GET  http://MASTER:8090/calls/ID
//! ```
//!
//! The Function is read through the API first, so a missing one is the
//! API's NotFound, not the gateway's.

use crate::Ctx;
use anyhow::{bail, Context, Result};
use minik8s_api::registry;
use minik8s_api::serverless::Function;
use serde_json::Value;

pub struct InvokeOptions {
    pub data: Option<String>,
    pub asynchronous: bool,
    pub call: Option<String>,
    pub gateway: Option<String>,
}

/// The gateway's address: `--gateway`, else the apiserver's host on port 8090.
pub fn gateway_url(server: &str, flag: Option<&str>) -> Result<String> {
    if let Some(g) = flag {
        return Ok(g.trim_end_matches('/').to_string());
    }
    let url = reqwest::Url::parse(server).with_context(|| format!("the server URL {server}"))?;
    // An IPv6 host comes bracketed, as a URL needs it.
    let host = url.host_str().context("the server URL has no host")?;
    Ok(format!("http://{host}:8090"))
}

/// The body sent: `--data` as given (JSON or text), `@FILE` read from a file, or `{}`.
fn body(data: Option<&str>) -> Result<Vec<u8>> {
    match data {
        None => Ok(b"{}".to_vec()),
        Some(d) => match d.strip_prefix('@') {
            Some("-") => {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
                Ok(buf)
            }
            Some(path) => std::fs::read(path).with_context(|| format!("reading {path}")),
            None => Ok(d.as_bytes().to_vec()),
        },
    }
}

pub async fn invoke(ctx: &mut Ctx, function: &str, o: &InvokeOptions) -> Result<i32> {
    let api = ctx
        .client
        .dynamic(registry::of::<Function>(), Some(&ctx.namespace));
    api.get(function).await?;
    let gateway = gateway_url(&ctx.server, o.gateway.as_deref())?;
    let http = reqwest::Client::new();
    let request = match &o.call {
        Some(id) => http.get(format!("{gateway}/calls/{id}")),
        None => {
            let mut url = format!("{gateway}/function/{}/{function}", ctx.namespace);
            if o.asynchronous {
                url.push_str("?async=true");
            }
            http.post(url)
                .header("content-type", "application/json")
                .body(body(o.data.as_deref())?)
        }
    };
    let resp = request.send().await.with_context(|| {
        format!(
            "calling the serverless gateway at {gateway} (is the master's --serverless-port open?)"
        )
    })?;
    let code = resp.status();
    let text = resp.text().await?;
    if !code.is_success() {
        let why = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(text);
        bail!(
            "function {}/{function} answered {}: {why}",
            ctx.namespace,
            code.as_u16()
        );
    }
    println!("{}", text.trim_end());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_the_masters_host_on_8090() {
        assert_eq!(
            gateway_url("https://10.0.0.5:6443", None).unwrap(),
            "http://10.0.0.5:8090"
        );
        assert_eq!(
            gateway_url("http://[::1]:8080", None).unwrap(),
            "http://[::1]:8090"
        );
        assert_eq!(
            gateway_url("http://x:1", Some("http://gw:9/")).unwrap(),
            "http://gw:9"
        );
        assert_eq!(body(None).unwrap(), b"{}");
        assert_eq!(body(Some("{\"a\":1}")).unwrap(), b"{\"a\":1}");
    }
}
