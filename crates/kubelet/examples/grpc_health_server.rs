//! A small gRPC health server (`grpc.health.v1.Health/Check`) for trying
//! the kubelet's gRPC probes: it answers SERVING, or NOT_SERVING while the
//! file `/tmp/not-serving` exists. The tests build it into an image.
//!
//! ```text
//! grpc_health_server [PORT]      (default 9090)
//! ```

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response};
use std::convert::Infallible;

type Body = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// One answer: a framed `HealthCheckResponse { status }` and the grpc-status trailer.
async fn check(req: Request<hyper::body::Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    // The request (a service name) is read and not needed: one status for all.
    let _ = req.into_body().collect().await;
    let mut trailers = hyper::HeaderMap::new();
    let mut frames = Vec::new();
    if path == "/grpc.health.v1.Health/Check" {
        let status = if std::path::Path::new("/tmp/not-serving").exists() {
            2
        } else {
            1
        };
        let message = kubelet::probe::grpc_frame(&[0x08, status]);
        frames.push(Ok(Frame::data(Bytes::from(message))));
        trailers.insert("grpc-status", "0".parse().expect("a header value"));
    } else {
        // UNIMPLEMENTED
        trailers.insert("grpc-status", "12".parse().expect("a header value"));
    }
    frames.push(Ok(Frame::trailers(trailers)));
    let body = StreamBody::new(futures::stream::iter(frames));
    Ok(Response::builder()
        .header("content-type", "application/grpc")
        .body(body)
        .expect("a response"))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9090);
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
    println!("gRPC health server on :{port}");
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let served =
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        hyper::service::service_fn(check),
                    )
                    .await;
            if let Err(e) = served {
                eprintln!("connection: {e}");
            }
        });
    }
}
