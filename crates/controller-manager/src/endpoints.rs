//! The Endpoints and EndpointSlice controller: for every Service with a
//! selector, the IPs of the matching pods and the ports to reach them on.
//! Ready pods are `addresses`, the others `notReadyAddresses` (and slice
//! endpoints with `ready: false`); a named targetPort is looked up in each pod.
//!
//! Each slice endpoint carries its node's zone (`topology.kubernetes.io/zone`)
//! and, when the Service asks for `trafficDistribution`, the topology hints
//! kube-proxy routes by ([`hints`]).
//!
//! [`desired`] computes both objects from a Service, the namespace's pods and
//! the nodes' zones (pure); the shell writes them when they differ.

use crate::ns_of;
use crate::ownership::is_ready;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::{object_key, Event};
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{
    Cache, Client, ClientError, DeleteParams, ListParams, SharedInformers, WorkQueue,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::Instrument;

pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// The service's selector, if it selects pods at all (an empty selector selects none).
pub fn selector(svc: &Service) -> Option<BTreeMap<String, String>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .filter(|s| !s.is_empty())
}

/// One resolved port: (name, port, protocol).
type Port = (String, i32, String);

/// The ports a pod serves the service on; None if a named targetPort is missing in the pod.
fn resolve_ports(svc: &Service, pod: &Pod) -> Option<Vec<Port>> {
    let mut out = Vec::new();
    for sp in svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
    {
        let protocol = sp.protocol.clone().unwrap_or_else(|| "TCP".into());
        let port = match &sp.target_port {
            None => sp.port,
            Some(IntOrString::Int(p)) => *p,
            Some(IntOrString::String(name)) => pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)?,
        };
        out.push((sp.name.clone().unwrap_or_default(), port, protocol));
    }
    Some(out)
}

/// The label that places a node in a zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The `trafficDistribution` values that ask for hints (`PreferClose` is the
/// older name of `PreferSameZone`).
const PREFER_CLOSE: [&str; 3] = ["PreferClose", "PreferSameZone", "PreferSameNode"];

/// The topology hints of one ready slice endpoint (Kubernetes'
/// `preferCloseHeuristic`): its own zone, and its own node for
/// `PreferSameNode`; none without `trafficDistribution`, for an endpoint not
/// ready, or with neither a zone nor a node.
pub fn hints(
    distribution: Option<&str>,
    ready: bool,
    zone: Option<&str>,
    node: Option<&str>,
) -> Option<Value> {
    let distribution = distribution.filter(|d| PREFER_CLOSE.contains(d))?;
    if !ready {
        return None;
    }
    let mut hints = serde_json::Map::new();
    if let Some(z) = zone {
        hints.insert("forZones".into(), json!([{"name": z}]));
    }
    if let Some(n) = node.filter(|_| distribution == "PreferSameNode") {
        hints.insert("forNodes".into(), json!([{"name": n}]));
    }
    (!hints.is_empty()).then_some(Value::Object(hints))
}

/// The Endpoints object and EndpointSlices (by name) the service should have;
/// `zone_of` names a node's zone.
pub fn desired(
    svc: &Service,
    pods: &[Arc<Pod>],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> (Value, Vec<Value>) {
    let ns = svc
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = svc.metadata.name.clone().unwrap_or_default();
    let spec = svc.spec.as_ref();
    let view = Members {
        service: &name,
        ns: &ns,
        distribution: spec.and_then(|s| s.traffic_distribution.as_deref()),
        publish_not_ready: spec
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false),
        zone_of,
    };
    let mut subsets = Vec::new();
    let mut slices = Vec::new();
    for (i, (ports, members)) in port_groups(svc, pods).iter().enumerate() {
        let mut members: Vec<&Pod> = members.iter().map(|p| p.as_ref()).collect();
        members.sort_by_key(|p| ip_of(p));
        let (ready, not_ready): (Vec<&Pod>, Vec<&Pod>) =
            members.iter().partition(|p| view.counts_ready(p));
        let port_list: Vec<Value> = ports
            .iter()
            .map(|(n, p, proto)| json!({"name": n, "port": p, "protocol": proto}))
            .collect();
        let mut subset = json!({"ports": port_list});
        if !ready.is_empty() {
            subset["addresses"] = ready.iter().map(|p| view.address(p)).collect();
        }
        if !not_ready.is_empty() {
            subset["notReadyAddresses"] = not_ready.iter().map(|p| view.address(p)).collect();
        }
        subsets.push(subset);
        let endpoints = members.iter().map(|p| view.endpoint(p)).collect();
        slices.push(slice(svc, &format!("{name}-{i}"), endpoints, port_list));
    }
    if slices.is_empty() {
        // An empty slice still says "this service has no endpoints" (with its ports).
        let ports: Vec<Value> = svc.spec.as_ref().and_then(|s| s.ports.as_ref()).into_iter().flatten().map(|p| json!({"name": p.name.clone().unwrap_or_default(), "port": p.port, "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())})).collect();
        slices.push(slice(svc, &format!("{name}-0"), Vec::new(), ports));
    }
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns, "labels": svc.metadata.labels.clone().unwrap_or_default()},
        "subsets": subsets});
    (endpoints, slices)
}

/// The service's pods with an address and not finished, grouped by the
/// ports they resolve to: one Endpoints subset and one slice per group.
fn port_groups<'a>(svc: &Service, pods: &'a [Arc<Pod>]) -> BTreeMap<Vec<Port>, Vec<&'a Arc<Pod>>> {
    let sel = selector(svc).unwrap_or_default();
    let mut groups: BTreeMap<Vec<Port>, Vec<&Arc<Pod>>> = BTreeMap::new();
    for p in pods {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let matches = sel.iter().all(|(k, v)| labels.get(k) == Some(v));
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if !matches || ip_of(p).is_empty() || matches!(phase, Some("Succeeded") | Some("Failed")) {
            continue;
        }
        if let Some(ports) = resolve_ports(svc, p) {
            groups.entry(ports).or_default().push(p);
        }
    }
    groups
}

fn ip_of(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

/// How one service writes its pods as addresses and endpoints.
struct Members<'a> {
    service: &'a str,
    ns: &'a str,
    distribution: Option<&'a str>,
    publish_not_ready: bool,
    zone_of: &'a dyn Fn(&str) -> Option<String>,
}

impl Members<'_> {
    /// publishNotReadyAddresses: every pod counts as ready (peers of a
    /// StatefulSet or an LWS group must find each other before they are Ready).
    fn counts_ready(&self, p: &Pod) -> bool {
        self.publish_not_ready || (is_ready(p) && !terminating(p))
    }

    fn target(&self, p: &Pod) -> Value {
        json!({"kind": "Pod", "namespace": self.ns, "name": p.metadata.name, "uid": p.metadata.uid})
    }

    /// A pod names itself in DNS (`<hostname>.<service>.<ns>.svc`) when its
    /// subdomain is this service, as the Kubernetes endpoints controller does.
    fn hostname_of(&self, p: &Pod) -> Option<String> {
        let spec = p.spec.as_ref()?;
        (spec.subdomain.as_deref() == Some(self.service))
            .then(|| spec.hostname.clone())
            .flatten()
    }

    /// The pod as an Endpoints address.
    fn address(&self, p: &Pod) -> Value {
        let mut a = json!({"ip": ip_of(p), "nodeName": node_of(p), "targetRef": self.target(p)});
        if let Some(h) = self.hostname_of(p) {
            a["hostname"] = json!(h);
        }
        a
    }

    /// The pod as an EndpointSlice endpoint, with its conditions, zone and hints.
    fn endpoint(&self, p: &Pod) -> Value {
        let node = node_of(p);
        let zone = node.as_deref().and_then(self.zone_of);
        let ready = self.counts_ready(p);
        let serving = self.publish_not_ready || is_ready(p);
        let mut e = json!({"addresses": [ip_of(p)], "nodeName": node, "targetRef": self.target(p),
               "conditions": {"ready": ready, "serving": serving, "terminating": terminating(p)}});
        if let Some(h) = self.hostname_of(p) {
            e["hostname"] = json!(h);
        }
        if let Some(hints) = hints(self.distribution, ready, zone.as_deref(), node.as_deref()) {
            e["hints"] = hints;
        }
        if let Some(z) = zone {
            e["zone"] = json!(z);
        }
        e
    }
}

fn slice(svc: &Service, name: &str, endpoints: Vec<Value>, ports: Vec<Value>) -> Value {
    let ns = svc
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let svc_name = svc.metadata.name.clone().unwrap_or_default();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns, "labels": {SERVICE_NAME_LABEL: svc_name, MANAGED_BY_LABEL: MANAGED_BY},
                     "ownerReferences": [crate::ownership::controller_ref("v1", "Service", &svc.metadata)]},
        "addressType": "IPv4", "endpoints": endpoints, "ports": ports})
}

// ---------------------------------------------------------------------------
// The I/O shell.

/// Keeps each Service's Endpoints and EndpointSlices in line with its pods.
pub struct EndpointsController {
    client: Client,
    services: Cache<Service>,
    pods: Cache<Pod>,
    nodes: Cache<Node>,
}

impl EndpointsController {
    /// Builds the controller on the shared informers (Services and Pods).
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(EndpointsController {
            client,
            services: informers.cache(),
            pods: informers.cache(),
            nodes: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Service>(informers)?
            .watches::<Pod, _>(informers, |c, ev| c.pod_keys(ev))?
            .watches::<Node, _>(informers, |c, ev| c.node_keys(ev))
    }

    /// Services in the pod's namespace whose selector matches the pod.
    fn services_for(&self, pod: &Pod) -> Vec<String> {
        let ns = ns_of(&pod.metadata);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.services
            .by_index(NAMESPACE_INDEX, &ns)
            .iter()
            .filter(|s| {
                selector(s).is_some_and(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
            .map(|s| object_key(&s.metadata))
            .collect()
    }

    /// The Services a node's zone change concerns: those of the pods on it
    /// (their endpoints carry the zone). Heartbeats concern none.
    fn node_keys(&self, ev: &Event<Node>) -> Vec<String> {
        let zone = |n: &Node| n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned();
        let Event::Updated { old, new } = ev else {
            return Vec::new();
        };
        if zone(old) == zone(new) {
            return Vec::new();
        }
        let node = new.metadata.name.clone();
        self.pods
            .list()
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()) == node)
            .flat_map(|p| self.services_for(p))
            .collect()
    }

    /// The Services a pod event concerns: those matching it before and after.
    fn pod_keys(&self, ev: &Event<Pod>) -> Vec<String> {
        let mut keys = self.services_for(ev.object());
        if let Event::Updated { old, .. } = ev {
            keys.extend(self.services_for(old));
        }
        keys
    }
}

impl Reconciler for EndpointsController {
    const NAME: &'static str = "endpoints";

    /// Converges one Service's Endpoints and EndpointSlices.
    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let ep_api = self.client.dynamic(registry::of::<Endpoints>(), Some(ns));
        let slice_api = self
            .client
            .dynamic(registry::of::<EndpointSlice>(), Some(ns));
        // Only the slices this controller manages: others (the apiserver's
        // for `kubernetes`, a user's for a selectorless Service) are not ours.
        let existing: Vec<Value> = slice_api
            .list(&ListParams::default().labels(&format!(
                "{SERVICE_NAME_LABEL}={name},{MANAGED_BY_LABEL}={MANAGED_BY}"
            )))
            .await?["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let svc = self.services.get(key);
        let Some(svc) = svc.filter(|s| selector(s).is_some()) else {
            // Gone, or without a selector (then its endpoints are the user's to manage).
            if self.services.get(key).is_none() {
                match ep_api.delete(name, &DeleteParams::default()).await {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
            for sl in existing {
                let n = sl["metadata"]["name"].as_str().unwrap_or("");
                match slice_api.delete(n, &DeleteParams::default()).await {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => {}
                }
            }
            return Ok(Action::Done);
        };
        let zone_of = |node: &str| {
            let n = self.nodes.get(node)?;
            n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned()
        };
        let (want_ep, want_slices) =
            desired(&svc, &self.pods.by_index(NAMESPACE_INDEX, ns), &zone_of);
        let cur_ep = match ep_api.get(name).await {
            Ok(cur) => Some(cur),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let step = self
            .endpoints_step(key, ns, cur_ep.as_ref(), &want_ep)
            .await;
        let writes = Writes {
            ep_api: &ep_api,
            slice_api: &slice_api,
            name,
        };
        writes
            .apply(cur_ep, &want_ep, &want_slices, &existing)
            .instrument(step)
            .await
    }
}

/// Pods that are a Service's ready endpoints (by `targetRef`).
fn endpoint_pods(ep: Option<&Value>) -> BTreeSet<String> {
    let subsets = ep.and_then(|e| e["subsets"].as_array());
    subsets
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["targetRef"]["name"].as_str().map(str::to_string))
        .collect()
}

impl EndpointsController {
    /// The step this reconcile is in the journeys of the pods it makes the
    /// Service's endpoints: a span in the first such pod's trace around
    /// the writes, and a mark in each other's. None (no span) when no
    /// traced pod is new among the ready endpoints.
    async fn endpoints_step(
        &self,
        key: &str,
        ns: &str,
        cur: Option<&Value>,
        want: &Value,
    ) -> tracing::Span {
        let before = endpoint_pods(cur);
        let mut contexts: Vec<String> = Vec::new();
        for pod in endpoint_pods(Some(want)).difference(&before) {
            let Some(p) = self.pods.get(&format!("{ns}/{pod}")) else {
                continue;
            };
            let uid = p.metadata.uid.as_deref().unwrap_or("");
            if let Some(tp) = minik8s_client::traces::context_of(&self.client, uid).await {
                contexts.push(tp);
            }
        }
        let step = || tracing::debug_span!(target: minik8s_trace::JOURNEY, parent: None, "endpoints", service = %key);
        let Some((first, others)) = contexts.split_first() else {
            return tracing::Span::none();
        };
        for other in others {
            let mark = step();
            minik8s_trace::context::follow(&mark, Some(other));
            mark.in_scope(|| {
                tracing::debug!(target: minik8s_trace::JOURNEY, service = %key, "ready endpoint")
            });
        }
        let span = step();
        minik8s_trace::context::follow(&span, Some(first));
        span.in_scope(
            || tracing::debug!(target: minik8s_trace::JOURNEY, service = %key, "ready endpoint"),
        );
        span
    }
}

/// The writes that bring a Service's Endpoints and EndpointSlices to
/// what is wanted.
struct Writes<'a> {
    ep_api: &'a minik8s_client::DynamicApi,
    slice_api: &'a minik8s_client::DynamicApi,
    name: &'a str,
}

impl Writes<'_> {
    async fn apply(
        &self,
        cur_ep: Option<Value>,
        want_ep: &Value,
        want_slices: &[Value],
        existing: &[Value],
    ) -> Result<Action, ClientError> {
        let Writes {
            ep_api,
            slice_api,
            name,
        } = *self;
        match cur_ep {
            None => {
                ep_api.create(want_ep).await?;
            }
            Some(cur) => {
                if cur["subsets"].as_array().cloned().unwrap_or_default()
                    != want_ep["subsets"].as_array().cloned().unwrap_or_default()
                {
                    let mut next = want_ep.clone();
                    next["metadata"]["resourceVersion"] =
                        cur["metadata"]["resourceVersion"].clone();
                    ep_api.replace(name, &next).await?;
                }
            }
        }
        for want in want_slices {
            let n = want["metadata"]["name"].as_str().unwrap_or("");
            match existing.iter().find(|e| e["metadata"]["name"] == n) {
                None => {
                    slice_api.create(want).await?;
                }
                Some(cur)
                    if cur["endpoints"].as_array().cloned().unwrap_or_default()
                        != want["endpoints"].as_array().cloned().unwrap_or_default()
                        || cur["ports"] != want["ports"] =>
                {
                    let mut next = want.clone();
                    next["metadata"]["resourceVersion"] =
                        cur["metadata"]["resourceVersion"].clone();
                    slice_api.replace(n, &next).await?;
                }
                Some(_) => {}
            }
        }
        for stale in existing.iter().filter(|e| {
            !want_slices
                .iter()
                .any(|w| w["metadata"]["name"] == e["metadata"]["name"])
        }) {
            match slice_api
                .delete(
                    stale["metadata"]["name"].as_str().unwrap_or(""),
                    &DeleteParams::default(),
                )
                .await
            {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        Ok(Action::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(target: Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d", "uid": "s1"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": target, "protocol": "TCP"}]}}))
        .unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, port_name: &str, port: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "d", "uid": name, "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": port_name, "containerPort": port}]}]},
                "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
            .unwrap(),
        )
    }

    #[test]
    fn headless_peers_publish_not_ready_pods_with_their_hostnames() {
        let headless: Service = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "d", "uid": "s1"},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"app": "web"}}}))
        .unwrap();
        let named = |name: &str, subdomain: &str, ready: bool| {
            let mut p = (*pod(name, "10.0.0.2", ready, "http", 80)).clone();
            let spec = p.spec.as_mut().unwrap();
            spec.hostname = Some(name.into());
            spec.subdomain = Some(subdomain.into());
            Arc::new(p)
        };
        let (ep, slices) = desired(&headless, &[named("web-0", "web", false)], &|_| None);
        assert_eq!(ep["subsets"][0]["addresses"][0]["hostname"], "web-0");
        assert_eq!(slices[0]["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(slices[0]["endpoints"][0]["hostname"], "web-0");
        // Another subdomain: the pod is an endpoint, but not named under this service.
        let (_, slices) = desired(&headless, &[named("x-0", "other", true)], &|_| None);
        assert!(slices[0]["endpoints"][0].get("hostname").is_none());
    }

    #[test]
    fn ready_and_not_ready_addresses_with_numeric_target_port() {
        let pods = vec![
            pod("a", "10.0.0.2", true, "http", 8080),
            pod("b", "10.0.0.3", false, "http", 8080),
        ];
        let (ep, slices) = desired(&svc(json!(8080)), &pods, &|_| None);
        assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "10.0.0.2");
        assert_eq!(ep["subsets"][0]["notReadyAddresses"][0]["ip"], "10.0.0.3");
        assert_eq!(
            ep["subsets"][0]["ports"],
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
        );
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0]["metadata"]["labels"][SERVICE_NAME_LABEL], "web");
        assert_eq!(slices[0]["endpoints"][1]["conditions"]["ready"], false);
    }

    #[test]
    fn named_target_ports_resolve_per_pod() {
        let pods = vec![
            pod("a", "10.0.0.2", true, "http", 8080),
            pod("b", "10.0.0.3", true, "http", 9090),
            pod("c", "10.0.0.4", true, "other", 1),
        ];
        let (ep, slices) = desired(&svc(json!("http")), &pods, &|_| None);
        let ports: Vec<i64> = ep["subsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ports"][0]["port"].as_i64().unwrap())
            .collect();
        assert_eq!(ports, vec![8080, 9090], "pod c has no port named http");
        assert_eq!(slices.len(), 2);
    }

    #[test]
    fn endpoints_carry_their_zone_and_the_hints_traffic_distribution_asks_for() {
        let pods = vec![
            pod("a", "10.0.0.2", true, "http", 80),
            pod("b", "10.0.0.3", false, "http", 80),
        ];
        let zone_of = |n: &str| (n == "n1").then(|| "z1".to_string());
        let (_, slices) = desired(&svc(json!(80)), &pods, &zone_of);
        assert_eq!(slices[0]["endpoints"][0]["zone"], "z1");
        assert!(slices[0]["endpoints"][0].get("hints").is_none());
        let mut close = svc(json!(80));
        close.spec.as_mut().unwrap().traffic_distribution = Some("PreferClose".into());
        let (_, slices) = desired(&close, &pods, &zone_of);
        assert_eq!(
            slices[0]["endpoints"][0]["hints"],
            json!({"forZones": [{"name": "z1"}]})
        );
        // Not ready: no hint (it takes no traffic).
        assert!(slices[0]["endpoints"][1].get("hints").is_none());
        close.spec.as_mut().unwrap().traffic_distribution = Some("PreferSameNode".into());
        let (_, slices) = desired(&close, &pods, &zone_of);
        assert_eq!(
            slices[0]["endpoints"][0]["hints"],
            json!({"forZones": [{"name": "z1"}], "forNodes": [{"name": "n1"}]})
        );
        // A node without a zone: node hints only where asked for.
        assert_eq!(hints(Some("PreferSameZone"), true, None, Some("n2")), None);
        assert_eq!(
            hints(Some("PreferSameNode"), true, None, Some("n2")),
            Some(json!({"forNodes": [{"name": "n2"}]}))
        );
    }

    #[test]
    fn no_pods_gives_empty_subsets_and_one_empty_slice() {
        let (ep, slices) = desired(&svc(json!(80)), &[], &|_| None);
        assert_eq!(ep["subsets"], json!([]));
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0]["endpoints"], json!([]));
        assert_eq!(slices[0]["ports"][0]["port"], 80);
    }
}
