//! The iptables backend's I/O: running `iptables-save` / `iptables-restore`
//! (optionally in another network namespace), and the [`Backend`] that
//! writes the difference between the chains last applied and the desired
//! ones, then puts the jumps into them in place.

use crate::iptables::{self, Tables};
use crate::proxier::{Backend, Config};
use crate::PortSource;
use minik8s_client::SharedInformers;
use std::sync::Arc;
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
        Ok(node_tools::run(cmd, stdin).await?)
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
            node_tools::ensure_iptables_rule(iptables, table, chain, &words).await?;
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

/// The iptables backend: caches in, rules out.
pub struct IptablesBackend {
    ports: PortSource,
    cfg: Config,
    /// What the kernel holds, as far as we know (None: read it first).
    current: Option<Tables>,
    /// The jumps from the kernel's chains into ours (they can only follow
    /// the first sync, which creates our chains).
    jumps_in_place: bool,
}

impl IptablesBackend {
    /// Registers the caches and the wake-up handlers on `informers`.
    pub fn new(informers: &SharedInformers, cfg: Config, wake: Arc<Notify>) -> IptablesBackend {
        IptablesBackend {
            ports: PortSource::new(informers, wake),
            cfg,
            current: None,
            jumps_in_place: false,
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
        let changed = self.restore_difference().await?;
        if !self.jumps_in_place {
            self.cfg.iptables.ensure_jumps().await?;
            self.jumps_in_place = true;
        }
        Ok(changed)
    }

    fn resync_from_kernel(&mut self) {
        self.current = None;
        self.jumps_in_place = false;
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
