//! `kubectl exec` and `kubectl attach` at the kubelet: a WebSocket in
//! Kubernetes' channel protocols (or SPDY/3.1, see `exec_spdy.rs`), bridged
//! to an exec in the container runtime (or, for attach, to the container's
//! own process).
//!
//! ```text
//!  kubectl ──ws──▶ apiserver (pods/NAME/exec, proxied as bytes) ──ws──▶ kubelet /exec/NS/POD/CONTAINER
//!                                                                      │ runtime.exec_attached
//!   channel 0 stdin ──────────────────────────────────────────────────▶ │ process stdin
//!   channel 1/2 stdout/stderr ◀─────────────────────────────────────── │ process output
//!   channel 3 status (exit code) ◀──────────────────────────────────── │ exit code when the output ends
//!   channel 4 resize {"Width","Height"} ──────────────────────────────▶ │ tty resize
//!   v5: [255, 0] closes stdin
//! ```
//!
//! Each message starts with its channel: one byte in the binary protocols
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`...), an ASCII digit followed by
//! base64 in the `base64.channel.k8s.io` ones.

use crate::exec_session::{failure, final_status, resize, Mode};
use crate::runtime::{ExecSpec, OutputStream, State as ContainerState};
use crate::Kubelet;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, RawQuery, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// The protocols served, best first (what kubectl v1.32 and the Python client offer).
pub const PROTOCOLS: [&str; 7] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const RESIZE: u8 = 4;
/// v5: `[255, channel]` closes that channel (stdin).
const CLOSE: u8 = 255;

/// How messages carry their channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Binary,
    Base64,
}

impl Framing {
    pub fn of(protocol: &str) -> Framing {
        if protocol.contains("base64") {
            Framing::Base64
        } else {
            Framing::Binary
        }
    }

    /// The framing of the protocol the upgrade settled on.
    pub fn negotiated(socket: &WebSocket) -> Framing {
        let protocol = socket.protocol().and_then(|p| p.to_str().ok());
        Framing::of(protocol.unwrap_or("channel.k8s.io"))
    }

    pub fn encode(self, channel: u8, data: &[u8]) -> Message {
        match self {
            Framing::Binary => {
                let mut frame = Vec::with_capacity(data.len() + 1);
                frame.push(channel);
                frame.extend_from_slice(data);
                Message::Binary(frame.into())
            }
            Framing::Base64 => {
                let text = format!(
                    "{}{}",
                    char::from(b'0' + channel),
                    base64::engine::general_purpose::STANDARD.encode(data)
                );
                Message::Text(text.into())
            }
        }
    }

    /// A message's channel and data; None for messages that carry neither.
    pub fn decode(self, msg: &Message) -> Option<(u8, Vec<u8>)> {
        match (self, msg) {
            (Framing::Binary, Message::Binary(b)) if !b.is_empty() => Some((b[0], b[1..].to_vec())),
            // The Python client sends a str as a text message: its first
            // character is the channel byte, the rest the data.
            (Framing::Binary, Message::Text(t)) if !t.is_empty() => {
                Some((t.as_bytes()[0], t.as_bytes()[1..].to_vec()))
            }
            (Framing::Base64, Message::Text(t)) if !t.is_empty() => {
                let channel = t.as_bytes()[0].checked_sub(b'0')?;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(&t.as_str()[1..])
                    .ok()?;
                Some((channel, data))
            }
            _ => None,
        }
    }
}

fn flag(params: &[(String, String)], key: &str) -> bool {
    params
        .iter()
        .any(|(k, v)| k == key && (v == "1" || v.eq_ignore_ascii_case("true")))
}

/// `GET /exec/{ns}/{pod}/{container}?command=...&stdin=1&stdout=1&tty=1`.
pub async fn exec(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    req: Request,
) -> Response {
    upgrade(k, Mode::Exec, (ns, pod, container), query, req).await
}

/// `GET /attach/{ns}/{pod}/{container}?stdin=1&stdout=1&tty=1`.
pub async fn attach(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    req: Request,
) -> Response {
    upgrade(k, Mode::Attach, (ns, pod, container), query, req).await
}

/// How the client asked to upgrade: a WebSocket, or SPDY/3.1 with the
/// remote-command protocol it settled on.
enum Upgrade {
    WebSocket(WebSocketUpgrade),
    Spdy(hyper::upgrade::OnUpgrade),
}

/// The upgrade a request asks for, or the response refusing it.
async fn requested_upgrade(req: Request) -> Result<Upgrade, Response> {
    let (mut parts, _body) = req.into_parts();
    let spdy = parts
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|u| u.eq_ignore_ascii_case("SPDY/3.1"));
    if !spdy {
        return match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(ws) => Ok(Upgrade::WebSocket(ws)),
            Err(_) => {
                let message = "Upgrade request required: this needs a WebSocket (v5.channel.k8s.io) or SPDY/3.1";
                Err((StatusCode::BAD_REQUEST, message).into_response())
            }
        };
    }
    let offers_v4 = parts
        .headers
        .get_all(crate::spdy::STREAM_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == crate::exec_spdy::PROTOCOL);
    if !offers_v4 {
        let message = format!(
            "unable to upgrade: the client offers none of the supported protocols [{}]",
            crate::exec_spdy::PROTOCOL
        );
        return Err((StatusCode::FORBIDDEN, message).into_response());
    }
    match parts.extensions.remove::<hyper::upgrade::OnUpgrade>() {
        Some(on) => Ok(Upgrade::Spdy(on)),
        None => Err((StatusCode::BAD_REQUEST, "the connection cannot be upgraded").into_response()),
    }
}

async fn upgrade(
    k: Arc<Kubelet>,
    mode: Mode,
    (ns, pod, container): (String, String, String),
    query: Option<String>,
    req: Request,
) -> Response {
    let params: Vec<(String, String)> =
        serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
    let spec = ExecSpec {
        cmd: params
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.clone())
            .collect(),
        stdin: flag(&params, "stdin"),
        stdout: flag(&params, "stdout"),
        stderr: flag(&params, "stderr"),
        tty: flag(&params, "tty"),
    };
    if mode == Mode::Exec && spec.cmd.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 command",
        )
            .into_response();
    }
    if !(spec.stdin || spec.stdout || spec.stderr) {
        let message = "you must specify at least one of stdin, stdout, stderr";
        return (StatusCode::BAD_REQUEST, message).into_response();
    }
    let upgrade = match requested_upgrade(req).await {
        Ok(u) => u,
        Err(refused) => return refused,
    };
    let containers = match k.runtime.list(None).await {
        Ok(c) => c,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let running = containers.into_iter().find(|c| {
        c.pod_namespace == ns
            && c.pod_name == pod
            && c.name == container
            && matches!(c.state, ContainerState::Running { .. })
    });
    let Some(target) = running else {
        let message = format!("container {container} in pod {ns}/{pod} is not running");
        return (StatusCode::NOT_FOUND, message).into_response();
    };
    let runtime = k.runtime.clone();
    let stdin_once = mode == Mode::Attach && stdin_once(&k, &ns, &pod, &container);
    match upgrade {
        Upgrade::WebSocket(ws) => ws
            .protocols(PROTOCOLS)
            .on_upgrade(move |socket| async move {
                let framing = Framing::negotiated(&socket);
                session(runtime, socket, framing, mode, target.id, spec, stdin_once).await
            })
            .into_response(),
        Upgrade::Spdy(on_upgrade) => {
            tokio::spawn(async move {
                match on_upgrade.await {
                    Ok(io) => {
                        let io = hyper_util::rt::TokioIo::new(io);
                        let id = target.id;
                        crate::exec_spdy::session(io, runtime, mode, id, spec, stdin_once).await
                    }
                    Err(e) => tracing::debug!(error = %e, "exec upgrade failed"),
                }
            });
            crate::spdy::switching_protocols(crate::exec_spdy::PROTOCOL)
        }
    }
}

/// Whether the container's stdin closes with its first attached client's
/// (`stdinOnce`, as `kubectl run -i` sets it). Docker ends an attach's output
/// when a client closes the stdin of a container without it, so for those
/// a closed stdin is not passed on (as the CRI runtimes keep it open).
fn stdin_once(k: &Kubelet, ns: &str, pod: &str, container: &str) -> bool {
    let Some(p) = k.pods.get(&format!("{ns}/{pod}")) else {
        return false;
    };
    let Some(spec) = p.spec.as_ref() else {
        return false;
    };
    let regular = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .map(|c| c.stdin_once);
    let ephemeral = || {
        spec.ephemeral_containers
            .iter()
            .flatten()
            .find(|c| c.name == container)
            .map(|c| c.stdin_once)
    };
    regular.or_else(ephemeral).flatten().unwrap_or(false)
}

/// One exec or attach, from start to the exit code.
async fn session(
    runtime: Arc<dyn crate::runtime::ContainerRuntime>,
    socket: WebSocket,
    framing: Framing,
    mode: Mode,
    container_id: String,
    spec: ExecSpec,
    stdin_once: bool,
) {
    let (mut tx, mut rx) = socket.split();
    let status = |v: Value| framing.encode(STATUS, v.to_string().as_bytes());
    let started = match mode {
        Mode::Exec => runtime.exec_attached(&container_id, &spec).await,
        Mode::Attach => runtime.attach(&container_id, &spec).await,
    };
    let exec = match started {
        Ok(e) => e,
        Err(e) => {
            let _ = tx.send(status(failure(&e.to_string()))).await;
            let _ = tx.send(normal_close()).await;
            return;
        }
    };
    let (exec_id, mut output, mut input) = (exec.id, exec.output, exec.input);
    let mut client_open = true;
    loop {
        tokio::select! {
            out = output.next() => match out {
                Some(Ok((stream, bytes))) => {
                    let channel = if stream == OutputStream::Stderr { STDERR } else { STDOUT };
                    if tx.send(framing.encode(channel, &bytes)).await.is_err() {
                        client_open = false;
                        break;
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "exec output failed");
                    break;
                }
                None => break,
            },
            msg = rx.next(), if client_open => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    // The client went away; its stdin ends with it.
                    client_open = false;
                    let _ = input.shutdown().await;
                }
                Some(Ok(m)) => match framing.decode(&m) {
                    Some((STDIN, data)) if spec.stdin => {
                        let written = input.write_all(&data).await.is_ok()
                            && input.flush().await.is_ok();
                        if !written {
                            tracing::debug!("the exec's stdin is closed");
                        }
                    }
                    Some((RESIZE, data)) => {
                        if let Ok(size) = serde_json::from_slice::<Value>(&data) {
                            let w = size["Width"].as_u64().unwrap_or(80).min(u16::MAX.into()) as u16;
                            let h = size["Height"].as_u64().unwrap_or(24).min(u16::MAX.into()) as u16;
                            resize(runtime.as_ref(), mode, &exec_id, w, h).await;
                        }
                    }
                    Some((CLOSE, data))
                        if data.first() == Some(&STDIN) && (mode == Mode::Exec || stdin_once) =>
                    {
                        let _ = input.shutdown().await;
                    }
                    _ => {}
                },
            },
        }
    }
    if !client_open {
        return;
    }
    let answer = final_status(runtime.as_ref(), mode, &exec_id, &spec.cmd).await;
    let _ = tx.send(status(answer)).await;
    let _ = tx.send(normal_close()).await;
}

/// A close frame with code 1000: client-go reads a close without a code
/// (1005) as an error on the status channel.
fn normal_close() -> Message {
    Message::Close(Some(axum::extract::ws::CloseFrame {
        code: axum::extract::ws::close_code::NORMAL,
        reason: "".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_channel_in_both_framings() {
        for framing in [Framing::Binary, Framing::Base64] {
            let m = framing.encode(STDOUT, b"hello\n");
            assert_eq!(framing.decode(&m), Some((STDOUT, b"hello\n".to_vec())));
        }
        assert_eq!(
            Framing::Binary.encode(STDERR, b"x"),
            Message::Binary(vec![2, b'x'].into())
        );
        assert_eq!(
            Framing::Base64.encode(STDIN, b"hi"),
            Message::Text("0aGk=".into())
        );
        assert_eq!(Framing::of("v4.base64.channel.k8s.io"), Framing::Base64);
        assert_eq!(Framing::of("v5.channel.k8s.io"), Framing::Binary);
        assert_eq!(
            Framing::Binary.decode(&Message::Binary(Vec::new().into())),
            None
        );
        assert_eq!(
            Framing::Binary.decode(&Message::Text("\u{0}hello\n".into())),
            Some((STDIN, b"hello\n".to_vec()))
        );
        assert_eq!(Framing::Base64.decode(&Message::Text("0!!".into())), None);
    }
}
