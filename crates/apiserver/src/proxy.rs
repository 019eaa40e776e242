//! Upgraded connections to a pod's kubelet (`pods/NAME/exec`, `attach`), as
//! kube-apiserver proxies them: the apiserver checks the pod and container,
//! forwards the upgrade request to the kubelet, answers the client with the
//! kubelet's `101 Switching Protocols`, then copies bytes both ways. The
//! WebSocket itself (channels, exit code) is spoken by kubectl and the
//! kubelet (`crates/kubelet/src/exec.rs`); the apiserver never parses it.
//!
//! ```text
//!  kubectl ──GET .../pods/web/exec?command=sh (Upgrade: websocket)──▶ apiserver
//!          apiserver ──GET /exec/NS/web/CONTAINER?command=sh (same upgrade)──▶ kubelet
//!          apiserver ◀──101──  kubelet
//!  kubectl ◀──101── apiserver, then bytes ⇄ bytes until either side closes
//! ```
//!
//! Also here: [`ApiServer::service_endpoint`], how the apiserver reaches a
//! Service it is told to call (admission webhooks, extension apiservers).

use crate::ApiServer;
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::registry;
use minik8s_api::ApiError;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Headers of the client's upgrade request the kubelet needs.
const FORWARDED: [&str; 6] = [
    "upgrade",
    "x-stream-protocol-version",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
];

/// The largest response head read from a kubelet.
const MAX_HEAD: usize = 16 * 1024;

/// The pod's container a request names (`?container=`), or its only one;
/// errors as Kubernetes words them. Logs, exec and attach all choose so.
/// An error with the errors that caused it, outermost first (`error sending
/// request: client error (Connect): invalid peer certificate: UnknownIssuer`):
/// reqwest's own message hides the TLS reason a user needs.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

pub fn pick_container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |list: &str| -> Vec<&str> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
            .unwrap_or_default()
    };
    let (containers, inits, ephemeral) = (
        names("containers"),
        names("initContainers"),
        names("ephemeralContainers"),
    );
    let container = match asked.filter(|c| !c.is_empty()) {
        Some(c) => c,
        None if containers.len() == 1 => containers[0],
        None => {
            let mut message = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !inits.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    inits.join(" ")
                ));
            }
            return Err(ApiError::bad_request(message));
        }
    };
    // Init and ephemeral (kubectl debug) containers are named explicitly.
    let known = [&containers, &inits, &ephemeral]
        .iter()
        .any(|list| list.contains(&container));
    if !known {
        return Err(ApiError::bad_request(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    Ok(container.to_string())
}

/// The status of a pod's container, init and ephemeral ones included.
pub fn container_status<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ]
    .iter()
    .filter_map(|list| pod["status"].get(*list).and_then(Value::as_array))
    .flatten()
    .find(|c| c["name"] == container)
}

/// The container an exec or attach goes to: chosen as [`pick_container`]
/// does, and running in a live pod on a node.
pub fn exec_container(
    pod: &Value,
    name: &str,
    asked: Option<&str>,
    which: Stream,
) -> Result<String, ApiError> {
    let container = pick_container(pod, name, asked)?;
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if phase == "Succeeded" || phase == "Failed" {
        let what = match which {
            Stream::Exec => "exec into",
            Stream::Attach | Stream::PortForward => "attach to",
        };
        return Err(ApiError::bad_request(format!(
            "cannot {what} a container in a completed pod; current phase is {phase}"
        )));
    }
    node_of(pod, name)?;
    let running =
        container_status(pod, &container).is_some_and(|c| c.pointer("/state/running").is_some());
    if !running {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade connection: container not found (\"{container}\")"
        )));
    }
    Ok(container.to_string())
}

/// Which upgraded subresource: the kubelet serves each under its own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Exec,
    Attach,
    PortForward,
}

impl Stream {
    fn path(self) -> &'static str {
        match self {
            Stream::Exec => "exec",
            Stream::Attach => "attach",
            Stream::PortForward => "portforward",
        }
    }
}

/// The node a pod is bound to; a 400 as Kubernetes words it when none.
fn node_of<'a>(pod: &'a Value, name: &str) -> Result<&'a str, ApiError> {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("pod {name} does not have a host assigned")))
}

/// A pod can be port-forwarded once it runs on a node; "" is the path's tail.
fn forwardable(pod: &Value, name: &str) -> Result<String, ApiError> {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    node_of(pod, name)?;
    if phase != "Running" {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade connection: pod {name} is not running (phase {phase})"
        )));
    }
    Ok(String::new())
}

impl ApiServer {
    /// `GET|POST /api/v1/namespaces/NS/pods/NAME/{exec,attach}?...`.
    pub(crate) async fn pod_stream(
        &self,
        which: Stream,
        ns: &str,
        name: &str,
        raw_query: &str,
        headers: &HeaderMap,
        upgrade: Option<OnUpgrade>,
    ) -> Result<Response, ApiError> {
        let (pod, _) = self.read(registry::of::<Pod>(), Some(ns), name).await?;
        let query: Vec<(String, String)> = serde_urlencoded::from_str(raw_query)
            .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
        let asked = query
            .iter()
            .find(|(k, _)| k == "container")
            .map(|(_, v)| v.as_str());
        // A port-forward goes to the pod, not to one of its containers.
        let target = match which {
            Stream::PortForward => forwardable(&pod, name)?,
            _ => format!("/{}", exec_container(&pod, name, asked, which)?),
        };
        // A WebSocket, or kubectl's SPDY/3.1.
        let wants_upgrade = headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|u| {
                u.eq_ignore_ascii_case("websocket") || u.eq_ignore_ascii_case("SPDY/3.1")
            });
        let (true, Some(upgrade)) = (wants_upgrade, upgrade) else {
            return Err(ApiError::bad_request(
                "Upgrade request required: exec, attach and port-forward are served over a WebSocket (v5.channel.k8s.io) or SPDY/3.1",
            ));
        };
        let node_name = node_of(&pod, name)?;
        let (node, _) = self.read(registry::of::<Node>(), None, node_name).await?;
        let kubelet = crate::metrics_api::kubelet_url(&node);
        let authority = kubelet.trim_start_matches("http://").to_string();
        let path = format!("/{}/{ns}/{name}{target}?{raw_query}", which.path());
        let unreachable = |e: std::io::Error| {
            ApiError::internal(format!(
                "error dialing the kubelet on node {node_name}: {e}"
            ))
        };
        let mut conn = self.kubelet_stream(&authority).await.map_err(unreachable)?;
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\n");
        for h in FORWARDED {
            for v in headers.get_all(h).iter().filter_map(|v| v.to_str().ok()) {
                request.push_str(&format!("{h}: {v}\r\n"));
            }
        }
        request.push_str("\r\n");
        conn.write_all(request.as_bytes())
            .await
            .map_err(unreachable)?;
        let (status, kubelet_headers, rest) = read_head(&mut conn).await.map_err(unreachable)?;
        if status != 101 {
            return Err(kubelet_refusal(status, &kubelet_headers, rest, &mut conn).await);
        }
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        for (k, v) in kubelet_headers
            .into_iter()
            .filter(|(k, _)| k != "content-length")
        {
            if let (Ok(k), Ok(v)) = (
                header::HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(&v),
            ) {
                resp.headers_mut().insert(k, v);
            }
        }
        tokio::spawn(async move {
            let upgraded = match upgrade.await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "the client's upgrade did not complete");
                    return;
                }
            };
            let mut client = TokioIo::new(upgraded);
            if !rest.is_empty() && client.write_all(&rest).await.is_err() {
                return;
            }
            let _ = tokio::io::copy_bidirectional(&mut client, &mut conn).await;
        });
        Ok(resp)
    }
}

/// The kubelet's refusal of an upgrade as the API's error: its body, as
/// long as Content-Length says (404 stays a 404, anything else a 400).
async fn kubelet_refusal<R: tokio::io::AsyncRead + Unpin>(
    status: u16,
    headers: &[(String, String)],
    mut body: Vec<u8>,
    conn: &mut R,
) -> ApiError {
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_HEAD);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        let mut buf = [0u8; 4096];
        while body.len() < length {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => body.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    body.truncate(length);
    let message = String::from_utf8_lossy(&body).trim().to_string();
    match status {
        404 => ApiError::new(404, "NotFound", message),
        _ => ApiError::new(400, "BadRequest", message),
    }
}

/// Reads an HTTP response head: status, headers, and bytes read past it.
async fn read_head(
    conn: &mut (impl tokio::io::AsyncRead + Unpin),
) -> std::io::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other(
                "the kubelet's response head is too large",
            ));
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("the kubelet closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let rest = buf[end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("the kubelet's answer is not HTTP"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .filter(|(k, _)| k != "date")
        .collect();
    Ok((status, headers, rest))
}

impl ApiServer {
    /// Where a Service reference (`{namespace, name, port}`, as webhooks and
    /// APIServices name one) leads: the service's DNS name, and the first
    /// ready endpoint of that port. The apiserver dials endpoints itself, so
    /// it needs no kube-proxy on its machine.
    pub(crate) async fn service_endpoint(
        &self,
        svc: &Value,
    ) -> Result<(String, std::net::SocketAddr), String> {
        use k8s_openapi::api::core::v1::{Endpoints, Service};
        let (ns, name) = (
            svc["namespace"].as_str().unwrap_or(""),
            svc["name"].as_str().unwrap_or(""),
        );
        let port = svc["port"].as_i64().unwrap_or(443);
        let no_addresses = || format!("endpoints for service/{name} in \"{ns}\" have no addresses");
        let (service, _) = self
            .read(registry::of::<Service>(), Some(ns), name)
            .await
            .map_err(|_| format!("service/{name} in \"{ns}\" is not present"))?;
        let svc_port = service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"] == port)
            .cloned()
            .ok_or_else(|| format!("service/{name} in \"{ns}\" is not listening on port {port}"))?;
        let (eps, _) = self
            .read(registry::of::<Endpoints>(), Some(ns), name)
            .await
            .map_err(|_| no_addresses())?;
        let subset = eps["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["addresses"].as_array().is_some_and(|a| !a.is_empty()))
            .ok_or_else(no_addresses)?;
        let ep_port = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| svc_port.get("name").is_none_or(|n| p["name"] == *n))
            .and_then(|p| p["port"].as_u64())
            .ok_or_else(no_addresses)?;
        let ip: std::net::IpAddr = subset["addresses"][0]["ip"]
            .as_str()
            .and_then(|i| i.parse().ok())
            .ok_or_else(no_addresses)?;
        Ok((
            format!("{name}.{ns}.svc"),
            std::net::SocketAddr::new(ip, ep_port as u16),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str, running: bool) -> Value {
        let state = if running {
            json!({"running": {}})
        } else {
            json!({"waiting": {"reason": "ContainerCreating"}})
        };
        json!({"spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
               "status": {"phase": phase, "containerStatuses": [{"name": "a", "state": state}, {"name": "b", "state": state}]}})
    }

    #[test]
    fn the_container_is_named_running_and_in_a_live_pod() {
        let p = pod("Running", true);
        assert_eq!(
            exec_container(&p, "web", Some("b"), Stream::Exec).unwrap(),
            "b"
        );
        let e = exec_container(&p, "web", None, Stream::Exec).unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod web, choose one of: [a b]"
        );
        let e = exec_container(&p, "web", Some("zz"), Stream::Exec).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container zz is not valid for pod web")
        );
        let e =
            exec_container(&pod("Succeeded", false), "web", Some("a"), Stream::Attach).unwrap_err();
        assert_eq!(
            e.message,
            "cannot attach to a container in a completed pod; current phase is Succeeded"
        );
        let e = exec_container(&pod("Pending", false), "web", Some("a"), Stream::Exec).unwrap_err();
        assert!(
            e.message.contains("container not found (\"a\")"),
            "{}",
            e.message
        );
    }
}
