//! Running the iptables tools (`iptables-save`, `iptables-restore`,
//! `iptables`, `sysctl`), optionally inside another network namespace: what
//! the backend (`backend.rs`) and `kube-proxy --cleanup` write the kernel with.

use crate::iptables::network_policy;
use crate::iptables::{self, Tables};
use tokio::process::Command;

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

    pub(crate) async fn run(
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
        let services = iptables::filter_jumps()
            .into_iter()
            .filter(|(_, rule)| !rule.ends_with(network_policy::POLICIES));
        self.ensure("filter", services.collect()).await?;
        self.ensure_policy_jump().await
    }

    /// Only the POSTROUTING jump (ipvs mode has no KUBE-SERVICES chain).
    pub async fn ensure_postrouting_jump(&self) -> anyhow::Result<()> {
        let jumps = iptables::jumps()
            .into_iter()
            .filter(|(c, _)| *c == "POSTROUTING");
        self.ensure("nat", jumps.collect()).await
    }

    /// FORWARD's jump into the policy chains, kept the chain's first rule:
    /// Docker and the kubelet insert rules that accept pod traffic at the
    /// top of FORWARD when they set a network up, and a policy below them
    /// would never see a packet.
    pub async fn ensure_policy_jump(&self) -> anyhow::Result<()> {
        for (chain, rule) in iptables::filter_jumps()
            .into_iter()
            .filter(|(_, rule)| rule.ends_with(network_policy::POLICIES))
        {
            let listed = self
                .run("iptables", &["-w", "-t", "filter", "-S", chain], None)
                .await?;
            let want = format!("-A {chain} {rule}");
            let first = listed
                .lines()
                .find(|l| l.starts_with(&format!("-A {chain} ")));
            if first == Some(want.as_str()) {
                continue;
            }
            let words = shell_words(&rule);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            // Copies further down go first (their count is small and bounded).
            for _ in 0..listed.lines().filter(|l| *l == want).count() {
                let mut delete = vec!["-w", "-t", "filter", "-D", chain];
                delete.extend(&words);
                self.run("iptables", &delete, None).await?;
            }
            let mut insert = vec!["-w", "-t", "filter", "-I", chain, "1"];
            insert.extend(&words);
            self.run("iptables", &insert, None).await?;
        }
        Ok(())
    }

    /// Makes bridged pod traffic meet iptables (br_netfilter), once policies
    /// exist: pods of one node talk over its bridge, and without this their
    /// packets would bypass FORWARD and every policy.
    pub async fn filter_bridged_traffic(&self) {
        let set = self
            .run(
                "sysctl",
                &["-qw", "net.bridge.bridge-nf-call-iptables=1"],
                None,
            )
            .await;
        if let Err(e) = set {
            tracing::warn!(error = %format!("{e:#}"), "NetworkPolicy: cannot make bridged pod traffic meet iptables (br_netfilter); policies hold between nodes only");
        }
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
