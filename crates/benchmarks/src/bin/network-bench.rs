//! `network-bench`: kube-proxy's rule sync and the cluster DNS, measured.
//!
//! 1. Rule sync for SERVICES Services × ENDPOINTS endpoints (default 1,000 × 10),
//!    plain and again with ClientIP affinity and Local traffic policies:
//!    the pure computation (desired chains + diff) and the real
//!    `iptables-restore --noflush` into a private network namespace, for a
//!    full sync from nothing and for one endpoint change; the ipvs backend's
//!    pure diff for the same two cases. Needs root and iptables.
//! 2. Cluster DNS queries per second from one client: an in-process apiserver
//!    (embedded store) with SERVICES Services, kube-proxy's DNS on a free
//!    loopback port, and one client sending A queries one after another.
//!
//! Prints a Markdown report; not a test. Usage: `network-bench [SERVICES] [ENDPOINTS]`.

use futures::StreamExt;
use kube_proxy::{iptables, ipvs, ServicePort};
use minik8s_api::k8s::api::core::v1::Service;
use minik8s_api::registry;
use minik8s_client::Client;
use minik8s_testkit::{free_port, Backend, TestServer};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NETNS: &str = "mk8s-bench";

/// The Services of the benchmark; `policies`: each also with ClientIP
/// affinity, a NodePort and both traffic policies Local (this node holding
/// the last three endpoints), the rules issue 44 adds.
fn ports(services: usize, endpoints: usize, policies: bool) -> Vec<ServicePort> {
    let mut ports = plain_ports(services, endpoints);
    if policies {
        for (i, p) in ports.iter_mut().enumerate() {
            p.affinity_seconds = Some(10800);
            p.node_port = Some(30000 + (i % 2768) as u16);
            p.internal_local = true;
            p.external_local = true;
            p.local_endpoints = p.endpoints[p.endpoints.len().saturating_sub(3)..].to_vec();
        }
    }
    ports
}

fn plain_ports(services: usize, endpoints: usize) -> Vec<ServicePort> {
    (0..services)
        .map(|i| ServicePort {
            namespace: "default".into(),
            service: format!("svc-{i}"),
            port_name: "http".into(),
            protocol: "TCP".into(),
            cluster_ip: format!("10.96.{}.{}", i / 250, i % 250 + 1),
            port: 80,
            node_port: None,
            endpoints: (0..endpoints)
                .map(|e| (format!("10.244.{}.{}", e, i % 250 + 2), 8080))
                .collect(),
            ..Default::default()
        })
        .collect()
}

fn restore(input: &str) -> Duration {
    let t = Instant::now();
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            NETNS,
            "iptables-restore",
            "-w",
            "--noflush",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .expect("iptables-restore");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "iptables-restore failed");
    t.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn rule_sync(services: usize, endpoints: usize, policies: bool) {
    let _ = Command::new("ip")
        .args(["netns", "del", NETNS])
        .stderr(Stdio::null())
        .status();
    let ok = Command::new("ip")
        .args(["netns", "add", NETNS])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "creating a network namespace needs root");
    let cidr = Some("10.244.0.0/16");
    let mut p = ports(services, endpoints, policies);

    let t = Instant::now();
    let full = iptables::desired(&p, cidr);
    let input = iptables::restore_input(&Default::default(), &full).unwrap();
    let compute_full = t.elapsed();
    let rules = input.lines().filter(|l| l.starts_with("-A")).count();
    let apply_full = restore(&input);

    let mut compute_one = Vec::new();
    let mut apply_one = Vec::new();
    let mut current = full;
    for round in 0..20 {
        let svc = (round * 37) % services;
        p[svc].endpoints[0].0 = format!("10.244.200.{}", round + 1);
        let t = Instant::now();
        let desired = iptables::desired(&p, cidr);
        let input = iptables::restore_input(&current, &desired).unwrap();
        compute_one.push(t.elapsed());
        apply_one.push(restore(&input));
        current = desired;
    }
    let _ = Command::new("ip").args(["netns", "del", NETNS]).status();

    let p0 = ports(services, endpoints, policies);
    let node = ["192.168.77.11".parse().unwrap()];
    let t = Instant::now();
    let full = ipvs::desired(&p0, &node);
    let ipvs_full = ipvs::changes(&Default::default(), &full);
    let ipvs_compute_full = t.elapsed();
    let mut p1 = p0.clone();
    p1[500 % services].endpoints[3].0 = "10.244.201.1".into();
    let t = Instant::now();
    let one = ipvs::changes(&full, &ipvs::desired(&p1, &node));
    let ipvs_compute_one = t.elapsed();

    let what = if policies {
        ", each with ClientIP affinity, a NodePort and both traffic policies Local"
    } else {
        ""
    };
    println!("## Rule sync: {services} Services × {endpoints} endpoints{what}\n");
    println!("| backend | case | compute (desired + diff) | apply | what is written |");
    println!("|---|---|---:|---:|---|");
    println!(
        "| iptables | full sync | {} | {} | {} rules, {} KiB of iptables-restore input |",
        ms(compute_full),
        ms(apply_full),
        rules,
        input.len() / 1024
    );
    println!(
        "| iptables | one endpoint change (median of 20) | {} | {} | one KUBE-SVC chain and its KUBE-SEP chains |",
        ms(median(compute_one)),
        ms(median(apply_one))
    );
    println!(
        "| ipvs | full sync | {} | (no IPVS in this kernel) | {} netlink changes |",
        ms(ipvs_compute_full),
        ipvs_full.len()
    );
    println!(
        "| ipvs | one endpoint change | {} | (no IPVS in this kernel) | {} netlink changes |",
        ms(ipvs_compute_one),
        one.len()
    );
    println!();
}

/// An A query for `name` (RD set), as a resolver sends it.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

async fn dns_qps(services: usize) -> anyhow::Result<()> {
    let server = TestServer::start_with(Backend::Embedded, |_| {}).await;
    let client = Client::new(&server.url);
    let api = client.dynamic(registry::of::<Service>(), Some("default"));
    let created: Vec<bool> = futures::stream::iter(0..services)
        .map(|i| {
            let api = api.clone();
            async move {
                let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("svc-{i}")},
                                 "spec": {"ports": [{"port": 80}]}});
                api.create(&svc).await.is_ok()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(created.iter().all(|c| *c), "creating services failed");
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let cfg = kube_proxy::dns::Config {
        listen,
        domain: "cluster.local".into(),
        upstreams: vec![],
    };
    tokio::spawn(kube_proxy::run(
        client.clone(),
        kube_proxy::Parts {
            dns: Some(cfg),
            ..Default::default()
        },
    ));

    let total = 20_000usize;
    let report = tokio::task::spawn_blocking(move || {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        sock.connect(listen).unwrap();
        let mut buf = [0u8; 512];
        let last = format!("svc-{}.default.svc.cluster.local", services - 1);
        // Ready once the last Service resolves (NOERROR with an answer).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            sock.send(&query(1, &last)).unwrap();
            if let Ok(n) = sock.recv(&mut buf) {
                if n > 12 && buf[3] & 0x0f == 0 && buf[7] > 0 {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the DNS never answered for {last}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut latencies = Vec::with_capacity(total);
        let t = Instant::now();
        for i in 0..total {
            let name = format!("svc-{}.default.svc.cluster.local", (i * 7919) % services);
            let q = Instant::now();
            sock.send(&query(i as u16, &name)).unwrap();
            let n = sock.recv(&mut buf).unwrap();
            assert!(n > 12 && buf[7] == 1, "no answer for {name}");
            latencies.push(q.elapsed());
        }
        let secs = t.elapsed().as_secs_f64();
        latencies.sort();
        (
            total as f64 / secs,
            latencies[total / 2],
            latencies[total * 99 / 100],
        )
    })
    .await?;
    println!("## Cluster DNS: one client, {services} Services in the zone\n");
    println!("| queries | queries/s | p50 | p99 |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {total} sequential A queries over UDP | {:.0} | {:.0} µs | {:.0} µs |",
        report.0,
        report.1.as_secs_f64() * 1e6,
        report.2.as_secs_f64() * 1e6
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = benchmarks::numeric_args();
    let services = args.first().copied().unwrap_or(1000).max(1);
    let endpoints = args.get(1).copied().unwrap_or(10).max(1);
    rule_sync(services, endpoints, false);
    rule_sync(services, endpoints, true);
    dns_qps(services).await
}
