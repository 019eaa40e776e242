//! The iptables backend's I/O: the [`Backend`] that writes the difference
//! between the chains last applied and the desired ones (through
//! [`Iptables`], `tools.rs`), then puts the jumps into them in place.

use crate::iptables::network_policy::{self, Cluster, NamespaceLabels, PolicyPod};
pub use crate::iptables::tools::Iptables;
use crate::iptables::{self, Chains, Tables};
use crate::proxier::{Backend, Config};
use crate::PortSource;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use minik8s_client::informer::{Cache, Event};
use minik8s_client::SharedInformers;
use std::sync::Arc;
use tokio::sync::Notify;

/// What NetworkPolicies are computed from: the policies, the pods with
/// their addresses and labels, the namespaces' labels.
pub struct PolicySource {
    policies: Cache<NetworkPolicy>,
    pods: Cache<Pod>,
    namespaces: Cache<Namespace>,
}

/// A pod as policies see it: with an address of its own (not the node's)
/// and not finished.
pub fn policy_pod(p: &Pod) -> Option<PolicyPod> {
    let spec = p.spec.as_ref()?;
    let status = p.status.as_ref()?;
    if spec.host_network == Some(true)
        || matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
    {
        return None;
    }
    let ip = status.pod_ip.clone().filter(|ip| !ip.is_empty())?;
    let ports = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|port| {
            let name = port.name.clone()?;
            let proto = port.protocol.clone().unwrap_or_else(|| "TCP".into());
            Some((name, proto, u16::try_from(port.container_port).ok()?))
        })
        .collect();
    Some(PolicyPod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        ip,
        labels: p.metadata.labels.clone().unwrap_or_default(),
        ports,
    })
}

impl PolicySource {
    /// Registers on `informers` (before they start). A policy's change
    /// wakes the loop; a pod's or namespace's only while policies exist and
    /// only when what policies read of it changed.
    pub fn new(informers: &SharedInformers, wake: Arc<Notify>) -> PolicySource {
        let policies: Cache<NetworkPolicy> = informers.cache();
        let w = wake.clone();
        informers
            .on_event::<NetworkPolicy>(move |_| w.notify_one())
            .expect("registered before start");
        let (w, any) = (wake.clone(), policies.clone());
        informers
            .on_event::<Pod>(move |ev| {
                let changed = match ev {
                    Event::Updated { old, new } => policy_pod(old) != policy_pod(new),
                    Event::Added(p) | Event::Deleted(p) => policy_pod(p).is_some(),
                };
                if changed && !any.list().is_empty() {
                    w.notify_one();
                }
            })
            .expect("registered before start");
        let any = policies.clone();
        informers
            .on_event::<Namespace>(move |ev| {
                let changed = match ev {
                    Event::Updated { old, new } => old.metadata.labels != new.metadata.labels,
                    _ => true,
                };
                if changed && !any.list().is_empty() {
                    wake.notify_one();
                }
            })
            .expect("registered before start");
        PolicySource {
            policies,
            pods: informers.cache(),
            namespaces: informers.cache(),
        }
    }

    pub fn any(&self) -> bool {
        !self.policies.list().is_empty()
    }

    /// The policy chains for the filter table.
    pub fn chains(&self) -> Chains {
        let policies = self.policies.list();
        if policies.is_empty() {
            return network_policy::desired(&Cluster {
                policies: &[],
                pods: &[],
                namespaces: &NamespaceLabels::new(),
            });
        }
        let mut pods: Vec<PolicyPod> = self
            .pods
            .list()
            .iter()
            .filter_map(|p| policy_pod(p))
            .collect();
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let namespaces: NamespaceLabels = self
            .namespaces
            .list()
            .iter()
            .filter_map(|n| {
                Some((
                    n.metadata.name.clone()?,
                    n.metadata.labels.clone().unwrap_or_default(),
                ))
            })
            .collect();
        network_policy::desired(&Cluster {
            policies: &policies,
            pods: &pods,
            namespaces: &namespaces,
        })
    }
}

/// NetworkPolicy chains kept on their own, for a proxier that writes no
/// filter chains of its own (ipvs mode): only the `KUBE-NWPLCY*` chains of
/// the filter table are read and written.
pub struct PolicyEnforcer {
    source: PolicySource,
    iptables: Iptables,
    current: Option<Chains>,
    jump_in_place: bool,
    bridge_filtering: bool,
}

impl PolicyEnforcer {
    pub fn new(source: PolicySource, iptables: Iptables) -> PolicyEnforcer {
        PolicyEnforcer {
            source,
            iptables,
            current: None,
            jump_in_place: false,
            bridge_filtering: false,
        }
    }

    /// One sync of the policy chains; returns whether anything was written.
    pub async fn sync(&mut self) -> anyhow::Result<bool> {
        if !self.bridge_filtering && self.source.any() {
            self.iptables.filter_bridged_traffic().await;
            self.bridge_filtering = true;
        }
        let current = match self.current.take() {
            Some(c) => c,
            None => {
                let text = self
                    .iptables
                    .run("iptables-save", &["-t", "filter"], None)
                    .await?;
                iptables::parse_save_table(&text, "filter")
                    .into_iter()
                    .filter(|(name, _)| name.starts_with(network_policy::POLICIES))
                    .collect()
            }
        };
        let desired = self.source.chains();
        let written = match iptables::restore_input_table("filter", &current, &desired) {
            Some(input) => {
                self.iptables.restore(&input).await?;
                true
            }
            None => false,
        };
        self.current = Some(desired);
        if !self.jump_in_place || (written && self.source.any()) {
            self.iptables.ensure_policy_jump().await?;
            self.jump_in_place = true;
        }
        Ok(written)
    }

    /// Forget what was applied: the next sync reads the kernel's state.
    pub fn resync_from_kernel(&mut self) {
        self.current = None;
        self.jump_in_place = false;
    }
}

/// The iptables backend: caches in, rules out.
pub struct IptablesBackend {
    ports: PortSource,
    policies: PolicySource,
    cfg: Config,
    /// What the kernel holds, as far as we know (None: read it first).
    current: Option<Tables>,
    /// The jumps from the kernel's chains into ours (they can only follow
    /// the first sync, which creates our chains).
    jumps_in_place: bool,
    /// Bridged traffic (pods on one node's bridge) meets iptables: set once
    /// policies exist.
    bridge_filtering: bool,
}

impl IptablesBackend {
    /// Registers the caches and the wake-up handlers on `informers`.
    pub fn new(informers: &SharedInformers, cfg: Config, wake: Arc<Notify>) -> IptablesBackend {
        IptablesBackend {
            ports: PortSource::new(informers, wake.clone(), &cfg.node_name),
            policies: PolicySource::new(informers, wake),
            cfg,
            current: None,
            jumps_in_place: false,
            bridge_filtering: false,
        }
    }

    /// The desired chains from the caches.
    pub fn desired(&self) -> Tables {
        let ports = self.ports.ports();
        let mut filter = iptables::desired_filter(&ports, &self.cfg.served_locally);
        filter.extend(self.policies.chains());
        Tables {
            nat: iptables::desired(&ports, self.cfg.cluster_cidr.as_deref()),
            filter,
        }
    }

    /// desired → diff with current → iptables-restore. Returns whether
    /// anything was written.
    async fn restore_difference(&mut self) -> anyhow::Result<bool> {
        let current = match self.current.take() {
            Some(c) => c,
            None => self.cfg.iptables.save().await?,
        };
        let desired = self.desired();
        let Some(input) = Tables::restore_input(&current, &desired) else {
            self.current = Some(current);
            return Ok(false);
        };
        // On failure `current` stays unknown, so the next sync reads the kernel again.
        self.cfg.iptables.restore(&input).await?;
        self.current = Some(desired);
        Ok(true)
    }
}

impl Backend for IptablesBackend {
    const NAME: &'static str = "iptables";

    async fn sync_rules(&mut self) -> anyhow::Result<bool> {
        let policies = self.policies.any();
        if !self.bridge_filtering && policies {
            self.cfg.iptables.filter_bridged_traffic().await;
            self.bridge_filtering = true;
        }
        let changed = self.restore_difference().await?;
        if !self.jumps_in_place {
            self.cfg.iptables.ensure_jumps().await?;
            self.jumps_in_place = true;
        } else if changed && policies {
            // Others may have put rules above the policy jump since.
            self.cfg.iptables.ensure_policy_jump().await?;
        }
        Ok(changed)
    }

    fn resync_from_kernel(&mut self) {
        self.current = None;
        self.jumps_in_place = false;
    }
}
