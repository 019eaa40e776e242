//! Cluster DNS, served by kube-proxy on every node (a node-local DNS, as
//! NodeLocal DNSCache is in Kubernetes, but answering from the informers'
//! caches itself instead of asking CoreDNS).
//!
//! ```text
//!  pod ── udp/tcp 53 ──▶ 10.96.0.10 (on the node's lo) ──▶ this server
//!                         <svc>.<ns>.svc.cluster.local            → ClusterIP
//!                         <svc>.<ns>.svc.cluster.local (headless) → ready endpoint IPs
//!                         <host>.<svc>.<ns>.svc.cluster.local     → that endpoint's IP
//!                         <a-b-c-d>.<ns>.pod.cluster.local        → a.b.c.d
//!                         ExternalName services                   → CNAME
//!                         Ingress hosts (exact, *.wildcard)       → the Ingress' status IPs
//!                         anything else ──▶ forwarded upstream (if configured)
//! ```
//!
//! [`Zone::build`] turns Services and EndpointSlices into a name table (pure),
//! [`Zone::answer`] answers one query message (pure), and [`serve`] is the
//! UDP + TCP shell around them. The zone is rebuilt lazily: an informer event
//! only marks it stale, and the next query rebuilds it once.

use anyhow::Context;
use hickory_proto::op::{Message, Metadata, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use minik8s_client::informer::Cache;
use minik8s_client::SharedInformers;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Seconds a client may cache an answer (CoreDNS' kubernetes plugin uses 5).
pub const TTL: u32 = 5;

/// Queries forwarded upstream at once. Each waits up to 2 s with its own
/// socket, so a flood of outside names with a slow upstream would otherwise
/// pile up tasks and file descriptors; over the limit the answer is SERVFAIL
/// at once (CoreDNS' forward plugin has `max_concurrent` for the same reason).
/// Names in the cluster domain are answered from memory and never wait.
const MAX_FORWARDED: usize = 512;

/// A DNS-over-TCP connection with no query for this long is closed (CoreDNS' idle timeout).
const TCP_IDLE: Duration = Duration::from_secs(10);

/// What one name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    A(Vec<Ipv4Addr>),
    Cname(String),
}

/// The cluster's names: lowercase, without the trailing dot.
#[derive(Debug, Clone, Default)]
pub struct Zone {
    pub domain: String,
    pub names: HashMap<String, Target>,
    /// Ingress hosts, outside the cluster domain (ingress/hosts.rs).
    pub hosts: crate::ingress::hosts::Hosts,
}

/// The outcome of a lookup inside the cluster domain.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(Target),
    /// The name exists but has no record of the asked type (NOERROR, empty).
    NoData,
    NxDomain,
    /// Not in the cluster domain: forward it.
    NotOurs,
}

impl Zone {
    /// The names of `services` and their ready endpoints.
    pub fn build(domain: &str, services: &[Arc<Service>], slices: &[Arc<EndpointSlice>]) -> Zone {
        let domain = domain.trim_end_matches('.').to_lowercase();
        let mut names = HashMap::new();
        let mut by_service: HashMap<(String, String), Vec<&EndpointSlice>> = HashMap::new();
        for s in slices {
            let Some(svc) = s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
            else {
                continue;
            };
            let ns = s.metadata.namespace.clone().unwrap_or_default();
            by_service.entry((ns, svc.clone())).or_default().push(s);
        }
        for svc in services {
            let (Some(name), Some(spec)) = (&svc.metadata.name, &svc.spec) else {
                continue;
            };
            let ns = svc.metadata.namespace.clone().unwrap_or_default();
            let fqdn = format!("{name}.{ns}.svc.{domain}").to_lowercase();
            if spec.type_.as_deref() == Some("ExternalName") {
                if let Some(ext) = &spec.external_name {
                    names.insert(fqdn, Target::Cname(ext.trim_end_matches('.').to_string()));
                }
                continue;
            }
            let cluster_ip = spec.cluster_ip.as_deref().unwrap_or("");
            if !cluster_ip.is_empty() && cluster_ip != "None" {
                if let Ok(ip) = cluster_ip.parse() {
                    names.insert(fqdn, Target::A(vec![ip]));
                }
                continue;
            }
            // Headless: the ready endpoints, and each named endpoint by its hostname.
            let mut all = Vec::new();
            for slice in by_service
                .get(&(ns.clone(), name.clone()))
                .into_iter()
                .flatten()
            {
                for e in slice.endpoints.iter().flatten() {
                    if !e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true) {
                        continue;
                    }
                    let ips: Vec<Ipv4Addr> =
                        e.addresses.iter().filter_map(|a| a.parse().ok()).collect();
                    if let Some(h) = &e.hostname {
                        names.insert(format!("{h}.{fqdn}").to_lowercase(), Target::A(ips.clone()));
                    }
                    all.extend(ips);
                }
            }
            all.sort();
            all.dedup();
            names.insert(fqdn, Target::A(all));
        }
        Zone {
            domain,
            names,
            hosts: Default::default(),
        }
    }

    /// Resolves `name` (any case, with or without the trailing dot).
    pub fn lookup(&self, name: &str, qtype: RecordType) -> Lookup {
        let name = name.trim_end_matches('.').to_lowercase();
        let Some(inner) = name.strip_suffix(&format!(".{}", self.domain)) else {
            return match self.hosts.lookup(&name) {
                _ if name == self.domain => Lookup::NoData,
                Some(ips) if matches!(qtype, RecordType::A | RecordType::ANY) => {
                    Lookup::Found(Target::A(ips))
                }
                Some(_) => Lookup::NoData,
                None => Lookup::NotOurs,
            };
        };
        let found = match self.names.get(&name) {
            Some(t) => Some(t.clone()),
            None => pod_address(inner).map(|ip| Target::A(vec![ip])),
        };
        match found {
            Some(Target::Cname(c)) => Lookup::Found(Target::Cname(c)),
            Some(Target::A(ips)) if matches!(qtype, RecordType::A | RecordType::ANY) => {
                if ips.is_empty() {
                    Lookup::NoData
                } else {
                    Lookup::Found(Target::A(ips))
                }
            }
            Some(_) => Lookup::NoData,
            // Intermediate names (`svc.cluster.local`, `default.svc.cluster.local`)
            // exist as the parents of records: NOERROR, not NXDOMAIN.
            None if self.names.keys().any(|k| k.ends_with(&format!(".{name}"))) => Lookup::NoData,
            None => Lookup::NxDomain,
        }
    }

    /// The response to `request`, or None when the question is for another
    /// domain (the caller forwards those).
    pub fn answer(&self, request: &Message) -> Option<Message> {
        let mut resp = reply(request);
        resp.metadata.authoritative = true;
        let Some(query) = request.queries.first() else {
            resp.metadata.response_code = ResponseCode::FormErr;
            return Some(resp);
        };
        resp.add_query(query.clone());
        let qname = query.name().clone();
        match self.lookup(&qname.to_ascii(), query.query_type()) {
            Lookup::NotOurs => return None,
            Lookup::Found(Target::A(ips)) => {
                for ip in ips {
                    resp.add_answer(Record::from_rdata(qname.clone(), TTL, RData::A(A(ip))));
                }
            }
            Lookup::Found(Target::Cname(c)) => {
                let target = Name::from_ascii(format!("{c}.")).ok()?;
                resp.add_answer(Record::from_rdata(qname, TTL, RData::CNAME(CNAME(target))));
            }
            Lookup::NoData => {
                resp.add_authority(self.soa());
            }
            Lookup::NxDomain => {
                resp.metadata.response_code = ResponseCode::NXDomain;
                resp.add_authority(self.soa());
            }
        }
        Some(resp)
    }

    /// The zone's SOA, sent with negative answers so resolvers cache them briefly.
    fn soa(&self) -> Record {
        let origin = Name::from_ascii(format!("{}.", self.domain)).unwrap_or_default();
        let mname = Name::from_ascii(format!("ns.dns.{}.", self.domain)).unwrap_or_default();
        let rname = Name::from_ascii(format!("hostmaster.{}.", self.domain)).unwrap_or_default();
        Record::from_rdata(
            origin,
            TTL,
            RData::SOA(SOA::new(mname, rname, 1, 7200, 1800, 86400, TTL)),
        )
    }
}

/// `10-244-1-5.<ns>.pod` → 10.244.1.5 (the pod A records Kubernetes serves).
fn pod_address(inner: &str) -> Option<Ipv4Addr> {
    let mut parts = inner.split('.');
    let dashed = parts.next()?;
    let (_ns, pod, end) = (parts.next()?, parts.next()?, parts.next());
    if pod != "pod" || end.is_some() {
        return None;
    }
    dashed.replace('-', ".").parse().ok()
}

/// An empty response to `request` (same id, opcode and RD flag).
fn reply(request: &Message) -> Message {
    let mut resp = Message::response(request.metadata.id, request.metadata.op_code);
    resp.metadata = Metadata::response_from_request(&request.metadata);
    resp.metadata.recursion_available = true;
    resp
}

/// A response with only a code (for requests we cannot serve).
pub fn error_response(request: &Message, code: ResponseCode) -> Message {
    let mut resp = reply(request);
    resp.metadata.response_code = code;
    for q in &request.queries {
        resp.add_query(q.clone());
    }
    resp
}

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
    Ok(Sockets {
        udp: UdpSocket::bind(listen).await?,
        tcp: TcpListener::bind(listen).await?,
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
    use serde_json::json;

    fn zone() -> Zone {
        let svc = |v: serde_json::Value| Arc::new(serde_json::from_value::<Service>(v).unwrap());
        let services = vec![
            svc(
                json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"clusterIP": "10.96.0.20"}}),
            ),
            svc(
                json!({"metadata": {"name": "lws", "namespace": "ml"}, "spec": {"clusterIP": "None"}}),
            ),
            svc(
                json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"type": "ExternalName", "externalName": "db.example.org"}}),
            ),
            svc(
                json!({"metadata": {"name": "empty", "namespace": "default"}, "spec": {"clusterIP": "None"}}),
            ),
        ];
        let slice: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "lws-0", "namespace": "ml",
            "labels": {"kubernetes.io/service-name": "lws"}}, "addressType": "IPv4", "endpoints": [
                {"addresses": ["10.244.2.7"], "hostname": "lws-0", "conditions": {"ready": true}},
                {"addresses": ["10.244.1.3"], "hostname": "lws-0-1", "conditions": {"ready": true}},
                {"addresses": ["10.244.3.9"], "hostname": "gone", "conditions": {"ready": false}}]}))
        .unwrap();
        Zone::build("cluster.local.", &services, &[Arc::new(slice)])
    }

    #[test]
    fn services_headless_endpoints_and_pods_resolve() {
        let z = zone();
        let a = |ips: &[&str]| {
            Lookup::Found(Target::A(ips.iter().map(|i| i.parse().unwrap()).collect()))
        };
        assert_eq!(
            z.lookup("web.default.svc.cluster.local.", RecordType::A),
            a(&["10.96.0.20"])
        );
        assert_eq!(
            z.lookup("WEB.Default.svc.cluster.local", RecordType::A),
            a(&["10.96.0.20"])
        );
        assert_eq!(
            z.lookup("lws.ml.svc.cluster.local", RecordType::A),
            a(&["10.244.1.3", "10.244.2.7"])
        );
        assert_eq!(
            z.lookup("lws-0.lws.ml.svc.cluster.local", RecordType::A),
            a(&["10.244.2.7"])
        );
        assert_eq!(
            z.lookup("gone.lws.ml.svc.cluster.local", RecordType::A),
            Lookup::NxDomain
        );
        assert_eq!(
            z.lookup("10-244-1-5.default.pod.cluster.local", RecordType::A),
            a(&["10.244.1.5"])
        );
        assert_eq!(
            z.lookup("db.default.svc.cluster.local", RecordType::A),
            Lookup::Found(Target::Cname("db.example.org".into()))
        );
        // AAAA of an existing name, a headless service without endpoints, parents: NOERROR, no data.
        assert_eq!(
            z.lookup("web.default.svc.cluster.local", RecordType::AAAA),
            Lookup::NoData
        );
        assert_eq!(
            z.lookup("empty.default.svc.cluster.local", RecordType::A),
            Lookup::NoData
        );
        assert_eq!(
            z.lookup("default.svc.cluster.local", RecordType::A),
            Lookup::NoData
        );
        // Search-list misses are NXDOMAIN; other domains are forwarded.
        assert_eq!(
            z.lookup(
                "web.default.svc.cluster.local.default.svc.cluster.local",
                RecordType::A
            ),
            Lookup::NxDomain
        );
        assert_eq!(z.lookup("example.org", RecordType::A), Lookup::NotOurs);
    }

    #[test]
    fn ingress_hosts_answer_with_their_addresses_and_others_are_forwarded() {
        let mut z = zone();
        let ing = serde_json::from_value(json!({"metadata": {"name": "hello"},
            "spec": {"rules": [{"host": "hello.world.minik8s"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.11"}]}}}))
        .unwrap();
        z.hosts = crate::ingress::hosts::Hosts::build(&[Arc::new(ing)]);
        let ip = "192.168.1.11".parse().unwrap();
        assert_eq!(
            z.lookup("hello.world.minik8s.", RecordType::A),
            Lookup::Found(Target::A(vec![ip]))
        );
        assert_eq!(
            z.lookup("hello.world.minik8s", RecordType::AAAA),
            Lookup::NoData
        );
        assert_eq!(z.lookup("other.minik8s", RecordType::A), Lookup::NotOurs);
    }

    #[test]
    fn answers_are_authoritative_messages_with_the_query_echoed() {
        let z = zone();
        let mut req = Message::query();
        req.metadata.id = 4242;
        req.metadata.recursion_desired = true;
        req.add_query(Query::query(
            Name::from_ascii("web.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let bytes = req.to_vec().unwrap();
        let resp = z.answer(&Message::from_vec(&bytes).unwrap()).unwrap();
        let resp = Message::from_vec(&resp.to_vec().unwrap()).unwrap();
        assert_eq!(resp.metadata.id, 4242);
        assert!(resp.metadata.authoritative && resp.metadata.recursion_desired);
        assert_eq!(resp.queries.len(), 1);
        assert_eq!(resp.answers.len(), 1);
        assert_eq!(resp.answers[0].ttl, TTL);
        assert_eq!(
            resp.answers[0].data,
            RData::A(A("10.96.0.20".parse().unwrap()))
        );

        let mut miss = req.clone();
        miss.queries[0] = Query::query(
            Name::from_ascii("nope.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        );
        let resp = z.answer(&miss).unwrap();
        assert_eq!(resp.metadata.response_code, ResponseCode::NXDomain);
        assert!(
            resp.answers.is_empty() && resp.authorities.len() == 1,
            "SOA for negative caching"
        );

        let mut other = req;
        other.queries[0] = Query::query(Name::from_ascii("example.org.").unwrap(), RecordType::A);
        assert!(
            z.answer(&other).is_none(),
            "other domains are not ours to answer"
        );
    }

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
