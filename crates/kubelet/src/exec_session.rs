//! What an exec or attach session does whatever carries it (a WebSocket,
//! `exec.rs`, or SPDY/3.1, `exec_spdy.rs`): the two modes, terminal
//! resizes, and the `Status` that ends the session with the exit code.

use crate::runtime::State as ContainerState;
use serde_json::{json, Value};

/// The `Status` kubectl reads on the status channel: success, or the exit
/// code as Kubernetes reports it (`kubectl exec` exits with that code).
pub(crate) fn exit_status(cmd: &[String], code: i64) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            cmd.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}
    })
}

pub(crate) fn failure(message: &str) -> Value {
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500})
}

/// Exec runs a new process; attach joins the container's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Exec,
    Attach,
}

/// Resizes the terminal of an exec (or of the attached container's process).
pub(crate) async fn resize(
    runtime: &dyn crate::runtime::ContainerRuntime,
    mode: Mode,
    id: &str,
    width: u16,
    height: u16,
) {
    let resized = match mode {
        Mode::Exec => runtime.exec_resize(id, width, height).await,
        Mode::Attach => runtime.attach_resize(id, width, height).await,
    };
    if let Err(e) = resized {
        tracing::debug!(error = %e, "resizing the exec's terminal");
    }
}

/// The `Status` that ends an exec or attach once its output has ended: the
/// process's exit code (the runtime may need a moment to record it).
pub(crate) async fn final_status(
    runtime: &dyn crate::runtime::ContainerRuntime,
    mode: Mode,
    exec_id: &str,
    cmd: &[String],
) -> Value {
    for _ in 0..50 {
        let exited = match mode {
            Mode::Exec => runtime.exec_exit_code(exec_id).await,
            Mode::Attach => runtime
                .inspect(exec_id)
                .await
                .map(|c| match c.map(|c| c.state) {
                    Some(ContainerState::Exited { exit_code, .. }) => Some(exit_code),
                    _ => None,
                }),
        };
        match exited {
            Ok(Some(c)) => return exit_status(cmd, c),
            Ok(None) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            Err(e) => {
                tracing::warn!(error = %e, "reading the exec's exit code");
                break;
            }
        }
    }
    failure("the exec's exit code is unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_reported_as_kubernetes_does() {
        let cmd = vec!["sh".to_string(), "-c".into(), "exit 3".into()];
        assert_eq!(exit_status(&cmd, 0)["status"], "Success");
        let failed = exit_status(&cmd, 3);
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0]["message"], "3");
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
    }
}
