//! The cluster domain's names as a table built from Services and
//! EndpointSlices ([`Zone::build`]), and the answer to one query
//! ([`Zone::answer`]): pure, so every record is unit-tested.

use hickory_proto::op::{Message, Metadata, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SOA};
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
}
