//! Running the node's own tools (iptables, iptables-restore, ip) from the
//! node agents: the kubelet for its pod network rules, kube-proxy for
//! Services. Its own crate, apart from the API client: only the node agents
//! run programs on the host.

use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("running {program} (is it installed?): {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{command}: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{command}: {source}")]
    Io {
        command: String,
        source: std::io::Error,
    },
}

/// Runs `cmd` with `stdin` as its input; its stdout on success, its stderr
/// in the error otherwise.
pub async fn run(mut cmd: Command, stdin: Option<&str>) -> Result<String, CommandError> {
    let std_cmd = cmd.as_std();
    let program = std_cmd.get_program().to_string_lossy().into_owned();
    let command = std::iter::once(program.clone())
        .chain(std_cmd.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let io = |source| CommandError::Io {
        command: command.clone(),
        source,
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CommandError::Spawn { program, source })?;
    if let Some(mut input) = child.stdin.take() {
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.map_err(io)?;
        }
    }
    let out = child.wait_with_output().await.map_err(io)?;
    if !out.status.success() {
        return Err(CommandError::Failed {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Makes sure an iptables rule exists: `-C` checks for it, `-I <chain> 1`
/// puts it first when it is missing (the jumps into a component's own
/// chains). `iptables` builds the bare command, e.g. inside a network
/// namespace; `rule` is the rule's words after the chain name.
pub async fn ensure_iptables_rule(
    iptables: impl Fn() -> Command,
    table: &str,
    chain: &str,
    rule: &[&str],
) -> Result<(), CommandError> {
    let mut check = iptables();
    check.args(["-w", "-t", table, "-C", chain]).args(rule);
    if run(check, None).await.is_ok() {
        return Ok(());
    }
    let mut insert = iptables();
    insert
        .args(["-w", "-t", table, "-I", chain, "1"])
        .args(rule);
    run(insert, None).await.map(drop)
}
