//! Ingress end to end on real Docker: `examples/ingress.yaml` applied with the
//! real kubectl, served by kube-proxy's ingress proxy to busybox pods, reached
//! from the host (curl) and from a pod by name through the cluster DNS; a
//! wildcard host; TLS from a kubernetes.io/tls Secret checked by curl with
//! the CA; a rolling restart of the backends under traffic with no failed
//! request; and an Ingress moved to another backend within a second.
//!
//! The proxy listens on free ports here (port 80 may be a running quick
//! start's); the quick start and the lab serve port 80.

mod common;

use common::Cluster;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn kubectl_ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// curl from the host, `host` resolved to `ip` (as `/etc/hosts` or DNS would).
fn curl(host: &str, port: u16, ip: &str, url: &str, extra: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--resolve"])
        .arg(format!("{host}:{port}:{ip}"))
        .args(["-w", "\n%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.to_string(),
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// A CA and a certificate for `hosts` signed by it, with openssl as a user would.
fn certificates(dir: &Path, hosts: &[&str]) -> (String, String, String) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("running openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=ingress",
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
    ]);
    let sans: Vec<String> = hosts.iter().map(|h| format!("DNS:{h}")).collect();
    std::fs::write(
        dir.join("ext.cnf"),
        format!("subjectAltName={}\n", sans.join(",")),
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "tls.crt",
    ]);
    let path = |f: &str| dir.join(f).display().to_string();
    (path("ca.crt"), path("tls.crt"), path("tls.key"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_serves_the_example_by_path_host_and_tls_and_follows_changes() {
    let c =
        Cluster::start_with(|cidr| vec!["--cluster-dns".into(), Cluster::gateway_of(cidr)]).await;
    let gateway = Cluster::gateway_of(&c.pod_cidr);
    c.spawn_control_plane(controller_manager::Config::default());
    let (http_port, https_port) = (minik8s_testkit::free_port(), minik8s_testkit::free_port());
    let parts = kube_proxy::Parts {
        dns: Some(kube_proxy::dns::Config {
            listen: format!("{gateway}:53").parse().unwrap(),
            domain: "cluster.local".into(),
            upstreams: Vec::new(),
        }),
        ingress: Some(kube_proxy::ingress::Options {
            class: "minik8s".into(),
            address: Some(gateway.clone()),
            http: ([0, 0, 0, 0], http_port).into(),
            https: Some(([0, 0, 0, 0], https_port).into()),
        }),
        ..Default::default()
    };
    tokio::spawn(kube_proxy::run(c.client.clone(), parts));

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ingress.yaml");
    kubectl_ok(c.real_kubectl(&["apply", "-f", example.to_str().unwrap()]));
    for d in ["hello-page", "world-page"] {
        kubectl_ok(c.real_kubectl(&[
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=90s",
        ]));
    }
    // The address is published, and kubectl shows it with the class and host.
    minik8s_testkit::until(20, "the Ingress' address", || async {
        let out = kubectl_ok(c.real_kubectl(&["get", "ingress", "hello-world"]));
        let row: Vec<&str> = out
            .lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        (row.get(1..5) == Some(&["minik8s", "hello.world.minik8s", gateway.as_str(), "80"]))
            .then_some(())
            .ok_or(out)
    })
    .await;

    // From the host: by path, with Kubernetes' element-wise prefixes.
    let host = "hello.world.minik8s";
    let base = format!("http://{host}:{http_port}");
    let get = |path: &str| curl(host, http_port, &gateway, &format!("{base}{path}"), &[]);
    minik8s_testkit::until(20, "/world served by world-page", || async {
        let (code, body) = get("/world");
        (code == "200" && body.starts_with("world from world-page-"))
            .then_some(())
            .ok_or(format!("{code} {body}"))
    })
    .await;
    let (code, body) = get("/");
    assert!(
        code == "200" && body.starts_with("hello from hello-page-"),
        "{code} {body}"
    );
    // /worldwide is not under /world (element-wise): it is hello-page's, which has no such file.
    let (code, body) = get("/worldwide");
    assert_eq!(code, "404", "{body}");
    assert!(!body.contains("world from"), "{body}");

    // From a pod, by the host name through the cluster DNS.
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "minik8s/busybox:latest",
            "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}}))
    .await;
    let client = c
        .wait_pod("client", "running", 60, |p: &Value| {
            p["status"]["phase"] == "Running"
        })
        .await;
    let box_id = c
        .dockerd
        .container_of(client["metadata"]["uid"].as_str().unwrap(), "c");
    let url = format!("{base}/world");
    minik8s_testkit::until(20, "a pod reaches the Ingress host by name", || async {
        let out = c
            .dockerd
            .docker(&["exec", &box_id, "timeout", "5", "wget", "-qO-", &url]);
        out.starts_with("world from world-page-")
            .then_some(())
            .ok_or(out)
    })
    .await;

    // A wildcard host: one label under it, not two.
    kubectl_ok(c.real_kubectl(&[
        "create",
        "ingress",
        "apps",
        "--rule=*.apps.minik8s/*=world-page:80",
    ]));
    let wild = |name: &str| {
        curl(
            name,
            http_port,
            &gateway,
            &format!("http://{name}:{http_port}/world"),
            &[],
        )
    };
    minik8s_testkit::until(10, "foo.apps.minik8s served", || async {
        let (code, body) = wild("foo.apps.minik8s");
        (code == "200" && body.starts_with("world from"))
            .then_some(())
            .ok_or(format!("{code} {body}"))
    })
    .await;
    assert_eq!(
        wild("a.b.apps.minik8s").0,
        "404",
        "a wildcard covers one label"
    );

    // TLS from a Secret, checked by curl against the CA.
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = certificates(dir.path(), &[host]);
    kubectl_ok(c.real_kubectl(&[
        "create",
        "secret",
        "tls",
        "hello-tls",
        "--cert",
        &crt,
        "--key",
        &key,
    ]));
    kubectl_ok(c.real_kubectl(&[
        "patch",
        "ingress",
        "hello-world",
        "--type=merge",
        "-p",
        &json!({"spec": {"tls": [{"hosts": [host], "secretName": "hello-tls"}]}}).to_string(),
    ]));
    let https = format!("https://{host}:{https_port}/world");
    minik8s_testkit::until(10, "HTTPS with the Secret's certificate", || async {
        let (code, body) = curl(host, https_port, &gateway, &https, &["--cacert", &ca]);
        (code == "200" && body.starts_with("world from"))
            .then_some(())
            .ok_or(format!("{code} {body}"))
    })
    .await;
    let (code, _) = curl(
        host,
        https_port,
        &gateway,
        &https,
        &["--http2", "--cacert", &ca, "-o", "/dev/null"],
    );
    assert_eq!(code, "200", "HTTP/2 over TLS");

    // A rolling restart of both backends under traffic: not one failed request.
    let failures = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let proxy: std::net::SocketAddr = format!("{gateway}:{http_port}").parse().unwrap();
    let callers: Vec<_> = (0..4)
        .map(|i| {
            let (failures, served, stop) = (failures.clone(), served.clone(), stop.clone());
            let http = reqwest::Client::builder()
                .resolve(host, proxy)
                .build()
                .unwrap();
            let url = format!("{base}{}", if i % 2 == 0 { "/" } else { "/world" });
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match http.get(&url).send().await {
                        Ok(r) if r.status() == 200 => served.fetch_add(1, Ordering::Relaxed),
                        Ok(r) => {
                            eprintln!("{url}: {}", r.status());
                            failures.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(e) => {
                            eprintln!("{url}: {e}");
                            failures.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect();
    let old_pods = kubectl_ok(c.real_kubectl(&[
        "get",
        "pods",
        "-l",
        "app in (hello-page,world-page)",
        "-o",
        "name",
    ]));
    kubectl_ok(c.real_kubectl(&[
        "rollout",
        "restart",
        "deployment/hello-page",
        "deployment/world-page",
    ]));
    for d in ["hello-page", "world-page"] {
        kubectl_ok(c.real_kubectl(&[
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=120s",
        ]));
    }
    // Until every old pod is gone, so its endpoint left the proxy under traffic.
    minik8s_testkit::until(60, "the old pods gone", || async {
        let now = kubectl_ok(c.real_kubectl(&["get", "pods", "-o", "name"]));
        let left: Vec<&str> = old_pods
            .lines()
            .filter(|p| now.lines().any(|n| n == *p))
            .collect();
        left.is_empty().then_some(()).ok_or(format!("{left:?}"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in callers {
        t.await.unwrap();
    }
    let (ok, failed) = (
        served.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    assert!(ok > 100, "requests served during the restart: {ok}");
    assert_eq!(
        failed, 0,
        "failed requests during the restart ({ok} served)"
    );

    // The Ingress moved to another backend: served within a second.
    let started = Instant::now();
    kubectl_ok(c.real_kubectl(&[
        "patch", "ingress", "hello-world", "--type=json", "-p",
        r#"[{"op": "replace", "path": "/spec/rules/0/http/paths/1/backend/service/name", "value": "hello-page"}]"#,
    ]));
    loop {
        let (code, body) = get("/world");
        if code == "404" && !body.contains("world from") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "the change took {took:?}");
}
