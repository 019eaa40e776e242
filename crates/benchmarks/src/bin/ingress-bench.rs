//! `ingress-bench`: HTTP requests per second and latency through kube-proxy's
//! ingress proxy, against the same requests straight to the backend and
//! through nginx (Debian's package) configured for the same routes, in one run.
//!
//! ```text
//!   load (C keep-alive connections, N requests) ─┬─▶ backend                     direct (the floor)
//!                                                ├─▶ minik8s ingress ─▶ backend  Ingress + Service + EndpointSlice
//!                                                └─▶ nginx proxy     ─▶ backend  server_name + location + upstream keepalive
//! ```
//!
//! The backend stands for the pod: an nginx with one worker answering
//! `return 200`, so the proxies are what is measured. The ingress proxy
//! runs on its own 2-thread runtime (as kube-proxy would), nginx with
//! `worker_processes auto`. Both route `Host: hello.world.minik8s`, path
//! `/world` (Prefix) among `/` and `/world`. nginx is unpacked from Debian's
//! package into `target/bench-nginx` (`apt-get download`, never installed,
//! so no nginx service starts). Prints a Markdown report; not a test.
//!
//! Usage: `ingress-bench [REQUESTS] [CONNECTIONS]` (default 20000 16).

use anyhow::{bail, Context};
use benchmarks::{machine, percentile};
use kube_proxy::ingress::sync::{ensure_class, Settings, Sync};
use minik8s_api::registry;
use minik8s_client::{Client, SharedInformers};
use minik8s_testkit::{free_port, Backend, TestServer};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HOST: &str = "hello.world.minik8s";

/// nginx unpacked from Debian's package (downloaded once into target/).
fn nginx_binary() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-nginx");
    let bin = dir.join("x/usr/sbin/nginx");
    if bin.exists() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir)?;
    let download = || {
        Command::new("apt-get")
            .args([
                "download",
                "-q",
                "-o",
                "APT::Sandbox::User=root",
                "nginx",
                "nginx-common",
            ])
            .current_dir(&dir)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !download() {
        Command::new("apt-get").args(["update", "-q"]).status()?;
        if !download() {
            bail!("apt-get download nginx failed (Debian's package is the comparison)");
        }
    }
    for deb in std::fs::read_dir(&dir)?.flatten() {
        if deb.path().extension().is_some_and(|e| e == "deb") {
            let ok = Command::new("dpkg")
                .arg("-x")
                .arg(deb.path())
                .arg(dir.join("x"))
                .status()?;
            if !ok.success() {
                bail!("dpkg -x {}", deb.path().display());
            }
        }
    }
    Ok(bin)
}

/// One nginx with `conf` (an `http {}` body), in a prefix of its own (kept
/// for the process's life, removed after).
struct Nginx {
    child: Child,
    _prefix: tempfile::TempDir,
}

impl Nginx {
    fn start(bin: &Path, workers: &str, http: &str) -> anyhow::Result<Nginx> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("logs"))?;
        let conf = format!(
            "worker_processes {workers};\nuser root;\npid {p}/nginx.pid;\nerror_log {p}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {p}; proxy_temp_path {p}; fastcgi_temp_path {p};\n\
             uwsgi_temp_path {p}; scgi_temp_path {p};\n{http}\n}}\n",
            p = dir.path().display()
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf)?;
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&path)
            .args(["-g", "daemon off;"])
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting nginx")?;
        Ok(Nginx {
            child,
            _prefix: dir,
        })
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (SIGKILL would orphan them).
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Waits until `url` (with `Host: HOST`) answers 200.
async fn until_served(http: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(url).header("host", HOST).send().await {
            if r.status() == 200 {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("{url} never answered 200");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `total` GETs of `url` over `connections` keep-alive connections: req/s and
/// sorted latencies in ms.
async fn load(url: &str, total: usize, connections: usize) -> anyhow::Result<(f64, Vec<f64>)> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .build()?;
    until_served(&http, url).await?;
    // Warm the pools of both proxies.
    for _ in 0..connections * 4 {
        http.get(url)
            .header("host", HOST)
            .send()
            .await?
            .bytes()
            .await?;
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|i| {
            let (http, url) = (http.clone(), url.to_string());
            let n = total / connections + usize::from(i < total % connections);
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = Instant::now();
                    let r = http.get(&url).header("host", HOST).send().await?;
                    let status = r.status();
                    r.bytes().await?;
                    if status != 200 {
                        bail!("{url}: {status}");
                    }
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                Ok::<_, anyhow::Error>(times)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(total);
    for t in tasks {
        all.extend(t.await??);
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    Ok((rate, all))
}

/// The apiserver, the Service, its EndpointSlice (the backend) and the
/// Ingress; the ingress proxy on its own runtime. Returns its port.
async fn minik8s_ingress(backend: u16) -> anyhow::Result<(TestServer, u16)> {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let api =
        |kind: &str, v: &str| client.dynamic(registry::by_kind(v, kind).unwrap(), Some("default"));
    for name in ["hello-page", "world-page"] {
        api("Service", "v1")
            .create(
                &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"ports": [{"name": "http", "port": 80}]}}),
            )
            .await?;
        api("EndpointSlice", "discovery.k8s.io/v1")
            .create(
                &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": name, "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": backend}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}),
            )
            .await?;
    }
    ensure_class(&client, "minik8s").await;
    api("Ingress", "networking.k8s.io/v1")
        .create(&json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "hello-world"},
            "spec": {"rules": [{"host": HOST, "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "hello-page", "port": {"number": 80}}}},
                {"path": "/world", "pathType": "Prefix", "backend": {"service": {"name": "world-page", "port": {"name": "http"}}}}]}}]}}))
        .await?;
    let port = free_port();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the ingress runtime");
        rt.block_on(async move {
            let informers = SharedInformers::new(&client);
            let settings = Settings {
                class: "minik8s".into(),
                address: None,
            };
            let sync = Sync::new(client.clone(), &informers, settings);
            let proxy = sync.proxy.clone();
            informers.start();
            informers.wait_synced().await;
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .expect("the ingress port");
            tokio::spawn(sync.run());
            let _ = ready_tx.send(());
            proxy.serve_http(listener).await
        })
    });
    ready_rx.await?;
    Ok((server, port))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let total = args.first().copied().unwrap_or(20_000);
    let connections = args.get(1).copied().unwrap_or(16);
    let bin = nginx_binary()?;

    let backend_port = free_port();
    let _backend = Nginx::start(
        &bin,
        "1",
        &format!("server {{ listen 127.0.0.1:{backend_port}; keepalive_requests 1000000; location / {{ return 200 \"hello\\n\"; }} }}"),
    )?;
    let proxy_port = free_port();
    let _nginx = Nginx::start(
        &bin,
        "auto",
        &format!(
            "upstream hello-page {{ server 127.0.0.1:{backend_port}; keepalive 64; }}\n\
             upstream world-page {{ server 127.0.0.1:{backend_port}; keepalive 64; }}\n\
             server {{ listen 127.0.0.1:{proxy_port}; server_name {HOST}; keepalive_requests 1000000;\n\
               location / {{ proxy_pass http://hello-page; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host $host; }}\n\
               location /world {{ proxy_pass http://world-page; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host $host; }}\n\
             }}"
        ),
    )?;
    let (_server, ingress_port) = minik8s_ingress(backend_port).await?;

    println!(
        "## ingress-bench ({})\n",
        chrono::Utc::now().format("%Y-%m-%d")
    );
    println!(
        "{} · {total} GETs of /world over {connections} keep-alive connections each\n",
        machine()
    );
    println!("| path | req/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    let mut rows = Vec::new();
    for (name, port) in [
        ("direct to the backend (floor)", backend_port),
        ("minik8s ingress proxy", ingress_port),
        ("nginx (Debian) as the proxy", proxy_port),
    ] {
        let (rate, times) = load(
            &format!("http://127.0.0.1:{port}/world"),
            total,
            connections,
        )
        .await?;
        let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
        println!("| {name} | {rate:.0} | {p50:.2} | {p99:.2} |");
        rows.push((name, rate, p50, p99));
    }
    let (_, floor, ..) = rows[0];
    let (_, ours, ..) = rows[1];
    let (_, nginx, ..) = rows[2];
    println!(
        "\nminik8s ingress: {:.2}× the floor's rate, {:.2}× nginx's.",
        ours / floor,
        ours / nginx
    );
    Ok(())
}
