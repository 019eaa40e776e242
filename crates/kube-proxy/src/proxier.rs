//! The kube-proxy loop: informers on Services and EndpointSlices wake one
//! sync task; [`Proxier::sync_rules`] computes the desired chains from the
//! caches (pure: [`crate::service_ports`] → [`iptables::desired`]) and hands
//! the difference to `iptables-restore --noflush`.
//!
//! ```text
//!   Service / EndpointSlice events ──▶ notify ──▶ (wait min_sync) ──▶ sync_rules
//!                                                                   │
//!              current chains (last applied, or iptables-save at start)
//!                                     diff ──▶ iptables-restore --noflush
//! ```
//!
//! The chains last applied are kept in memory, so a resync with no change
//! runs no command at all; every `resync` period the kernel's state is read
//! again with `iptables-save`, so rules someone else removed come back.

use crate::iptables::{self, Tables};
use crate::PortSource;
use minik8s_client::SharedInformers;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::Notify;

/// Runs the iptables tools, optionally inside another network namespace
/// (`nsenter --net=<path>`; tests use it to keep their rules off the host).
#[derive(Debug, Clone, Default)]
pub struct Iptables {
    pub netns: Option<String>,
}

impl Iptables {
    fn command(&self, program: &str) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={ns}")).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    async fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut cmd = self.command(program);
        cmd.args(args);
        Ok(minik8s_client::command::run(cmd, stdin).await?)
    }

    /// Our chains in the nat and filter tables as the kernel has them.
    pub async fn save(&self) -> anyhow::Result<Tables> {
        let text = self.run("iptables-save", &[], None).await?;
        Ok(Tables::parse_save(&text))
    }

    pub async fn restore(&self, input: &str) -> anyhow::Result<()> {
        self.run("iptables-restore", &["-w", "--noflush"], Some(input))
            .await
            .map(drop)
    }

    /// The jumps from the built-in chains into ours (nat PREROUTING/OUTPUT/
    /// POSTROUTING, filter INPUT/FORWARD/OUTPUT), added once.
    pub async fn ensure_jumps(&self) -> anyhow::Result<()> {
        self.ensure("nat", iptables::jumps()).await?;
        self.ensure("filter", iptables::filter_jumps()).await
    }

    /// Only the POSTROUTING jump (ipvs mode has no KUBE-SERVICES chain).
    pub async fn ensure_postrouting_jump(&self) -> anyhow::Result<()> {
        let jumps = iptables::jumps()
            .into_iter()
            .filter(|(c, _)| *c == "POSTROUTING");
        self.ensure("nat", jumps.collect()).await
    }

    async fn ensure(&self, table: &str, jumps: Vec<(&str, String)>) -> anyhow::Result<()> {
        for (chain, rule) in jumps {
            let words = shell_words(&rule);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let iptables = || self.command("iptables");
            minik8s_client::command::ensure_iptables_rule(iptables, table, chain, &words).await?;
        }
        Ok(())
    }
}

impl Iptables {
    /// `kube-proxy --cleanup`: removes the jumps, then every chain of ours.
    pub async fn cleanup(&self) -> anyhow::Result<()> {
        let nat = iptables::jumps().into_iter().map(|j| ("nat", j));
        let filter = iptables::filter_jumps().into_iter().map(|j| ("filter", j));
        for (table, (chain, rule)) in nat.chain(filter) {
            let words = shell_words(&rule);
            loop {
                let mut delete = vec!["-w", "-t", table, "-D", chain];
                delete.extend(words.iter().map(String::as_str));
                if self.run("iptables", &delete, None).await.is_err() {
                    break;
                }
            }
        }
        let current = self.save().await?;
        if let Some(input) = Tables::restore_input(&current, &Tables::default()) {
            self.restore(&input).await?;
        }
        Ok(())
    }
}

/// Splits a rule the way a shell would (double quotes group words).
fn shell_words(rule: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for ch in rule.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Which backend programs the VIPs.
    pub mode: crate::Mode,
    /// The node's own addresses: NodePorts listen on them (ipvs mode; the
    /// iptables rules match any local address instead).
    pub node_ips: Vec<std::net::Ipv4Addr>,
    /// The pod network; sources outside it are masqueraded on their way to a VIP.
    pub cluster_cidr: Option<String>,
    /// VIPs this node answers itself (the cluster DNS): never refused for
    /// lack of endpoints.
    pub served_locally: Vec<String>,
    /// Changes arriving within this window are applied together.
    pub min_sync: Duration,
    /// How often the kernel's rules are read back and repaired.
    pub resync: Duration,
    pub iptables: Iptables,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: crate::Mode::Iptables,
            node_ips: Vec::new(),
            cluster_cidr: Some("10.244.0.0/16".into()),
            served_locally: Vec::new(),
            min_sync: Duration::from_millis(100),
            resync: Duration::from_secs(30),
            iptables: Iptables::default(),
        }
    }
}

/// The iptables proxier: caches in, rules out.
pub struct Proxier {
    ports: PortSource,
    cfg: Config,
    /// What the kernel holds, as far as we know (None: read it first).
    current: Option<Tables>,
}

impl Proxier {
    /// Registers the caches and the wake-up handlers on `informers`.
    pub fn new(informers: &SharedInformers, cfg: Config, wake: Arc<Notify>) -> Proxier {
        Proxier {
            ports: PortSource::new(informers, wake),
            cfg,
            current: None,
        }
    }

    /// The desired chains from the caches.
    pub fn desired(&self) -> Tables {
        let ports = self.ports.ports();
        Tables {
            nat: iptables::desired(&ports, self.cfg.cluster_cidr.as_deref()),
            filter: iptables::desired_filter(&ports, &self.cfg.served_locally),
        }
    }

    /// One sync: desired → diff with current → iptables-restore. Returns
    /// whether anything was written.
    pub async fn sync_rules(&mut self) -> anyhow::Result<bool> {
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

    /// Forget what was applied: the next sync reads the kernel's rules.
    pub fn resync_from_kernel(&mut self) {
        self.current = None;
    }
}

/// Keeps the rules in sync until the process ends (the informers behind
/// `proxier` must be started and synced).
pub async fn run(mut proxier: Proxier, wake: Arc<Notify>) {
    let cfg = proxier.cfg.clone();
    tracing::info!("kube-proxy (iptables) caches synced; applying rules");
    let mut last_full = tokio::time::Instant::now();
    let mut jumps_in_place = false;
    loop {
        let synced = proxier.sync_rules().await.map(|changed| {
            if changed {
                tracing::debug!("rules updated");
            }
        });
        // The jumps point into our chains, so they can only follow the first sync.
        let result = match synced {
            Ok(()) if !jumps_in_place => cfg.iptables.ensure_jumps().await.map(|()| {
                jumps_in_place = true;
            }),
            other => other,
        };
        if let Err(e) = result {
            tracing::warn!(error = %format!("{e:#}"), "sync_rules failed; retrying");
            proxier.resync_from_kernel();
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let until_full = cfg.resync.saturating_sub(last_full.elapsed());
        if tokio::time::timeout(until_full, wake.notified())
            .await
            .is_err()
        {
            // Someone may have flushed our rules: read the kernel's state again.
            proxier.resync_from_kernel();
            jumps_in_place = false;
            last_full = tokio::time::Instant::now();
        } else {
            // Batch the burst of events that usually follows one change.
            tokio::time::sleep(cfg.min_sync).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_split_like_a_shell() {
        assert_eq!(
            shell_words("-m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"),
            vec![
                "-m",
                "comment",
                "--comment",
                "kubernetes service portals",
                "-j",
                "KUBE-SERVICES"
            ]
        );
    }
}
