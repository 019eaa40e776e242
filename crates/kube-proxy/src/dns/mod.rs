//! Cluster DNS, served by kube-proxy on every node (a node-local DNS, as
//! NodeLocal DNSCache is in Kubernetes, but answering from the informers'
//! caches itself instead of asking CoreDNS).
//!
//! ```text
//!  pod ── udp/tcp 53 ──▶ 10.96.0.10 (on the node's lo) ──▶ this server
//!                         <svc>.<ns>.svc.cluster.local            → ClusterIP
//!                         <svc>.<ns>.svc.cluster.local (headless) → ready endpoint IPs
//!                         <host>.<svc>.<ns>.svc.cluster.local     → that endpoint's IP
//!                         _<port>._<proto>.<svc>.<ns>.svc...      → SRV (the Service, or each endpoint)
//!                         <d>.<c>.<b>.<a>.in-addr.arpa            → PTR (Service and endpoint addresses)
//!                         <a-b-c-d>.<ns>.pod.cluster.local        → a.b.c.d
//!                         ExternalName services                   → CNAME
//!                         Ingress hosts (exact, *.wildcard)       → the Ingress' status IPs
//!                         anything else ──▶ forwarded upstream (if configured)
//! ```
//!
//! [`Zone::build`] turns Services and EndpointSlices into a name table (pure,
//! `zone.rs`), [`Zone::answer`] answers one query message (pure), and
//! [`serve`] is the UDP + TCP shell around them. The zone is rebuilt lazily: an informer event
//! only marks it stale, and the next query rebuilds it once.

mod zone;

pub use zone::{error_response, Lookup, Target, Zone, TTL};

use anyhow::Context;
use hickory_proto::op::{Message, ResponseCode};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use minik8s_client::informer::Cache;
use minik8s_client::SharedInformers;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Queries forwarded upstream at once. Each waits up to 2 s with its own
/// socket, so a flood of outside names with a slow upstream would otherwise
/// pile up tasks and file descriptors; over the limit the answer is SERVFAIL
/// at once (CoreDNS' forward plugin has `max_concurrent` for the same reason).
/// Names in the cluster domain are answered from memory and never wait.
const MAX_FORWARDED: usize = 512;

/// A DNS-over-TCP connection with no query for this long is closed (CoreDNS' idle timeout).
const TCP_IDLE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (port 53 on the cluster DNS IP, normally).
    pub listen: SocketAddr,
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// Servers for names outside the cluster domain (none: SERVFAIL).
    pub upstreams: Vec<SocketAddr>,
}

/// The zone, rebuilt from the caches when an event marked it stale.
#[derive(Clone)]
pub struct Resolver {
    services: Cache<Service>,
    slices: Cache<EndpointSlice>,
    ingresses: Cache<Ingress>,
    stale: Arc<AtomicBool>,
    zone: Arc<RwLock<Arc<Zone>>>,
    domain: String,
    upstreams: Vec<SocketAddr>,
    /// Permits for queries forwarded upstream ([`MAX_FORWARDED`]).
    forwarding: Arc<tokio::sync::Semaphore>,
}

impl Resolver {
    /// Registers on `informers` (before they start).
    pub fn new(informers: &SharedInformers, cfg: &Config) -> Resolver {
        let stale = Arc::new(AtomicBool::new(true));
        let (s1, s2, s3) = (stale.clone(), stale.clone(), stale.clone());
        informers
            .on_event::<Service>(move |_| s1.store(true, Ordering::Release))
            .expect("registered before start");
        informers
            .on_event::<EndpointSlice>(move |_| s2.store(true, Ordering::Release))
            .expect("registered before start");
        informers
            .on_event::<Ingress>(move |_| s3.store(true, Ordering::Release))
            .expect("registered before start");
        Resolver {
            services: informers.cache(),
            slices: informers.cache(),
            ingresses: informers.cache(),
            stale,
            zone: Arc::default(),
            domain: cfg.domain.clone(),
            upstreams: cfg.upstreams.clone(),
            forwarding: Arc::new(tokio::sync::Semaphore::new(MAX_FORWARDED)),
        }
    }

    ///
    /// The rebuild holds the zone's write lock throughout: a query arriving
    /// meanwhile (a resolver sends A and AAAA at once) waits for the new zone
    /// instead of answering from the old one, and two rebuilds never race to
    /// store theirs (the older landing last would stay until the next event).
    fn zone(&self) -> Arc<Zone> {
        if self.stale.load(Ordering::Acquire) {
            let mut current = self.zone.write().unwrap_or_else(|p| p.into_inner());
            // Another query may have rebuilt it while this one waited for the lock.
            if self.stale.swap(false, Ordering::AcqRel) {
                let mut z = Zone::build(&self.domain, &self.services.list(), &self.slices.list());
                z.hosts = crate::ingress::hosts::Hosts::build(&self.ingresses.list());
                *current = Arc::new(z);
            }
            return current.clone();
        }
        self.zone.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The wire response to one wire request (None: not even a DNS header).
    pub async fn resolve(&self, request: &[u8]) -> Option<Vec<u8>> {
        let msg = Message::from_vec(request).ok()?;
        if let Some(resp) = self.zone().answer(&msg) {
            return resp.to_vec().ok();
        }
        let Ok(_permit) = self.forwarding.try_acquire() else {
            tracing::debug!("too many queries forwarded upstream at once");
            return error_response(&msg, ResponseCode::ServFail).to_vec().ok();
        };
        for upstream in &self.upstreams {
            match forward(*upstream, request).await {
                Ok(bytes) => return Some(bytes),
                Err(e) => tracing::debug!(%upstream, error = %e, "upstream DNS"),
            }
        }
        error_response(&msg, ResponseCode::ServFail).to_vec().ok()
    }
}

async fn forward(upstream: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let bind: SocketAddr = if upstream.is_ipv4() {
        "0.0.0.0:0".parse().expect("addr")
    } else {
        "[::]:0".parse().expect("addr")
    };
    let sock = UdpSocket::bind(bind).await?;
    sock.connect(upstream).await?;
    sock.send(request).await?;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(2), sock.recv(&mut buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))??;
    buf.truncate(n);
    Ok(buf)
}

/// The server's sockets, bound before serving so a taken port is reported at start.
pub struct Sockets {
    udp: UdpSocket,
    tcp: TcpListener,
}

pub async fn bind(listen: SocketAddr) -> std::io::Result<Sockets> {
    // The error names the address: a port taken by another resolver is the
    // usual cause, and "address in use" alone does not say which.
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("listening on {listen}: {e}"));
    Ok(Sockets {
        udp: UdpSocket::bind(listen).await.map_err(named)?,
        tcp: TcpListener::bind(listen).await.map_err(named)?,
    })
}

/// Serves DNS over UDP and TCP until the process ends.
pub async fn serve(resolver: Resolver, sockets: Sockets) -> std::io::Result<()> {
    let Sockets { udp, tcp } = sockets;
    let udp = Arc::new(udp);
    tracing::info!(listen = ?udp.local_addr(), "cluster DNS listening");
    let r = resolver.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = tcp.accept().await else {
                continue;
            };
            let r = r.clone();
            tokio::spawn(async move {
                if let Err(e) = serve_tcp(r, stream).await {
                    tracing::debug!(error = %e, "DNS over TCP");
                }
            });
        }
    });
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, peer) = udp.recv_from(&mut buf).await?;
        let request = buf[..n].to_vec();
        let (udp, r) = (udp.clone(), resolver.clone());
        tokio::spawn(async move {
            if let Some(resp) = r.resolve(&request).await {
                let _ = udp.send_to(&resp, peer).await;
            }
        });
    }
}

/// DNS over TCP: each message is preceded by its length (two bytes).
async fn serve_tcp(r: Resolver, mut stream: TcpStream) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            // Closed by the client, or idle too long.
            Ok(Err(_)) | Err(_) => return Ok(()),
        }
        let mut request = vec![0u8; u16::from_be_bytes(len) as usize];
        stream.read_exact(&mut request).await?;
        let Some(resp) = r.resolve(&request).await else {
            return Ok(());
        };
        stream.write_all(&(resp.len() as u16).to_be_bytes()).await?;
        stream.write_all(&resp).await?;
    }
}

/// Creates `kube-system/kube-dns` with `ip` as its ClusterIP (as the DNS
/// add-on does in Kubernetes), so the apiserver never hands `ip` to another
/// Service. An existing kube-dns is kept; one with another IP is an error.
pub async fn ensure_service(client: &minik8s_client::Client, ip: Ipv4Addr) -> anyhow::Result<()> {
    // Every node's kube-proxy does this at once, often while the apiserver
    // is still starting: a loser of the race may see "IP already allocated"
    // before the winner's Service is readable, or the namespace may not exist
    // yet. So ask again for a while before giving up, as a controller would.
    let mut last = None;
    for attempt in 0..30u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 + 100 * u64::from(attempt.min(8)))).await;
        }
        match ensure_service_once(client, ip).await {
            Ok(EnsureOutcome::Done) => return Ok(()),
            Ok(EnsureOutcome::Mismatch(have)) => anyhow::bail!(
                "kube-system/kube-dns has clusterIP {have}, but --cluster-dns is {ip}"
            ),
            Err(e) => {
                tracing::info!(attempt, error = %e, "kube-system/kube-dns not settled yet; asking again");
                last = Some(e);
            }
        }
    }
    Err(last.expect("at least one attempt"))
        .with_context(|| format!("creating kube-system/kube-dns with clusterIP {ip}"))
}

enum EnsureOutcome {
    Done,
    /// The Service exists with another clusterIP: asking again will not help.
    Mismatch(String),
}

async fn ensure_service_once(
    client: &minik8s_client::Client,
    ip: Ipv4Addr,
) -> anyhow::Result<EnsureOutcome> {
    let api = client.dynamic(minik8s_api::registry::of::<Service>(), Some("kube-system"));
    let svc = serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": ip.to_string(), "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}});
    let existing = match api.create(&svc).await {
        Ok(_) => return Ok(EnsureOutcome::Done),
        // AlreadyExists, or "IP already allocated" when another node's
        // allocation came first: the Service that exists decides.
        Err(e) => match api.get("kube-dns").await {
            Ok(existing) => existing,
            Err(get) => anyhow::bail!("create: {e}; get: {get}"),
        },
    };
    let have = existing["spec"]["clusterIP"].as_str().unwrap_or_default();
    if have == ip.to_string() {
        Ok(EnsureOutcome::Done)
    } else {
        Ok(EnsureOutcome::Mismatch(have.to_string()))
    }
}

/// `ip addr <verb> <ip>/32 dev lo`.
async fn lo_address(verb: &str, ip: Ipv4Addr) -> anyhow::Result<()> {
    let mut cmd = tokio::process::Command::new("ip");
    cmd.args(["addr", verb, &format!("{ip}/32"), "dev", "lo"]);
    node_tools::run(cmd, None).await?;
    Ok(())
}

/// Removes `ip/32` from `lo` if it is there (`kube-proxy --cleanup`).
pub async fn remove_local_address(ip: Ipv4Addr) -> anyhow::Result<()> {
    let mut show = tokio::process::Command::new("ip");
    show.args(["-4", "-o", "addr", "show", "dev", "lo"]);
    let shown = node_tools::run(show, None).await?;
    if shown.contains(&format!(" {ip}/32 ")) {
        lo_address("del", ip).await?;
    }
    Ok(())
}

/// Adds `ip/32` to `lo` unless the node already has it, so the server can
/// bind it and pods reach it through their default route (the node).
pub async fn ensure_local_address(ip: Ipv4Addr) -> anyhow::Result<()> {
    if std::net::UdpSocket::bind((ip, 0)).is_ok() {
        return Ok(());
    }
    lo_address("add", ip).await
}

/// The nameservers of a resolv.conf, except loopback ones (they would point
/// back at the node itself, or at nothing inside a pod's network).
pub fn upstreams_from_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
        .filter(|ip| !ip.is_loopback())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::{Name, RecordType};
    use serde_json::json;

    fn query(name: &str) -> Vec<u8> {
        let mut req = Message::query();
        req.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        req.to_vec().unwrap()
    }

    #[tokio::test]
    async fn a_flood_of_outside_names_is_bounded_and_cluster_names_still_answer() {
        // An upstream that never answers: every forwarded query waits 2 s.
        let black_hole = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let resolver = Resolver {
            services: Cache::new(),
            slices: Cache::new(),
            ingresses: Cache::new(),
            stale: Arc::new(AtomicBool::new(true)),
            zone: Arc::default(),
            domain: "cluster.local.".into(),
            upstreams: vec![black_hole.local_addr().unwrap()],
            forwarding: Arc::new(tokio::sync::Semaphore::new(8)),
        };
        let waiting: Vec<_> = (0..8)
            .map(|i| {
                let r = resolver.clone();
                tokio::spawn(async move { r.resolve(&query(&format!("n{i}.example.org."))).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        let over = resolver.resolve(&query("more.example.org.")).await.unwrap();
        let over = Message::from_vec(&over).unwrap();
        assert_eq!(over.metadata.response_code, ResponseCode::ServFail);
        let local = resolver
            .resolve(&query("nope.default.svc.cluster.local."))
            .await
            .unwrap();
        let local = Message::from_vec(&local).unwrap();
        assert_eq!(local.metadata.response_code, ResponseCode::NXDomain);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "answered without waiting for the upstream: {:?}",
            started.elapsed()
        );
        // The waiting ones fail after their 2 s and free their permits.
        for w in waiting {
            let resp = Message::from_vec(&w.await.unwrap().unwrap()).unwrap();
            assert_eq!(resp.metadata.response_code, ResponseCode::ServFail);
        }
        assert_eq!(resolver.forwarding.available_permits(), 8);
    }

    /// A resolver asks A and AAAA at once: the query that does not rebuild
    /// the zone must still answer from the new one (before, it could read the
    /// empty zone and send a cluster name upstream: `nslookup` failed).
    #[test]
    fn queries_during_a_rebuild_answer_from_the_new_zone() {
        let services = Cache::new();
        // Enough Services that a rebuild takes a while.
        for i in 0..20_000 {
            let svc: Service = serde_json::from_value(
                json!({"metadata": {"name": format!("s{i}"), "namespace": "default"},
                "spec": {"clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1)}}),
            )
            .unwrap();
            services.upsert(Arc::new(svc));
        }
        let resolver = Resolver {
            services,
            slices: Cache::new(),
            ingresses: Cache::new(),
            stale: Arc::new(AtomicBool::new(true)),
            zone: Arc::default(),
            domain: "cluster.local.".into(),
            upstreams: vec![],
            forwarding: Arc::new(tokio::sync::Semaphore::new(8)),
        };
        let lookups: Vec<_> = (0..4)
            .map(|_| {
                let r = resolver.clone();
                std::thread::spawn(move || {
                    r.zone()
                        .lookup("s7.default.svc.cluster.local.", RecordType::A)
                })
            })
            .collect();
        for l in lookups {
            let found = l.join().unwrap();
            assert_eq!(
                found,
                Lookup::Found(Target::A(vec!["10.96.0.8".parse().unwrap()]))
            );
        }
    }

    #[test]
    fn upstreams_skip_loopback_resolvers() {
        let conf = "# generated\nnameserver 127.0.0.53\nnameserver 192.168.1.1\nsearch lan\nnameserver ::1\n";
        assert_eq!(
            upstreams_from_resolv_conf(conf),
            vec!["192.168.1.1:53".parse().unwrap()]
        );
    }
}
