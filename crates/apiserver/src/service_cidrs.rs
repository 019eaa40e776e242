//! The Service IP ranges as objects (`networking.k8s.io/v1`, GA in 1.33):
//! the ServiceCIDRs new ClusterIPs come from, and an IPAddress per address
//! given out, naming its Service. Like Kubernetes' apiserver (the default
//! ServiceCIDR and the IPAddress repair controllers) and its controller
//! manager (the ServiceCIDR controller), one loop in the apiserver keeps them:
//!
//! ```text
//!  Service / ServiceCIDR / IPAddress written ─▶ (watch caches) ─▶ reconcile():
//!    ServiceCIDR "kubernetes" = --service-cluster-ip-range     (made if missing)
//!    other ServiceCIDRs not being deleted ─▶ allocator's extra ranges, Ready=True
//!    a ServiceCIDR being deleted: addresses still in use only there?
//!        yes ─▶ Ready=False (Terminating), finalizer kept;  no ─▶ finalizer removed
//!    every Service's ClusterIP ─▶ IPAddress <ip> {parentRef: services/<ns>/<name>}
//!    an IPAddress of ours whose Service no longer holds the address ─▶ deleted
//! ```
//!
//! The allocator itself stays in memory (`ipalloc.rs`, rebuilt from the
//! stored Services and IPAddresses at start), so a Service write never waits
//! for this loop; the objects follow within a moment. An IPAddress a user
//! creates reserves its address ([`crate::strategy`]'s IPAddress lifecycle).

use crate::rest::{DeleteOptions, Mode, WriteOpts};
use crate::ApiServer;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
use minik8s_api::registry;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

/// The ServiceCIDR of `--service-cluster-ip-range`.
pub const DEFAULT_SERVICE_CIDR: &str = "kubernetes";
/// Holds a ServiceCIDR while addresses only it covers are in use.
pub const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// The label on the IPAddresses the allocator wrote (a user's have none).
pub const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "ipallocator.k8s.io";
const FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
const TERMINATING_MESSAGE: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";
/// How often the loop runs without an event (repairs what was missed).
const RESYNC: Duration = Duration::from_secs(30);

/// Whether the allocator wrote this IPAddress (for a Service).
pub fn managed(ip_address: &Value) -> bool {
    ip_address.pointer(&format!(
        "/metadata/labels/{}",
        MANAGED_BY_LABEL.replace('/', "~1")
    )) == Some(&json!(MANAGED_BY))
}

/// The ClusterIPs of a Service (none for headless and ExternalName ones).
pub fn cluster_ips(svc: &Value) -> Vec<String> {
    let spec = &svc["spec"];
    let mut ips: Vec<String> = spec["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(std::iter::once(&spec["clusterIP"]))
        .filter_map(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
        .map(str::to_string)
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// The IPAddress the allocator keeps for `ip` of `svc`.
pub fn ip_address_for(ip: &str, svc: &Value) -> Value {
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": ip, "labels": {FAMILY_LABEL: family, MANAGED_BY_LABEL: MANAGED_BY}},
        "spec": {"parentRef": {"group": "", "resource": "services",
            "namespace": svc["metadata"]["namespace"].as_str().unwrap_or("default"),
            "name": svc["metadata"]["name"]}}})
}

/// What the IPAddresses should become: those to create, and the names of
/// ours to delete (their Service is gone or holds another address).
/// An address already recorded by someone else's IPAddress is left alone.
pub fn ip_address_changes(services: &[Value], existing: &[Value]) -> (Vec<Value>, Vec<String>) {
    let mut want: BTreeMap<String, Value> = BTreeMap::new();
    for svc in services {
        for ip in cluster_ips(svc) {
            want.entry(ip.clone())
                .or_insert_with(|| ip_address_for(&ip, svc));
        }
    }
    let mut delete = Vec::new();
    let mut have: BTreeMap<&str, &Value> = BTreeMap::new();
    for obj in existing {
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        have.insert(name, obj);
        let wanted = want
            .get(name)
            .is_some_and(|w| w["spec"]["parentRef"] == obj["spec"]["parentRef"]);
        if managed(obj) && !wanted && obj["metadata"]["deletionTimestamp"].is_null() {
            delete.push(name.to_string());
        }
    }
    let create = want
        .into_iter()
        .filter(|(ip, _)| !have.contains_key(ip.as_str()))
        .map(|(_, obj)| obj)
        .collect();
    (create, delete)
}

/// (network, prefix) of an IPv4 CIDR.
fn v4_range(cidr: &str) -> Option<(u32, u32)> {
    let (net, bits) = minik8s_api::net::parse_cidr(cidr).ok()?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Some((u32::from(net) & mask, mask))
}

fn covers(cidr: &str, ip: &str) -> bool {
    let (Some((net, mask)), Ok(ip)) = (v4_range(cidr), ip.parse::<Ipv4Addr>()) else {
        return false;
    };
    u32::from(ip) & mask == net
}

/// The CIDRs of a ServiceCIDR.
pub fn cidrs_of(obj: &Value) -> Vec<String> {
    obj.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Whether a ServiceCIDR being deleted may go: no address in use (`in_use`)
/// lies in it without also lying in one of the ranges that stay (`staying`).
pub fn may_go(cidr: &Value, staying: &[String], in_use: &[String]) -> bool {
    let mine = cidrs_of(cidr);
    !in_use
        .iter()
        .any(|ip| mine.iter().any(|c| covers(c, ip)) && !staying.iter().any(|c| covers(c, ip)))
}

/// The Ready condition a ServiceCIDR should show: True while it serves,
/// False (Terminating) while its deletion waits for addresses to go.
pub fn ready_condition(terminating: bool) -> Value {
    match terminating {
        false => json!({"type": "Ready", "status": "True", "reason": "", "message": ""}),
        true => json!({"type": "Ready", "status": "False", "reason": "Terminating",
            "message": TERMINATING_MESSAGE}),
    }
}

/// Sets `condition` in `status.conditions` (the transition time changes
/// only with the status); None when it is already so.
fn with_condition(obj: &Value, condition: &Value) -> Option<Value> {
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c["type"] == condition["type"]);
    let same = |k: &str| current.is_some_and(|c| c[k] == condition[k]);
    if same("status") && same("reason") && same("message") {
        return None;
    }
    let mut next = condition.clone();
    next["lastTransitionTime"] = match current.filter(|_| same("status")) {
        Some(c) => c["lastTransitionTime"].clone(),
        None => json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    };
    let mut out = obj.clone();
    let mut list: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != condition["type"])
        .collect();
    list.push(next);
    out["status"]["conditions"] = json!(list);
    Some(out)
}

impl ApiServer {
    /// Runs the loop until shutdown: on every Service, ServiceCIDR or
    /// IPAddress event (batched), and every [`RESYNC`].
    pub(crate) fn spawn_service_cidr_loop(self: &Arc<Self>, after: i64) {
        let wake = Arc::new(tokio::sync::Notify::new());
        for info in [
            registry::of::<Service>(),
            registry::of::<ServiceCIDR>(),
            registry::of::<IPAddress>(),
        ] {
            let Some(Ok(sub)) = self.watch_cache(info).map(|c| c.subscribe(after)) else {
                continue;
            };
            let mut live = sub.live;
            let w = wake.clone();
            tokio::spawn(async move {
                loop {
                    match live.recv().await {
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            w.notify_one()
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            });
        }
        let srv = Arc::downgrade(self);
        let stop = self.shutdown_signal();
        tokio::spawn(async move {
            tokio::pin!(stop);
            loop {
                let Some(s) = srv.upgrade() else { return };
                if let Err(e) = s.reconcile_service_cidrs().await {
                    tracing::warn!(error = %format!("{e:#}"), "ServiceCIDRs and IPAddresses");
                }
                drop(s);
                tokio::select! {
                    _ = wake.notified() => tokio::time::sleep(Duration::from_millis(100)).await,
                    _ = tokio::time::sleep(RESYNC) => {}
                    _ = &mut stop => return,
                }
            }
        });
    }

    async fn items(&self, info: &registry::ResourceInfo) -> anyhow::Result<Vec<Value>> {
        let all = crate::params::Params::parse(None).map_err(|e| anyhow::anyhow!("{e}"))?;
        let listed = self
            .list(info, None, &all)
            .await
            .map_err(|e| anyhow::anyhow!("listing {}: {e}", info.plural))?;
        Ok(listed["items"].as_array().cloned().unwrap_or_default())
    }

    /// The ServiceCIDR of `--service-cluster-ip-range`, Ready, made at start
    /// (before the server answers) and again whenever it is gone.
    pub(crate) async fn ensure_default_service_cidr(&self) -> anyhow::Result<()> {
        let info = registry::of::<ServiceCIDR>();
        let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": DEFAULT_SERVICE_CIDR},
            "spec": {"cidrs": [self.alloc.default_cidr()]}});
        match self.create(info, None, obj, WriteOpts::default()).await {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => return Ok(()),
            Err(e) => anyhow::bail!("creating the default ServiceCIDR: {e}"),
        }
        self.update_with(
            info,
            None,
            DEFAULT_SERVICE_CIDR,
            Mode::Status,
            WriteOpts::default(),
            |o| Ok(with_condition(o, &ready_condition(false)).unwrap_or_else(|| o.clone())),
        )
        .await
        .map_err(|e| anyhow::anyhow!("the default ServiceCIDR's status: {e}"))?;
        Ok(())
    }

    /// One pass of the loop (see the module's diagram).
    async fn reconcile_service_cidrs(&self) -> anyhow::Result<()> {
        let cidr_info = registry::of::<ServiceCIDR>();
        let ip_info = registry::of::<IPAddress>();
        let default_cidr = self.alloc.default_cidr();
        let mut cidrs = self.items(cidr_info).await?;
        if !cidrs
            .iter()
            .any(|c| c["metadata"]["name"] == DEFAULT_SERVICE_CIDR)
        {
            self.ensure_default_service_cidr().await?;
            cidrs = self.items(cidr_info).await?;
        }
        let deleting = |c: &Value| !c["metadata"]["deletionTimestamp"].is_null();
        let extra: Vec<(String, String)> = cidrs
            .iter()
            .filter(|c| !deleting(c) && c["metadata"]["name"] != DEFAULT_SERVICE_CIDR)
            .flat_map(|c| {
                let name = c["metadata"]["name"].as_str().unwrap_or("").to_string();
                cidrs_of(c).into_iter().map(move |r| (name.clone(), r))
            })
            .collect();
        self.alloc.set_extra_ranges(&extra);

        let services = self.items(registry::of::<Service>()).await?;
        let ip_addresses = self.items(ip_info).await?;
        // Repair: every Service's address stays reserved, whatever an
        // IPAddress deletion gave back.
        for svc in &services {
            for ip in cluster_ips(svc) {
                let _ = self.alloc.reserve_ip(&ip);
            }
        }
        self.sync_ip_addresses(&services, &ip_addresses).await;

        let mut in_use: Vec<String> = services.iter().flat_map(cluster_ips).collect();
        in_use.extend(
            ip_addresses
                .iter()
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string)),
        );
        let mut staying: Vec<String> = extra.into_iter().map(|(_, r)| r).collect();
        staying.push(default_cidr.clone());
        for cidr in &cidrs {
            let name = cidr["metadata"]["name"].as_str().unwrap_or("").to_string();
            let terminating = deleting(cidr);
            // The default range serves whatever its object's fate, but its
            // object waits, as Kubernetes' does, while addresses use it.
            let others: Vec<String> = staying
                .iter()
                .filter(|r| name != DEFAULT_SERVICE_CIDR || **r != default_cidr)
                .cloned()
                .collect();
            if terminating && may_go(cidr, &others, &in_use) {
                self.update_with(
                    cidr_info,
                    None,
                    &name,
                    Mode::Main,
                    WriteOpts::default(),
                    |o| {
                        let mut o = o.clone();
                        if let Some(f) = o["metadata"]["finalizers"].as_array_mut() {
                            f.retain(|f| f != FINALIZER);
                        }
                        Ok(o)
                    },
                )
                .await
                .map_err(|e| anyhow::anyhow!("releasing ServiceCIDR {name}: {e}"))?;
                continue;
            }
            if with_condition(cidr, &ready_condition(terminating)).is_some() {
                self.update_with(
                    cidr_info,
                    None,
                    &name,
                    Mode::Status,
                    WriteOpts::default(),
                    |o| {
                        Ok(with_condition(o, &ready_condition(terminating))
                            .unwrap_or_else(|| o.clone()))
                    },
                )
                .await
                .map_err(|e| anyhow::anyhow!("ServiceCIDR {name}'s status: {e}"))?;
            }
        }
        Ok(())
    }

    /// An IPAddress for every Service address, none for an address no
    /// Service holds; a failure is logged and retried on the next pass.
    async fn sync_ip_addresses(&self, services: &[Value], ip_addresses: &[Value]) {
        let ip_info = registry::of::<IPAddress>();
        let (create, delete) = ip_address_changes(services, ip_addresses);
        for obj in create {
            match self.create(ip_info, None, obj, WriteOpts::default()).await {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => tracing::warn!(error = %e, "writing an IPAddress"),
            }
        }
        for name in delete {
            match self
                .delete(ip_info, None, &name, &DeleteOptions::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => tracing::warn!(error = %e, ip = %name, "deleting an IPAddress"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}, "spec": {"clusterIP": ip, "clusterIPs": [ip]}})
    }

    #[test]
    fn every_cluster_ip_gets_an_ip_address_naming_its_service() {
        let services = [
            svc("default", "web", "10.96.0.20"),
            svc("default", "headless", "None"),
        ];
        let user = json!({"metadata": {"name": "10.96.0.30"},
            "spec": {"parentRef": {"resource": "gateways", "name": "gw"}}});
        let stale = ip_address_for("10.96.0.40", &svc("default", "gone", "10.96.0.40"));
        let moved = ip_address_for("10.96.0.20", &svc("other", "web", "10.96.0.20"));
        let (create, delete) = ip_address_changes(&services, &[user.clone(), stale]);
        assert_eq!(create.len(), 1);
        assert_eq!(create[0]["metadata"]["name"], "10.96.0.20");
        assert_eq!(
            create[0]["spec"]["parentRef"],
            json!({"group": "", "resource": "services", "namespace": "default", "name": "web"})
        );
        assert_eq!(
            create[0]["metadata"]["labels"][MANAGED_BY_LABEL],
            MANAGED_BY
        );
        assert_eq!(
            delete,
            ["10.96.0.40"],
            "a user's IPAddress is not ours to delete"
        );
        // Recorded for another Service (the name was reused): replaced.
        let (create, delete) = ip_address_changes(&services, &[moved]);
        assert!(create.is_empty(), "the old one goes first");
        assert_eq!(delete, ["10.96.0.20"]);
    }

    #[test]
    fn a_service_cidr_goes_once_no_address_depends_on_it_alone() {
        let extra = json!({"spec": {"cidrs": ["10.200.0.0/24"]}});
        let staying = vec!["10.96.0.0/12".to_string()];
        assert!(may_go(&extra, &staying, &["10.96.0.5".into()]));
        assert!(!may_go(&extra, &staying, &["10.200.0.7".into()]));
        // Covered by another range that stays: it may go.
        let wider = vec!["10.96.0.0/12".to_string(), "10.200.0.0/16".to_string()];
        assert!(may_go(&extra, &wider, &["10.200.0.7".into()]));
    }

    #[test]
    fn ready_condition_changes_only_when_it_differs() {
        let fresh = json!({"metadata": {"name": "x"}});
        let ready = with_condition(&fresh, &ready_condition(false)).unwrap();
        assert_eq!(ready["status"]["conditions"][0]["status"], "True");
        assert!(with_condition(&ready, &ready_condition(false)).is_none());
        let going = with_condition(&ready, &ready_condition(true)).unwrap();
        assert_eq!(going["status"]["conditions"][0]["reason"], "Terminating");
        assert_eq!(going["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
