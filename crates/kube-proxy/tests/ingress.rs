//! The ingress proxy's control loop against a real apiserver: Services and
//! EndpointSlices whose "pods" are HTTP servers on 127.0.0.1, Ingresses
//! created and changed through the API (and the real kubectl), and requests
//! through the proxy: routing by path, the default class, status, an event
//! and a 503 for a missing Service (that path only), a backend change
//! applied within a second, and endpoints changed under traffic with no
//! failed request.

use kube_proxy::ingress::sync::{ensure_class, Settings, Sync};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams, SharedInformers};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An HTTP server answering its name on every path.
async fn pod(name: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 4096];
                loop {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}",
                        name.len()
                    );
                    if s.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn api(client: &Client, api_version: &str, kind: &str, ns: Option<&str>) -> DynamicApi {
    client.dynamic(registry::by_kind(api_version, kind).unwrap(), ns)
}

/// A Service `name` on port 80 and its EndpointSlice listing `pods`.
async fn service(client: &Client, name: &str, pods: &[SocketAddr]) {
    api(client, "v1", "Service", Some("default"))
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"name": "http", "port": 80}]}}),
        )
        .await
        .unwrap();
    set_endpoints(client, name, pods).await;
}

async fn set_endpoints(client: &Client, name: &str, pods: &[SocketAddr]) {
    let slices = api(
        client,
        "discovery.k8s.io/v1",
        "EndpointSlice",
        Some("default"),
    );
    // Each "pod" listens on its own port: one slice per port.
    let old = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
        .await
        .unwrap();
    let wanted: Vec<String> = pods
        .iter()
        .map(|p| format!("{name}-{}", p.port()))
        .collect();
    for p in pods {
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-{}", p.port()), "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": p.port()}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]});
        let _ = slices.create(&slice).await;
    }
    for s in old["items"].as_array().unwrap() {
        let n = s["metadata"]["name"].as_str().unwrap();
        if !wanted.iter().any(|w| w == n) {
            slices.delete(n, &Default::default()).await.unwrap();
        }
    }
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    match client.get(url).send().await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

async fn until<T, F, Fut>(what: &str, secs: u64, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    minik8s_testkit::until(secs, what, f).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_routes_reports_and_follows_changes() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    ensure_class(&client, "minik8s").await;
    let class = api(&client, "networking.k8s.io/v1", "IngressClass", None)
        .get("minik8s")
        .await
        .unwrap();
    assert_eq!(class["spec"]["controller"], "minik8s.io/ingress");
    let (hello, world, world2) = (pod("hello").await, pod("world").await, pod("world-2").await);
    service(&client, "hello", &[hello]).await;
    service(&client, "world", &[world]).await;

    let informers = SharedInformers::new(&client);
    let sync = Sync::new(
        client.clone(),
        &informers,
        Settings {
            class: "minik8s".into(),
            address: Some("192.0.2.10".into()),
        },
    );
    let proxy = sync.proxy.clone();
    informers.start();
    informers.wait_synced().await;
    tokio::spawn(sync.run());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve_http(listener));

    // The course's "DNS" example as an Ingress, without a class: the default one.
    let ingresses = api(&client, "networking.k8s.io/v1", "Ingress", Some("default"));
    let created = ingresses
        .create(&json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "hello"},
            "spec": {"rules": [{"host": "hello.world.minik8s", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "hello", "port": {"number": 80}}}},
                {"path": "/world", "pathType": "Prefix", "backend": {"service": {"name": "world", "port": {"name": "http"}}}},
                {"path": "/missing", "pathType": "Prefix", "backend": {"service": {"name": "nowhere", "port": {"number": 80}}}},
                {"path": "/noport", "pathType": "Exact", "backend": {"service": {"name": "hello", "port": {"name": "grpc"}}}}]}}]}}))
        .await
        .unwrap();
    assert_eq!(
        created["spec"]["ingressClassName"], "minik8s",
        "DefaultIngressClass admission"
    );
    let http = reqwest::Client::builder()
        .resolve("hello.world.minik8s", addr)
        .build()
        .unwrap();
    let base = format!("http://hello.world.minik8s:{}", addr.port());
    until("the Ingress served", 10, || async {
        match get(&http, &format!("{base}/world/x")).await {
            (200, b) if b == "world" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(get(&http, &format!("{base}/")).await, (200, "hello".into()));
    assert_eq!(
        get(&http, &format!("{base}/missing")).await.0,
        503,
        "that path only"
    );
    assert_eq!(get(&http, &format!("{base}/noport")).await.0, 503);
    // Exact: only /noport itself; below it the `/` Prefix rule serves.
    assert_eq!(get(&http, &format!("{base}/noport/x")).await.0, 200);
    // The status has the address; the event names the missing Service.
    until("status.loadBalancer", 10, || async {
        let i = ingresses.get("hello").await.unwrap();
        if i["status"]["loadBalancer"]["ingress"] == json!([{"ip": "192.0.2.10"}]) {
            Ok(())
        } else {
            Err(i["status"].to_string())
        }
    })
    .await;
    until("a ServiceNotFound event", 10, || async {
        let ev = api(&client, "v1", "Event", Some("default"))
            .list(&ListParams::default().fields("involvedObject.name=hello"))
            .await
            .unwrap();
        let items = ev["items"].as_array().unwrap();
        let found = items.iter().any(|e| {
            e["reason"] == "ServiceNotFound"
                && e["message"] == "service \"default/nowhere\" not found"
        });
        let port = items.iter().any(|e| {
            e["reason"] == "ServicePortNotFound"
                && e["message"] == "service \"default/hello\" has no port grpc"
        });
        if found && port {
            Ok(())
        } else {
            Err(ev.to_string())
        }
    })
    .await;

    // Endpoints changed under traffic: world → world + world-2 → world-2, no failed request.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let seen2 = Arc::new(AtomicUsize::new(0));
    let traffic = {
        let (http, url, stop, failures, seen2) = (
            http.clone(),
            format!("{base}/world"),
            stop.clone(),
            failures.clone(),
            seen2.clone(),
        );
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                match get(&http, &url).await {
                    (200, b) if b == "world-2" => {
                        seen2.fetch_add(1, Ordering::Relaxed);
                    }
                    (200, _) => {}
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
            }
            n
        })
    };
    set_endpoints(&client, "world", &[world, world2]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_endpoints(&client, "world", &[world2]).await;
    until("only world-2 answers", 10, || async {
        match get(&http, &format!("{base}/world")).await {
            (200, b) if b == "world-2" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let requests = traffic.await.unwrap();
    assert!(requests > 20, "{requests} requests");
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "failed requests during the change"
    );
    assert!(seen2.load(Ordering::Relaxed) > 0);

    // The Ingress pointed at another backend: applied within a second.
    let mut ing: Value = ingresses.get("hello").await.unwrap();
    ing["spec"]["rules"][0]["http"]["paths"][1]["backend"]["service"] =
        json!({"name": "hello", "port": {"number": 80}});
    ingresses.replace("hello", &ing).await.unwrap();
    let changed = Instant::now();
    until("the new backend", 5, || async {
        match get(&http, &format!("{base}/world")).await {
            (200, b) if b == "hello" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        changed.elapsed() < Duration::from_secs(1),
        "{:?}",
        changed.elapsed()
    );

    // kubectl's columns.
    let out = std::process::Command::new(minik8s_testkit::real_kubectl())
        .args(["--server", &server.url, "get", "ingress"])
        .output()
        .expect("running the real kubectl (1.37)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let header: Vec<&str> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
        "{text}"
    );
    let row: Vec<&str> = text
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        [
            "hello",
            "minik8s",
            "hello.world.minik8s",
            "192.0.2.10",
            "80"
        ],
        "{text}"
    );
    // Bad input: 422 with the field path.
    let bad = ingresses
        .create(&json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "bad"},
            "spec": {"rules": [{"host": "10.0.0.1", "http": {"paths": [
                {"path": "/", "pathType": "Regex", "backend": {"service": {"name": "hello", "port": {"number": 80}}}}]}}]}}))
        .await
        .unwrap_err();
    let body = bad.to_string();
    assert_eq!(bad.api().map(|a| a.code), Some(422), "{body}");
    assert!(
        body.contains("spec.rules[0].host")
            && body.contains("spec.rules[0].http.paths[0].pathType"),
        "{body}"
    );
}
