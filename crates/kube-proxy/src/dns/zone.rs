//! The cluster domain's names as a table built from Services and
//! EndpointSlices ([`Zone::build`]), and the answer to one query
//! ([`Zone::answer`]): pure, so every record is unit-tested.

use hickory_proto::op::{Message, Metadata, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, PTR, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Seconds a client may cache an answer (CoreDNS' kubernetes plugin uses 5).
pub const TTL: u32 = 5;

/// What one name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    A(Vec<Ipv4Addr>),
    Cname(String),
    /// `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: the port and who serves it.
    Srv(Vec<SrvTarget>),
    /// `<d>.<c>.<b>.<a>.in-addr.arpa`: the name of a Service or endpoint IP.
    Ptr(String),
}

/// One SRV record: a port and the name serving it, with that name's
/// address (sent along in the additional section, as CoreDNS does).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SrvTarget {
    pub port: u16,
    pub target: String,
    pub address: Ipv4Addr,
}

impl Target {
    /// Whether a query of `qtype` is answered by this record (a CNAME answers any).
    fn answers(&self, qtype: RecordType) -> bool {
        let wanted = match self {
            Target::A(_) => RecordType::A,
            Target::Cname(_) => return true,
            Target::Srv(_) => RecordType::SRV,
            Target::Ptr(_) => RecordType::PTR,
        };
        qtype == wanted || qtype == RecordType::ANY
    }

    fn is_empty(&self) -> bool {
        match self {
            Target::A(ips) => ips.is_empty(),
            Target::Srv(s) => s.is_empty(),
            Target::Cname(_) | Target::Ptr(_) => false,
        }
    }
}

/// The reverse-lookup name of an address (`10.96.0.20` → `20.0.96.10.in-addr.arpa`).
pub fn reverse_name(ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("{d}.{c}.{b}.{a}.in-addr.arpa")
}

/// The SRV name of a named Service port (`_http._tcp.<fqdn>`).
fn srv_name(port_name: &str, protocol: Option<&str>, fqdn: &str) -> String {
    let proto = protocol.unwrap_or("TCP").to_lowercase();
    format!("_{port_name}._{proto}.{fqdn}").to_lowercase()
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
    /// The names of `services` and their ready endpoints, as the Kubernetes
    /// DNS specification has them: A records for Services (their ClusterIP,
    /// or a headless Service's endpoints) and for each endpoint of a
    /// headless Service (its hostname, else its dashed address); SRV
    /// records per named port (the Service, or each endpoint of a headless
    /// one); PTR records for Service and endpoint addresses.
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
        // In name order, so an address shared by two Services has one PTR, always the same.
        let mut services: Vec<&Arc<Service>> = services.iter().collect();
        services.sort_by_key(|s| (s.metadata.namespace.clone(), s.metadata.name.clone()));
        let mut reverse: Vec<(Ipv4Addr, String)> = Vec::new();
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
            let slices = by_service
                .get(&(ns.clone(), name.clone()))
                .map_or(&[][..], Vec::as_slice);
            let endpoints = ready_endpoints(slices);
            let cluster_ip = spec.cluster_ip.as_deref().unwrap_or("");
            if let Ok(ip) = cluster_ip.parse::<Ipv4Addr>() {
                names.insert(fqdn.clone(), Target::A(vec![ip]));
                reverse.push((ip, fqdn.clone()));
                for p in spec.ports.iter().flatten() {
                    if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                        let srv = SrvTarget {
                            port: p.port as u16,
                            target: fqdn.clone(),
                            address: ip,
                        };
                        let key = srv_name(port_name, p.protocol.as_deref(), &fqdn);
                        names.insert(key, Target::Srv(vec![srv]));
                    }
                }
            } else {
                // Headless: the ready endpoints, each by its own name too.
                let mut all: Vec<Ipv4Addr> = Vec::new();
                let mut srv: HashMap<String, Vec<SrvTarget>> = HashMap::new();
                for e in &endpoints {
                    let own = format!("{}.{fqdn}", e.name);
                    names.insert(own.clone(), Target::A(vec![e.address]));
                    all.push(e.address);
                    for (port_name, proto, port) in &e.ports {
                        srv.entry(srv_name(port_name, Some(proto), &fqdn))
                            .or_default()
                            .push(SrvTarget {
                                port: *port,
                                target: own.clone(),
                                address: e.address,
                            });
                    }
                }
                all.sort();
                all.dedup();
                names.insert(fqdn.clone(), Target::A(all));
                for (key, mut targets) in srv {
                    targets.sort();
                    targets.dedup();
                    names.insert(key, Target::Srv(targets));
                }
            }
            for e in &endpoints {
                reverse.push((e.address, format!("{}.{fqdn}", e.name)));
            }
        }
        for (ip, name) in reverse {
            names.entry(reverse_name(ip)).or_insert(Target::Ptr(name));
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
        if name.ends_with(".in-addr.arpa") {
            // Addresses of ours; any other goes upstream.
            return match self.names.get(&name) {
                Some(t) if t.answers(qtype) => Lookup::Found(t.clone()),
                Some(_) => Lookup::NoData,
                None => Lookup::NotOurs,
            };
        }
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
            Some(t) if t.answers(qtype) && !t.is_empty() => Lookup::Found(t),
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
            Lookup::Found(Target::Srv(targets)) => {
                // Equal priority, the weight shared out (CoreDNS' 100 / n).
                let weight = (100 / targets.len().max(1)) as u16;
                for t in targets {
                    let name = Name::from_ascii(format!("{}.", t.target)).ok()?;
                    let srv = SRV::new(0, weight, t.port, name.clone());
                    resp.add_answer(Record::from_rdata(qname.clone(), TTL, RData::SRV(srv)));
                    resp.add_additional(Record::from_rdata(name, TTL, RData::A(A(t.address))));
                }
            }
            Lookup::Found(Target::Ptr(p)) => {
                let target = Name::from_ascii(format!("{p}.")).ok()?;
                resp.add_answer(Record::from_rdata(qname, TTL, RData::PTR(PTR(target))));
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

/// One ready endpoint address as the DNS names it.
struct Endpoint {
    /// Its hostname, else its address with dashes (`10-244-1-5`).
    name: String,
    address: Ipv4Addr,
    /// The slice's named ports: (name, protocol, port).
    ports: Vec<(String, String, u16)>,
}

/// The ready endpoints of a Service's slices.
fn ready_endpoints(slices: &[&EndpointSlice]) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for slice in slices {
        let ports: Vec<(String, String, u16)> = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let name = p.name.clone().filter(|n| !n.is_empty())?;
                let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                Some((name, proto, u16::try_from(p.port?).ok()?))
            })
            .collect();
        for e in slice.endpoints.iter().flatten() {
            if !e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true) {
                continue;
            }
            for address in e
                .addresses
                .iter()
                .filter_map(|a| a.parse::<Ipv4Addr>().ok())
            {
                let name = match &e.hostname {
                    Some(h) => h.to_lowercase(),
                    None => address.to_string().replace('.', "-"),
                };
                out.push(Endpoint {
                    name,
                    address,
                    ports: ports.clone(),
                });
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use serde_json::json;

    fn zone() -> Zone {
        let svc = |v: serde_json::Value| Arc::new(serde_json::from_value::<Service>(v).unwrap());
        let services = vec![
            svc(
                json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"clusterIP": "10.96.0.20",
                    "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"port": 9090}]}}),
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
            "labels": {"kubernetes.io/service-name": "lws"}}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}], "endpoints": [
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
    fn srv_and_ptr_records_follow_the_dns_specification() {
        let mut svcs = vec![Arc::new(
            serde_json::from_value::<Service>(
                json!({"metadata": {"name": "peers", "namespace": "ml"},
                "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}}),
            )
            .unwrap(),
        )];
        svcs.push(Arc::new(
            serde_json::from_value::<Service>(
                json!({"metadata": {"name": "web", "namespace": "default"},
                "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "http", "port": 80}]}}),
            )
            .unwrap(),
        ));
        let slice: EndpointSlice =
            serde_json::from_value(json!({"metadata": {"name": "peers-1", "namespace": "ml",
            "labels": {"kubernetes.io/service-name": "peers"}}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}], "endpoints": [
                {"addresses": ["10.244.2.7"], "hostname": "peer-0"},
                {"addresses": ["10.244.1.5"]}]}))
            .unwrap();
        let z = Zone::build("cluster.local", &svcs, &[Arc::new(slice)]);
        let srv = |port, target: &str, ip: &str| SrvTarget {
            port,
            target: target.into(),
            address: ip.parse().unwrap(),
        };
        // A ClusterIP Service: its named port points at the Service.
        assert_eq!(
            z.lookup("_http._tcp.web.default.svc.cluster.local", RecordType::SRV),
            Lookup::Found(Target::Srv(vec![srv(
                80,
                "web.default.svc.cluster.local",
                "10.96.0.20"
            )]))
        );
        // A headless one: one SRV per ready endpoint, at the endpoint's port and name
        // (its hostname, else its dashed address, which also has an A record).
        assert_eq!(
            z.lookup("_http._tcp.peers.ml.svc.cluster.local", RecordType::SRV),
            Lookup::Found(Target::Srv(vec![
                srv(8080, "10-244-1-5.peers.ml.svc.cluster.local", "10.244.1.5"),
                srv(8080, "peer-0.peers.ml.svc.cluster.local", "10.244.2.7"),
            ]))
        );
        assert_eq!(
            z.lookup("10-244-1-5.peers.ml.svc.cluster.local", RecordType::A),
            Lookup::Found(Target::A(vec!["10.244.1.5".parse().unwrap()]))
        );
        assert_eq!(
            z.lookup("_http._tcp.web.default.svc.cluster.local", RecordType::A),
            Lookup::NoData
        );
        // Reverse: Service and endpoint addresses are ours; others go upstream.
        assert_eq!(
            z.lookup("20.0.96.10.in-addr.arpa.", RecordType::PTR),
            Lookup::Found(Target::Ptr("web.default.svc.cluster.local".into()))
        );
        assert_eq!(
            z.lookup("7.2.244.10.in-addr.arpa", RecordType::PTR),
            Lookup::Found(Target::Ptr("peer-0.peers.ml.svc.cluster.local".into()))
        );
        assert_eq!(
            z.lookup("1.1.168.192.in-addr.arpa", RecordType::PTR),
            Lookup::NotOurs
        );
        // On the wire: SRV answers with the targets' addresses in the additional section.
        let mut req = Message::query();
        req.add_query(Query::query(
            Name::from_ascii("_http._tcp.peers.ml.svc.cluster.local.").unwrap(),
            RecordType::SRV,
        ));
        let resp = z.answer(&req).unwrap();
        let resp = Message::from_vec(&resp.to_vec().unwrap()).unwrap();
        assert_eq!(resp.answers.len(), 2);
        assert_eq!(resp.additionals.len(), 2);
        let RData::SRV(first) = &resp.answers[0].data else {
            panic!("{:?}", resp.answers[0])
        };
        assert_eq!((first.priority, first.weight, first.port), (0, 50, 8080));
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
}
