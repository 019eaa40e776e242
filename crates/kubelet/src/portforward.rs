//! `port-forward` at the kubelet over a WebSocket (the protocol of the
//! official Python client): one connection carries every asked port, port i
//! on channels 2i (data) and 2i+1 (errors), and each channel's first message
//! is the port number (2 bytes, little endian), so the client can check it.
//!
//! ```text
//!  client ──ws /portforward/NS/POD?ports=8080──▶ kubelet
//!          kubelet: the sandbox's network namespace (/proc/PID/ns/net), a
//!          thread that setns()es into it connects to 127.0.0.1:8080 there
//!  [0, data] ⇄ that TCP connection;  [1, message] if it fails
//! ```
//!
//! Connecting from inside the pod's namespace reaches listeners bound to the
//! pod's localhost too, as Kubernetes does, without socat or nsenter.

use crate::exec::Framing;
use crate::runtime::{State as ContainerState, SANDBOX};
use crate::Kubelet;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// The ports of `?ports=80,8080` (also repeated `ports=`).
pub fn ports(query: &str) -> Result<Vec<u16>, String> {
    let params: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let mut out = Vec::new();
    for (_, v) in params.iter().filter(|(k, _)| k == "ports" || k == "port") {
        for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => out.push(n),
                _ => return Err(format!("invalid port {p:?}")),
            }
        }
    }
    if out.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    Ok(out)
}

/// A TCP connection to `127.0.0.1:port` made inside the network namespace at
/// `netns`. `setns` changes only the calling thread, so a short-lived thread
/// does it; the socket stays in the namespace it was made in.
pub fn connect_in_netns(netns: &str, port: u16) -> std::io::Result<std::net::TcpStream> {
    let path = netns.to_string();
    std::thread::spawn(move || {
        let target = std::fs::File::open(&path)?;
        // SAFETY: setns on a valid namespace fd affects only this thread.
        if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            std::time::Duration::from_secs(5),
        )
    })
    .join()
    .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
}

/// `GET /portforward/{ns}/{pod}?ports=...` (a WebSocket upgrade).
pub async fn port_forward(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ports = match ports(query.as_deref().unwrap_or("")) {
        Ok(p) => p,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let Ok(ws) = ws else {
        let message =
            "Upgrade request required: port-forward needs a WebSocket (v4.channel.k8s.io)";
        return (StatusCode::BAD_REQUEST, message).into_response();
    };
    let sandbox = match k.runtime.list(None).await {
        Ok(cs) => cs.into_iter().find(|c| {
            c.pod_namespace == ns
                && c.pod_name == pod
                && c.name == SANDBOX
                && matches!(c.state, ContainerState::Running { .. })
        }),
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let netns = match sandbox {
        Some(s) => k.runtime.netns_path(&s.id).await.ok().flatten(),
        None => None,
    };
    let Some(netns) = netns else {
        let message = format!("pod {ns}/{pod} has no running sandbox on this node");
        return (StatusCode::NOT_FOUND, message).into_response();
    };
    ws.protocols(crate::exec::PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let framing = Framing::of(
                socket
                    .protocol()
                    .and_then(|p| p.to_str().ok())
                    .unwrap_or("channel.k8s.io"),
            );
            forward(socket, framing, netns, ports).await
        })
        .into_response()
}

/// Pumps every port's bytes between the WebSocket and its connection.
async fn forward(socket: WebSocket, framing: Framing, netns: String, ports: Vec<u16>) {
    let (mut tx, mut rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(64);
    let mut writers = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        let (data, error) = (2 * i as u8, 2 * i as u8 + 1);
        for channel in [data, error] {
            let _ = out_tx
                .send(framing.encode(channel, &port.to_le_bytes()))
                .await;
        }
        let path = netns.clone();
        let conn = tokio::task::spawn_blocking(move || connect_in_netns(&path, port))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r);
        let stream = match conn.and_then(|s| {
            s.set_nonblocking(true)?;
            tokio::net::TcpStream::from_std(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                let message = format!("error forwarding port {port} to pod: {e}");
                let _ = out_tx.send(framing.encode(error, message.as_bytes())).await;
                writers.push(None);
                continue;
            }
        };
        let (mut read, write) = stream.into_split();
        writers.push(Some(write));
        let out = out_tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if out.send(framing.encode(data, &buf[..n])).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(out_tx);
    loop {
        tokio::select! {
            msg = out_rx.recv() => match msg {
                Some(m) => {
                    if tx.send(m).await.is_err() {
                        break;
                    }
                }
                // Every connection has ended: so has the session.
                None => {
                    let _ = tx
                        .send(Message::Close(Some(CloseFrame {
                            code: axum::extract::ws::close_code::NORMAL,
                            reason: "".into(),
                        })))
                        .await;
                    break;
                }
            },
            msg = rx.next() => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(m)) => {
                    if let Some((channel, bytes)) = framing.decode(&m) {
                        let port = usize::from(channel / 2);
                        if channel % 2 == 0 && !bytes.is_empty() {
                            if let Some(Some(w)) = writers.get_mut(port) {
                                if w.write_all(&bytes).await.is_err() {
                                    writers[port] = None;
                                }
                            }
                        }
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_the_query() {
        assert_eq!(ports("ports=80,8080").unwrap(), vec![80, 8080]);
        assert_eq!(ports("ports=80&ports=81").unwrap(), vec![80, 81]);
        assert!(ports("").unwrap_err().contains("required"));
        assert!(ports("ports=0").is_err());
        assert!(ports("ports=http").is_err());
    }
}
