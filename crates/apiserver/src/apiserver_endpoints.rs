//! The endpoints of the `default/kubernetes` Service when several apiservers
//! share one store (Kubernetes' lease endpoint reconciler): each apiserver
//! renews a Lease naming its address every 10 s, and writes the Service's
//! Endpoints and EndpointSlice as the addresses of the Leases that have not
//! expired. An apiserver that stops removes its Lease and itself; one that
//! dies drops out when its Lease expires (15 s), so pods reaching
//! `kubernetes.default` are never sent to a dead apiserver for long.
//!
//! ```text
//!  apiserver 10.0.0.10 ─every 10 s─▶ Lease kube-system/apiserver-endpoint-10.0.0.10 (15 s)
//!  apiserver 10.0.0.8  ─every 10 s─▶ Lease kube-system/apiserver-endpoint-10.0.0.8  (15 s)
//!     each, after renewing: live Leases ─▶ Endpoints/EndpointSlice default/kubernetes = [10.0.0.8, 10.0.0.10]
//! ```

use crate::ApiServer;
use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use minik8s_api::registry;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long an apiserver's Lease lasts without renewal (Kubernetes' master lease TTL).
pub const LEASE_SECONDS: i64 = 15;
/// How often each apiserver renews its Lease and rewrites the endpoints.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(10);
/// The label on the apiservers' endpoint Leases (the value is the address).
pub const LABEL: &str = "minik8s.io/apiserver-endpoint";

fn lease_name(ip: IpAddr) -> String {
    // IPv6 colons are not allowed in names.
    format!("apiserver-endpoint-{}", ip.to_string().replace(':', "-"))
}

/// The addresses of the Leases still valid at `now`, sorted and distinct.
pub fn live_addresses(leases: &[Value], now: DateTime<Utc>) -> Vec<String> {
    let mut ips: Vec<String> = leases
        .iter()
        .filter(|l| {
            let spec = &l["spec"];
            let seconds = spec["leaseDurationSeconds"]
                .as_i64()
                .unwrap_or(LEASE_SECONDS);
            spec["renewTime"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t.with_timezone(&Utc) + chrono::Duration::seconds(seconds) > now)
        })
        .filter_map(|l| l["metadata"]["labels"][LABEL].as_str())
        .filter(|ip| ip.parse::<IpAddr>().is_ok())
        .map(str::to_string)
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

impl ApiServer {
    /// Keeps this apiserver (`ip:port`) among the `kubernetes` Service's
    /// endpoints until shutdown, then takes it out.
    pub(crate) fn spawn_endpoint_reconciler(self: &Arc<Self>, ip: IpAddr, port: u16) {
        let srv = self.clone();
        let stop = self.shutdown_signal();
        tokio::spawn(async move {
            tokio::pin!(stop);
            loop {
                if let Err(e) = srv.reconcile_endpoints(ip, port, true).await {
                    tracing::warn!(error = %e, "the kubernetes Service's endpoints");
                }
                tokio::select! {
                    _ = tokio::time::sleep(RECONCILE_EVERY) => {}
                    _ = &mut stop => break,
                }
            }
            if let Err(e) = srv.reconcile_endpoints(ip, port, false).await {
                tracing::warn!(error = %e, "removing this apiserver from the kubernetes Service");
            }
        });
    }

    /// One pass: renew (or, when `serving` is false, delete) this
    /// apiserver's Lease, then write the endpoints from the live Leases.
    async fn reconcile_endpoints(
        &self,
        ip: IpAddr,
        port: u16,
        serving: bool,
    ) -> anyhow::Result<()> {
        let leases = registry::of::<Lease>();
        let name = lease_name(ip);
        if serving {
            let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-system", "labels": {LABEL: ip.to_string()}},
                "spec": {"holderIdentity": ip.to_string(), "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}});
            self.put_object(leases, lease, |old, new| {
                let mut out = old.clone();
                out["spec"] = new["spec"].clone();
                out
            })
            .await?;
        } else {
            match self
                .delete(leases, Some("kube-system"), &name, &Default::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => anyhow::bail!("deleting Lease {name}: {e}"),
            }
        }
        let params = crate::params::Params::parse(Some(&format!("labelSelector={LABEL}")))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let listed = self.list(leases, Some("kube-system"), &params).await?;
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let mut ips = live_addresses(&items, Utc::now());
        if !serving {
            ips.retain(|other| other != &ip.to_string());
        }
        self.put_kubernetes_endpoints(&ips, port).await
    }

    /// Endpoints and EndpointSlice `default/kubernetes`: `ips` on `port`
    /// (written only when they differ from what is stored).
    async fn put_kubernetes_endpoints(&self, ips: &[String], port: u16) -> anyhow::Result<()> {
        let subsets = if ips.is_empty() {
            json!([])
        } else {
            json!([{"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
        };
        let family = match ips.first().and_then(|ip| ip.parse::<IpAddr>().ok()) {
            Some(IpAddr::V6(_)) => "IPv6",
            _ => "IPv4",
        };
        let endpoints: Vec<Value> = ips
            .iter()
            .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
            .collect();
        let current = |info, field: &'static str| async move {
            self.read(info, Some("default"), "kubernetes")
                .await
                .map(|(obj, _)| obj[field].clone())
                .ok()
        };
        if current(registry::of::<Endpoints>(), "subsets").await != Some(subsets.clone()) {
            let obj = json!({"metadata": {"name": "kubernetes", "namespace": "default",
                                          "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                             "subsets": subsets});
            self.put_object(registry::of::<Endpoints>(), obj, |old, new| {
                let mut out = old.clone();
                out["subsets"] = new["subsets"].clone();
                out
            })
            .await?;
        }
        if current(registry::of::<EndpointSlice>(), "endpoints").await
            != Some(Value::Array(endpoints.clone()))
        {
            let slice = json!({"metadata": {"name": "kubernetes", "namespace": "default",
                                            "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "addressType": family, "endpoints": endpoints,
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]});
            self.put_object(registry::of::<EndpointSlice>(), slice, |old, new| {
                let mut out = old.clone();
                out["endpoints"] = new["endpoints"].clone();
                out["ports"] = new["ports"].clone();
                out
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(ip: &str, renewed: DateTime<Utc>, seconds: i64) -> Value {
        json!({"metadata": {"labels": {LABEL: ip}},
               "spec": {"leaseDurationSeconds": seconds,
                        "renewTime": renewed.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}})
    }

    #[test]
    fn only_unexpired_leases_are_endpoints() {
        let now = Utc::now();
        let ago = |s| now - chrono::Duration::seconds(s);
        let leases = [
            lease("10.0.0.10", ago(3), 15),
            lease("10.0.0.8", ago(14), 15),
            lease("10.0.0.9", ago(16), 15), // expired: its apiserver died
            lease("10.0.0.10", ago(1), 15), // the same address twice
            lease("not-an-ip", ago(1), 15), // ignored
            json!({"metadata": {"labels": {}}}), // not an endpoint lease
        ];
        assert_eq!(live_addresses(&leases, now), ["10.0.0.10", "10.0.0.8"]);
        assert!(live_addresses(&[lease("10.0.0.9", ago(20), 30)], now) == ["10.0.0.9"]);
    }
}
