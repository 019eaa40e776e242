//! The data path against real sockets on 127.0.0.1: two echo backends, the
//! proxy in front, reqwest as the client (HTTP/1.1, h2c, HTTPS with SNI) and
//! a raw socket for a WebSocket-style upgrade.

use super::*;
use crate::ingress::routes::ServicePort;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A backend answering `<name> <path> host=<host> xff=<x-forwarded-for>`;
/// `Upgrade: echo` switches the connection to echoing bytes.
async fn backend(name: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |mut req: Request<Incoming>| async move {
                        if req.headers().get(UPGRADE).is_some() {
                            let on = hyper::upgrade::on(&mut req);
                            tokio::spawn(async move {
                                if let Ok(up) = on.await {
                                    let mut io = TokioIo::new(up);
                                    let mut buf = [0u8; 64];
                                    while let Ok(n) = io.read(&mut buf).await {
                                        if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                            break;
                                        }
                                    }
                                }
                            });
                            let mut r = Response::new(Full::new(Bytes::new()));
                            *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                            r.headers_mut()
                                .insert(UPGRADE, HeaderValue::from_static("echo"));
                            r.headers_mut()
                                .insert(CONNECTION, HeaderValue::from_static("upgrade"));
                            return Ok::<_, Infallible>(r);
                        }
                        let h = |k: &str| {
                            req.headers()
                                .get(k)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_string()
                        };
                        let body = format!(
                            "{name} {} host={} xff={}",
                            req.uri().path(),
                            h("host"),
                            h("x-forwarded-for")
                        );
                        Ok(Response::new(Full::new(Bytes::from(body))))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

fn table() -> Table {
    let ing: Ingress = serde_json::from_value(json!({"metadata": {"name": "i", "namespace": "ns"},
        "spec": {"tls": [{"hosts": ["hello.world.minik8s"], "secretName": "hello-tls"}],
            "rules": [{"host": "hello.world.minik8s", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "hello", "port": {"number": 80}}}},
            {"path": "/world", "pathType": "Prefix", "backend": {"service": {"name": "world", "port": {"number": 80}}}},
            {"path": "/broken", "pathType": "Prefix", "backend": {"service": {"name": "gone", "port": {"number": 80}}}}]}}]}}))
    .unwrap();
    Table::build(vec![&ing])
}

fn backend_of(service: &str) -> Backend {
    Backend {
        namespace: "ns".into(),
        service: service.into(),
        port: ServicePort::Number(80),
    }
}

async fn proxy(config: Config) -> (Arc<Proxy>, SocketAddr) {
    let p = Arc::new(Proxy::default());
    p.set(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(p.clone().serve_http(listener));
    (p, addr)
}

/// A port nothing listens on (bound, then closed).
async fn dead() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

#[tokio::test]
async fn routes_retries_balances_and_upgrades() {
    let (h1, h2, w) = (
        backend("hello-1").await,
        backend("hello-2").await,
        backend("world").await,
    );
    let dead = dead().await;
    let mut config = Config {
        table: table(),
        ..Default::default()
    };
    config
        .endpoints
        .insert(backend_of("hello"), Ok(vec![dead, h1, h2]));
    config.endpoints.insert(backend_of("world"), Ok(vec![w]));
    config
        .endpoints
        .insert(backend_of("gone"), Err(Unservable::ServiceNotFound));
    let (p, addr) = proxy(config).await;
    let client = reqwest::Client::builder()
        .resolve("hello.world.minik8s", addr)
        .build()
        .unwrap();
    let base = format!("http://hello.world.minik8s:{}", addr.port());
    let get = |path: &str| {
        let c = client.clone();
        let url = format!("{base}{path}");
        async move {
            let r = c.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, body) = get("/world/x").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        format!(
            "world /world/x host=hello.world.minik8s:{} xff=127.0.0.1",
            addr.port()
        )
    );
    // Round robin over the hello endpoints; the dead one is skipped, never failed.
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..6 {
        let (status, body) = get("/").await;
        assert_eq!(status, 200, "{body}");
        *seen
            .entry(body.split(' ').next().unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(get("/broken/x").await.0, 503);
    let other = reqwest::Client::new()
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 404, "no rule for the IP as a host");
    // HTTP/2 without TLS (prior knowledge) reaches the same backends.
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .resolve("hello.world.minik8s", addr)
        .build()
        .unwrap();
    let r = h2.get(format!("{base}/world")).send().await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert!(r.text().await.unwrap().starts_with("world /world"));
    // A new table applies to the next request; nothing restarts.
    let mut swapped = Config {
        table: table(),
        ..Default::default()
    };
    swapped.endpoints.insert(backend_of("world"), Ok(vec![h1]));
    p.set(swapped);
    assert!(get("/world").await.1.starts_with("hello-1 /world"));
    // An upgrade is spliced through both ways.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /world HTTP/1.1\r\nHost: hello.world.minik8s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        .await
        .unwrap();
    let mut head = vec![0u8; 1024];
    let n = s.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    s.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"ping");
}

#[tokio::test]
async fn tls_by_sni_from_a_secret() {
    let w = backend("world").await;
    let cert = rcgen::generate_simple_self_signed(vec!["hello.world.minik8s".to_string()]).unwrap();
    let key = certified_key(
        cert.cert.pem().as_bytes(),
        cert.key_pair.serialize_pem().as_bytes(),
    )
    .unwrap();
    let mut config = Config {
        table: table(),
        ..Default::default()
    };
    config.endpoints.insert(backend_of("world"), Ok(vec![w]));
    config
        .certs
        .insert(("ns".into(), "hello-tls".into()), Arc::new(key));
    let p = Arc::new(Proxy::default());
    p.set(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(p.clone().serve_https(listener));
    let ca = reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .resolve("hello.world.minik8s", addr)
        .build()
        .unwrap();
    let r = client
        .get(format!("https://hello.world.minik8s:{}/world", addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2, "h2 by ALPN");
    assert!(r.text().await.unwrap().starts_with("world /world"));
    assert!(certified_key(b"nope", b"nope").is_err());
}
