//! `port-forward` at the kubelet, in kubectl's SPDY/3.1 streams (see
//! [`spdy_session`]) or over a WebSocket (the protocol of the official Python
//! client): there one connection carries every asked port, port i on
//! channels 2i (data) and 2i+1 (errors), and each channel's first message is
//! the port number (2 bytes, little endian), so the client can check it.
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
use crate::spdy;
use crate::Kubelet;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
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

/// `/portforward/{ns}/{pod}`: a SPDY/3.1 upgrade (kubectl), or a WebSocket
/// with `?ports=` (the Python client).
pub async fn port_forward(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    req: axum::extract::Request,
) -> Response {
    let (mut parts, _body) = req.into_parts();
    let upgrade = parts
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let spdy = upgrade.starts_with("spdy/3.1");
    let ports = if spdy {
        Vec::new()
    } else {
        match ports(query.as_deref().unwrap_or("")) {
            Ok(p) => p,
            Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
        }
    };
    if !spdy {
        // kubectl first offers SPDY tunnelled in a WebSocket
        // (`SPDY/3.1+portforward.k8s.io`); refusing it makes kubectl fall
        // back to a plain SPDY upgrade. A WebSocket that offers no protocol
        // at all gets the binary channel framing, as the kubelet's default
        // (the unnamed protocol) gives it (kr8s' port-forward).
        let offered = parts
            .headers
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let ours = offered.trim().is_empty()
            || offered
                .split(',')
                .any(|p| crate::exec::PROTOCOLS.contains(&p.trim()));
        if !ours {
            let message = format!("none of the offered protocols ({offered}) is supported");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    }
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
    if spdy {
        let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
            return (StatusCode::BAD_REQUEST, "the connection cannot be upgraded").into_response();
        };
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(io) => spdy_session(hyper_util::rt::TokioIo::new(io), netns).await,
                Err(e) => tracing::debug!(error = %e, "port-forward upgrade failed"),
            }
        });
        return spdy::switching_protocols(PORT_FORWARD_PROTOCOL);
    }
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(_) => {
            let message = "Upgrade request required: port-forward needs SPDY/3.1 or a WebSocket";
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    ws.protocols(crate::exec::PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let framing = Framing::negotiated(&socket);
            forward(socket, framing, netns, ports).await
        })
        .into_response()
}

const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// The streams of one forwarded connection, paired by `requestid`.
#[derive(Default)]
struct Pair {
    port: u16,
    error: Option<u32>,
    data: Option<u32>,
}

/// kubectl's SPDY port-forward: for each local connection it opens an error
/// stream and a data stream (headers `streamtype`, `port`, `requestid`);
/// once both are there the pod's port is dialled and bytes flow on the data
/// stream; a failure is written to the error stream, which ends with FIN.
pub async fn spdy_session<IO>(io: IO, netns: String)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut read, mut write) = tokio::io::split(io);
    let (out, mut frames) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        while let Some(f) = frames.recv().await {
            if write.write_all(&f).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let mut headers_in = spdy::HeaderReader::default();
    let mut headers_out = spdy::HeaderWriter::default();
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    // Client bytes for each data stream's pod connection (None: FIN).
    let mut to_pod: HashMap<u32, mpsc::Sender<Option<Vec<u8>>>> = HashMap::new();
    let mut last_stream = 0;
    while let Some(frame) = spdy::read_frame(&mut read).await {
        match frame {
            spdy::Frame::SynStream {
                stream, headers, ..
            } => {
                last_stream = stream;
                let headers = match headers_in.headers(&headers) {
                    Ok(h) => h,
                    Err(e) => {
                        tracing::debug!(error = %e, "port-forward: bad headers");
                        break;
                    }
                };
                let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                let reply = headers_out.block(&[]);
                if out.send(spdy::syn_reply(stream, &reply)).await.is_err() {
                    break;
                }
                let (Some(kind), Some(port), Some(request)) =
                    (get("streamtype"), get("port"), get("requestid"))
                else {
                    let _ = out.send(spdy::rst_stream(stream, 1)).await;
                    continue;
                };
                let pair = pairs.entry(request.clone()).or_default();
                pair.port = port.parse().unwrap_or(0);
                match kind.as_str() {
                    "error" => pair.error = Some(stream),
                    "data" => pair.data = Some(stream),
                    _ => {}
                }
                if let (Some(error), Some(data)) = (pair.error, pair.data) {
                    let port = pair.port;
                    pairs.remove(&request);
                    let (tx, rx) = mpsc::channel(64);
                    to_pod.insert(data, tx);
                    tokio::spawn(forward_one(
                        netns.clone(),
                        port,
                        error,
                        data,
                        out.clone(),
                        rx,
                    ));
                }
            }
            spdy::Frame::Data { stream, fin, data } => {
                if let Some(tx) = to_pod.get(&stream) {
                    if !data.is_empty() {
                        let _ = tx.send(Some(data)).await;
                    }
                    if fin {
                        let _ = tx.send(None).await;
                        to_pod.remove(&stream);
                    }
                }
            }
            spdy::Frame::RstStream { stream } => {
                to_pod.remove(&stream);
            }
            spdy::Frame::Ping { id } => {
                let _ = out.send(spdy::ping(id)).await;
            }
            spdy::Frame::GoAway => break,
            spdy::Frame::Other => {}
        }
    }
    let _ = out.send(spdy::goaway(last_stream)).await;
    drop(out);
    drop(to_pod);
    let _ = writer.await;
}

/// One forwarded connection: dial the pod's port inside its namespace, then
/// copy both ways; the error stream gets the failure (if any) and a FIN.
async fn forward_one(
    netns: String,
    port: u16,
    error: u32,
    data: u32,
    out: mpsc::Sender<Vec<u8>>,
    mut from_client: mpsc::Receiver<Option<Vec<u8>>>,
) {
    let conn = tokio::task::spawn_blocking(move || connect_in_netns(&netns, port))
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .and_then(|s| {
            s.set_nonblocking(true)?;
            tokio::net::TcpStream::from_std(s)
        });
    let stream = match conn {
        Ok(s) => s,
        Err(e) => {
            let message = format!("error forwarding port {port} to pod: {e}");
            let _ = out.send(spdy::data(error, true, message.as_bytes())).await;
            let _ = out.send(spdy::data(data, true, &[])).await;
            return;
        }
    };
    let (mut pod_read, mut pod_write) = stream.into_split();
    let to_pod = async move {
        while let Some(Some(bytes)) = from_client.recv().await {
            if pod_write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = pod_write.shutdown().await;
    };
    let out_data = out.clone();
    let from_pod = async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match pod_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out_data
                        .send(spdy::data(data, false, &buf[..n]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = out_data.send(spdy::data(data, true, &[])).await;
    };
    tokio::join!(to_pod, from_pod);
    let _ = out.send(spdy::data(error, true, &[])).await;
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
