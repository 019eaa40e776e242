//! `kubectl exec` and `kubectl attach` over SPDY/3.1 (`v4.channel.k8s.io`),
//! what kubectl falls back to when a WebSocket is refused (and uses when
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`).
//!
//! ```text
//!  kubectl ── SYN_STREAM streamtype=error ──▶ kubelet   (one stream per channel,
//!          ── SYN_STREAM streamtype=stdin ──▶            each answered by SYN_REPLY)
//!          ── SYN_STREAM streamtype=stdout ─▶
//!          ── SYN_STREAM streamtype=stderr ─▶            (not with a tty)
//!          ── SYN_STREAM streamtype=resize ─▶            (only with a tty)
//!          ── DATA stdin ... FIN ───────────▶ process stdin
//!          ◀── DATA stdout / stderr ───────── process output
//!          ◀── DATA error: Status JSON, FIN ─ when the output ends: the exit code
//! ```

use crate::exec_session::{failure, final_status, resize, Mode};
use crate::runtime::{ContainerRuntime, ExecSpec, OutputStream};
use crate::spdy;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// The only remote-command protocol served over SPDY: v4 reports the exit
/// code as a `Status` on the error stream.
pub(crate) const PROTOCOL: &str = "v4.channel.k8s.io";

/// The channels of one session, by stream id.
#[derive(Default)]
struct Streams {
    error: Option<u32>,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

impl Streams {
    /// Whether every stream the request asked for is there.
    fn complete(&self, spec: &ExecSpec) -> bool {
        self.error.is_some()
            && (!spec.stdin || self.stdin.is_some())
            && (!spec.stdout || self.stdout.is_some())
            && (!spec.stderr || spec.tty || self.stderr.is_some())
            && (!spec.tty || self.resize.is_some())
    }
}

/// Reads frames off the connection into a channel (reading is not
/// cancel-safe, so it runs on its own).
fn read_frames<R>(mut read: R) -> mpsc::Receiver<spdy::Frame>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(f) = spdy::read_frame(&mut read).await {
            if tx.send(f).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// The connection's writing half as a task fed frames through the channel
/// returned; it shuts the connection down once the channel closes.
fn spawn_writer<W>(mut write: W) -> (mpsc::Sender<Vec<u8>>, tokio::task::JoinHandle<()>)
where
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut outgoing) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        while let Some(f) = outgoing.recv().await {
            if write.write_all(&f).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    (out, writer)
}

/// One exec or attach over an upgraded SPDY connection.
pub(crate) async fn session<IO>(
    io: IO,
    runtime: Arc<dyn ContainerRuntime>,
    mode: Mode,
    container_id: String,
    spec: ExecSpec,
    stdin_once: bool,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (out, writer) = spawn_writer(write);
    let mut frames = read_frames(read);
    let Some((streams, last_stream)) = open_streams(&mut frames, &out, &spec).await else {
        drop(out);
        let _ = writer.await;
        return;
    };
    let error_stream = streams.error.unwrap_or(0);
    let started = match mode {
        Mode::Exec => runtime.exec_attached(&container_id, &spec).await,
        Mode::Attach => runtime.attach(&container_id, &spec).await,
    };
    let exec = match started {
        Ok(e) => e,
        Err(e) => {
            // The failure on the error stream, then GOAWAY.
            let status = failure(&e.to_string()).to_string();
            let _ = out
                .send(spdy::data(error_stream, true, status.as_bytes()))
                .await;
            let _ = out.send(spdy::goaway(last_stream)).await;
            drop(out);
            let _ = writer.await;
            return;
        }
    };
    let (exec_id, mut output, mut input) = (exec.id, exec.output, exec.input);
    let mut resize_buf: Vec<u8> = Vec::new();
    let mut client_open = true;
    loop {
        tokio::select! {
            item = output.next() => match item {
                Some(Ok((which, bytes))) => {
                    let stream = match which {
                        OutputStream::Stderr => streams.stderr.or(streams.stdout),
                        _ => streams.stdout,
                    };
                    if let Some(id) = stream {
                        if out.send(spdy::data(id, false, &bytes)).await.is_err() {
                            client_open = false;
                            break;
                        }
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "exec output failed");
                    break;
                }
                None => break,
            },
            frame = frames.recv(), if client_open => match frame {
                None | Some(spdy::Frame::GoAway) => {
                    // The client went away; its stdin ends with it.
                    client_open = false;
                    let _ = input.shutdown().await;
                }
                Some(spdy::Frame::Data { stream, fin, data }) if Some(stream) == streams.stdin => {
                    if !data.is_empty() && spec.stdin {
                        let written = input.write_all(&data).await.is_ok() && input.flush().await.is_ok();
                        if !written {
                            tracing::debug!("the exec's stdin is closed");
                        }
                    }
                    // As over a WebSocket: a container's own stdin stays open
                    // unless it is stdinOnce.
                    if fin && (mode == Mode::Exec || stdin_once) {
                        let _ = input.shutdown().await;
                    }
                }
                Some(spdy::Frame::Data { stream, data, .. }) if Some(stream) == streams.resize => {
                    resize_buf.extend_from_slice(&data);
                    for (w, h) in take_sizes(&mut resize_buf) {
                        resize(runtime.as_ref(), mode, &exec_id, w, h).await;
                    }
                }
                Some(spdy::Frame::Ping { id }) => {
                    let _ = out.send(spdy::ping(id)).await;
                }
                Some(_) => {}
            },
        }
    }
    if client_open {
        let status = final_status(runtime.as_ref(), mode, &exec_id, &spec.cmd).await;
        finish(&out, &streams, &status.to_string(), last_stream).await;
    }
    drop(out);
    let _ = writer.await;
}

/// The streams the client opens before anything runs (error, stdin,
/// stdout, stderr, resize, as the request asked), each answered with a
/// reply, and the last stream's id; None when the client went away first.
async fn open_streams(
    frames: &mut mpsc::Receiver<spdy::Frame>,
    out: &mpsc::Sender<Vec<u8>>,
    spec: &ExecSpec,
) -> Option<(Streams, u32)> {
    let mut headers_in = spdy::HeaderReader::default();
    let mut headers_out = spdy::HeaderWriter::default();
    let mut streams = Streams::default();
    let mut last_stream = 0;
    while !streams.complete(spec) {
        match frames.recv().await? {
            spdy::Frame::SynStream {
                stream, headers, ..
            } => {
                last_stream = stream;
                let Ok(headers) = headers_in.headers(&headers) else {
                    break;
                };
                let kind = headers
                    .iter()
                    .find(|(n, _)| n == "streamtype")
                    .map(|(_, v)| v.as_str());
                let slot = match kind {
                    Some("error") => &mut streams.error,
                    Some("stdin") => &mut streams.stdin,
                    Some("stdout") => &mut streams.stdout,
                    Some("stderr") => &mut streams.stderr,
                    Some("resize") => &mut streams.resize,
                    _ => {
                        let _ = out.send(spdy::rst_stream(stream, 1)).await;
                        continue;
                    }
                };
                *slot = Some(stream);
                let _ = out
                    .send(spdy::syn_reply(stream, &headers_out.block(&[])))
                    .await;
            }
            spdy::Frame::Ping { id } => {
                let _ = out.send(spdy::ping(id)).await;
            }
            spdy::Frame::GoAway => break,
            _ => {}
        }
    }
    Some((streams, last_stream))
}

/// The end of a session the client still follows: the exit status on the
/// error stream, the output streams closed, then GOAWAY.
async fn finish(out: &mpsc::Sender<Vec<u8>>, streams: &Streams, status: &str, last_stream: u32) {
    let error_stream = streams.error.unwrap_or(0);
    let _ = out
        .send(spdy::data(error_stream, true, status.as_bytes()))
        .await;
    for id in [streams.stdout, streams.stderr].into_iter().flatten() {
        let _ = out.send(spdy::data(id, true, &[])).await;
    }
    let _ = out.send(spdy::goaway(last_stream)).await;
}

/// The terminal sizes complete in `buf` (kubectl writes one JSON object per
/// resize, back to back); what is left waits for more bytes.
fn take_sizes(buf: &mut Vec<u8>) -> Vec<(u16, u16)> {
    let mut sizes = Vec::new();
    let mut consumed = 0;
    let mut stream =
        serde_json::Deserializer::from_slice(buf).into_iter::<HashMap<String, serde_json::Value>>();
    while let Some(Ok(size)) = stream.next() {
        consumed = stream.byte_offset();
        let dim = |k: &str| {
            size.get(k)
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
                .min(u16::MAX.into()) as u16
        };
        sizes.push((dim("Width"), dim("Height")));
    }
    buf.drain(..consumed);
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_messages_are_read_back_to_back_and_across_frames() {
        let mut buf = br#"{"Width":80,"Height":24}{"Width":100,"Hei"#.to_vec();
        assert_eq!(take_sizes(&mut buf), [(80, 24)]);
        buf.extend_from_slice(br#"ght":40}"#);
        assert_eq!(take_sizes(&mut buf), [(100, 40)]);
        assert!(buf.is_empty());
    }

    #[test]
    fn a_session_waits_for_the_streams_its_request_names() {
        let spec = ExecSpec {
            cmd: vec!["sh".into()],
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        let mut s = Streams {
            error: Some(1),
            stdin: Some(3),
            stdout: Some(5),
            ..Default::default()
        };
        assert!(!s.complete(&spec), "stderr is still missing");
        s.stderr = Some(7);
        assert!(s.complete(&spec));
        let tty = ExecSpec { tty: true, ..spec };
        assert!(
            !tty.stdin || !s.complete(&tty),
            "a tty needs its resize stream"
        );
    }
}
