//! The ipvs [`Backend`]: desired IPVS state from the caches, the ordered
//! changes against the kernel's, applied over netlink.

use super::netlink::io;
use super::{changes, desired, Change, IpvsState, DEVICE};
use crate::proxier::Backend;
use std::net::Ipv4Addr;

/// The ipvs backend: the same caches as the iptables one, kernel state out.
pub struct IpvsBackend {
    ports: crate::PortSource,
    node_ips: Vec<Ipv4Addr>,
    ipvs: io::Ipvs,
    device: io::Device,
    /// What the kernel holds as far as we know (None: read it first).
    current: Option<IpvsState>,
    /// NetworkPolicies, as iptables chains of their own.
    policies: Option<crate::iptables::backend::PolicyEnforcer>,
    /// Services already told about (externalTrafficPolicy: Local keeps no source here).
    warned_source: std::collections::HashSet<String>,
}

impl IpvsBackend {
    pub async fn new(
        ports: crate::PortSource,
        node_ips: Vec<Ipv4Addr>,
    ) -> anyhow::Result<IpvsBackend> {
        Ok(IpvsBackend {
            ports,
            node_ips,
            ipvs: io::Ipvs::open()?,
            device: io::Device::ensure().await?,
            current: None,
            policies: None,
            warned_source: Default::default(),
        })
    }

    /// Enforces NetworkPolicies too (the same chains as the iptables mode).
    pub fn with_policies(mut self, p: crate::iptables::backend::PolicyEnforcer) -> Self {
        self.policies = Some(p);
        self
    }

    /// One sync: desired → changes against current → netlink. Returns the
    /// number of changes applied.
    pub async fn apply_changes(&mut self) -> anyhow::Result<usize> {
        let current = match self.current.take() {
            Some(c) => c,
            None => io::current(&mut self.ipvs, &self.device, &self.node_ips).await?,
        };
        let ports = self.ports.ports();
        for p in ports
            .iter()
            .filter(|p| p.external_local && p.node_port.is_some())
        {
            // Said, not silently ignored: this mode keeps the local-only
            // destinations but masquerades every client from outside.
            if self
                .warned_source
                .insert(format!("{}/{}", p.namespace, p.service))
            {
                tracing::warn!(
                    service = %format!("{}/{}", p.namespace, p.service),
                    "externalTrafficPolicy: Local in ipvs mode: NodePort traffic goes to this node's endpoints only, but the client's source address is not preserved (use --proxy-mode iptables for that)"
                );
            }
        }
        let desired = desired(&ports, &self.node_ips);
        let todo = changes(&current, &desired);
        for c in &todo {
            match c {
                Change::AddAddress(ip) => self.device.add(*ip).await?,
                Change::DelAddress(ip) => self.device.delete(*ip).await?,
                other => self.ipvs.apply(other)?,
            }
        }
        self.current = Some(desired);
        Ok(todo.len())
    }
}

impl Backend for IpvsBackend {
    const NAME: &'static str = "ipvs";

    async fn sync_rules(&mut self) -> anyhow::Result<bool> {
        let policies = match self.policies.as_mut() {
            Some(p) => p.sync().await?,
            None => false,
        };
        Ok(self.apply_changes().await? > 0 || policies)
    }

    fn resync_from_kernel(&mut self) {
        self.current = None;
        if let Some(p) = self.policies.as_mut() {
            p.resync_from_kernel();
        }
    }
}

/// The node's global IPv4 addresses (NodePorts listen on them), except
/// the VIPs on [`DEVICE`].
pub async fn node_addresses() -> anyhow::Result<Vec<Ipv4Addr>> {
    let out = tokio::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().nth(1) != Some(DEVICE))
        .filter_map(|l| {
            let cidr = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            cidr.split('/').next()?.parse().ok()
        })
        .collect())
}

/// What ipvs mode needs besides IPVS itself: conntrack for IPVS
/// connections (so they can be masqueraded), and the masquerade rule for
/// off-cluster clients, in KUBE-POSTROUTING (written once; the iptables
/// backend's chains are not used in this mode).
pub async fn prepare(cfg: &crate::proxier::Config) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::write("/proc/sys/net/ipv4/vs/conntrack", "1")
        .context("setting net.ipv4.vs.conntrack=1")?;
    let mut rules = format!("*nat\n:{} - [0:0]\n", crate::iptables::POSTROUTING);
    if let Some(cidr) = &cfg.cluster_cidr {
        rules.push_str(&format!(
            "-A {} -m ipvs --vdir ORIGINAL --vmethod MASQ ! -s {cidr} -j MASQUERADE\n",
            crate::iptables::POSTROUTING
        ));
    }
    rules.push_str("COMMIT\n");
    cfg.iptables.restore(&rules).await?;
    cfg.iptables.ensure_postrouting_jump().await
}
