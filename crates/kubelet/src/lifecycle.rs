//! A container's life around its process: the `postStart` hook after the
//! start, the `preStop` hook before the stop signal, the order a pod's
//! containers stop in, and the termination message read after the exit.
//!
//! ```text
//!  start ──▶ postStart (exec | httpGet | sleep) ── fails ──▶ FailedPostStartHook, killed
//!  stop  ──▶ preStop (within the grace period) ──▶ stop signal ── what is left of the grace ──▶ SIGKILL
//!  pod stops: apps together ──▶ sidecars, last first ──▶ final status (Ready=False, terminated states)
//!  exit  ──▶ terminationMessagePath (4 KiB) or, FallbackToLogsOnError, the log's tail ──▶ state.terminated.message
//! ```
//!
//! The termination message file is a host file bind-mounted at the
//! container's `terminationMessagePath`, one per container instance (name
//! and restart count), writable by any user, as the real kubelet mounts it.

use crate::actions::{is_sidecar, latest_of};
use crate::runtime::{ContainerInfo, LogOptions, State, SANDBOX};
use crate::Kubelet;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod, PodSpec};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Kubernetes' bounds on termination messages: the file is read up to 4 KiB;
/// the log fallback takes the last 80 lines, at most 2 KiB.
pub const MESSAGE_LIMIT: usize = 4 * 1024;
pub const LOG_FALLBACK_LINES: i64 = 80;
pub const LOG_FALLBACK_LIMIT: usize = 2 * 1024;
/// The least time a container gets between its stop signal and SIGKILL
/// once a preStop hook used up the grace period (Kubernetes' minimum).
pub const MINIMUM_GRACE_SECS: i64 = 2;
pub const DEFAULT_MESSAGE_PATH: &str = "/dev/termination-log";

/// `name_namespace(uid)`: how Kubernetes names a pod in hook messages.
fn pod_label(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or(""),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or("")
    )
}

/// The spec container of a runtime container (init or app), by name.
pub fn spec_container<'a>(spec: &'a PodSpec, name: &str) -> Option<&'a Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
}

/// The last byte boundary at or below `limit` that is a char boundary.
fn cut(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last `limit` bytes of `text`, starting on a char boundary.
fn tail_of(text: &str, limit: usize) -> &str {
    let mut start = text.len().saturating_sub(limit);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl Kubelet {
    /// Runs one hook handler for a running container. Err: the message of
    /// the `FailedPostStartHook`/`FailedPreStopHook` event.
    pub(crate) async fn run_hook(
        &self,
        pod: &Pod,
        c: &Container,
        handler: &LifecycleHandler,
        info: &ContainerInfo,
        pod_ip: &str,
    ) -> Result<(), String> {
        let who = format!("for Container {:?} in Pod {:?}", c.name, pod_label(pod));
        if let Some(e) = &handler.exec {
            let command = e.command.clone().unwrap_or_default();
            return match self.runtime.exec(&info.id, command.clone()).await {
                Ok((0, _)) => Ok(()),
                Ok((code, output)) => Err(format!(
                    "Exec lifecycle hook ({command:?}) {who} failed - error: command '{}' exited with {code}: {output}, message: {output:?}",
                    command.join(" ")
                )),
                Err(err) => Err(format!(
                    "Exec lifecycle hook ({command:?}) {who} failed - error: {err}, message: \"\""
                )),
            };
        }
        if let Some(h) = &handler.http_get {
            let path = h.path.clone().unwrap_or_default();
            let Some(port) = crate::probe::port(c, &h.port) else {
                return Err(format!(
                    "HTTP lifecycle hook ({path}) {who} failed - error: unknown port {:?}, message: \"\"",
                    h.port
                ));
            };
            let host = crate::probe::probe_host(&h.host, pod_ip);
            // Any answer will do: only a request that got none fails a hook.
            return match crate::probe::http_get(h, &host, port).await {
                Err(e) if !e.starts_with("HTTP probe failed with statuscode") => Err(format!(
                    "HTTP lifecycle hook ({path}) {who} failed - error: {e}, message: \"\""
                )),
                _ => Ok(()),
            };
        }
        if let Some(s) = &handler.sleep {
            tokio::time::sleep(Duration::from_secs(s.seconds.max(0) as u64)).await;
            return Ok(());
        }
        // tcpSocket is deprecated for hooks; the real kubelet cannot run it either.
        Err(format!(
            "Cannot run handler: invalid handler {who}: only exec, httpGet and sleep hooks run"
        ))
    }

    /// The postStart hook of a container just started, when it has one; a
    /// failure is reported and kills the container (the restart policy then
    /// decides), as in Kubernetes. Returns whether the container survived.
    pub(crate) async fn post_start(
        &self,
        pod: &Pod,
        c: &Container,
        info: &ContainerInfo,
        pod_ip: &str,
    ) -> bool {
        let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return true;
        };
        let Err(message) = self.run_hook(pod, c, hook, info, pod_ip).await else {
            return true;
        };
        tracing::info!(pod = ?pod.metadata.name, container = %c.name, %message, "postStart hook failed");
        self.warning_event(pod, "FailedPostStartHook", message);
        let grace = pod_grace(pod);
        self.container_events(pod, vec![("Killing", "FailedPostStartHook".to_string())]);
        self.stop_container(pod, Some(c), info, grace, pod_ip).await;
        false
    }

    /// Stops one container: its preStop hook first (within the grace
    /// period), then the stop signal with what is left of the grace (at
    /// least [`MINIMUM_GRACE_SECS`]) before SIGKILL.
    pub(crate) async fn stop_container(
        &self,
        pod: &Pod,
        c: Option<&Container>,
        info: &ContainerInfo,
        grace: i64,
        pod_ip: &str,
    ) {
        let started = Instant::now();
        let pre_stop = c.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)));
        let mut grace = grace.max(0);
        if let (Some((c, hook)), true) = (pre_stop, info.state.is_running()) {
            let hooked = self.run_hook(pod, c, hook, info, pod_ip);
            match tokio::time::timeout(Duration::from_secs(grace as u64), hooked).await {
                Ok(Ok(())) => {}
                Ok(Err(message)) => self.warning_event(pod, "FailedPreStopHook", message),
                Err(_) => self.warning_event(
                    pod,
                    "FailedPreStopHook",
                    format!(
                        "PreStopHook for Container {:?} in Pod {:?} did not complete within the grace period of {grace}s",
                        c.name,
                        pod_label(pod)
                    ),
                ),
            }
            grace = (grace - started.elapsed().as_secs() as i64).max(MINIMUM_GRACE_SECS);
        }
        if let Err(e) = self.runtime.stop(&info.id, grace).await {
            tracing::warn!(container = %info.id, error = %e, "stopping a container");
        }
    }

    /// Stops a pod's running containers for good within `grace` seconds:
    /// the apps (and anything else) together, then the sidecars one by one,
    /// the last declared first, with what is left of the grace.
    pub(crate) async fn stop_pod(&self, pod: &Pod, observed: &[ContainerInfo], grace: i64) {
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_ip = observed
            .iter()
            .find(|c| c.name == SANDBOX)
            .and_then(|c| c.ip.clone())
            .unwrap_or_default();
        let sidecars: Vec<&Container> = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| is_sidecar(c))
            .collect();
        let running = |c: &&ContainerInfo| c.name != SANDBOX && c.state.is_running();
        let is_sidecar_name = |name: &str| sidecars.iter().any(|s| s.name == name);
        let first: Vec<&ContainerInfo> = observed
            .iter()
            .filter(running)
            .filter(|c| !is_sidecar_name(&c.name))
            .collect();
        let events = observed
            .iter()
            .filter(running)
            .map(|c| ("Killing", format!("Stopping container {}", c.name)))
            .collect();
        self.container_events(pod, events);
        let deadline = Instant::now() + Duration::from_secs(grace.max(0) as u64);
        let stops = first.iter().map(|info| {
            self.stop_container(pod, spec_container(&spec, &info.name), info, grace, &pod_ip)
        });
        futures::future::join_all(stops).await;
        for c in sidecars.iter().rev() {
            let Some(info) = latest_of(observed, &c.name, 0).filter(|i| i.state.is_running())
            else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now()).as_secs() as i64;
            self.stop_container(pod, Some(c), info, left.max(MINIMUM_GRACE_SECS), &pod_ip)
                .await;
        }
    }

    /// The host file mounted at a container instance's terminationMessagePath,
    /// created empty and writable by any user.
    pub(crate) fn termination_log(
        &self,
        pod: &Pod,
        name: &str,
        restart_count: i32,
    ) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self
            .pod_dir(pod)
            .join("containers")
            .join(name)
            .join(restart_count.to_string());
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("termination-log");
        if !path.exists() {
            std::fs::write(&path, b"")?;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
        Ok(path)
    }

    /// The termination messages of the pod's exited containers, by container
    /// id: the message file (up to 4 KiB) or, for `FallbackToLogsOnError`
    /// and a failure with no message, the tail of the log. Read once per
    /// container and kept.
    pub(crate) async fn termination_messages(
        &self,
        pod: &Pod,
        containers: &[ContainerInfo],
    ) -> HashMap<String, String> {
        let spec = pod.spec.clone().unwrap_or_default();
        let mut out = HashMap::new();
        for info in containers {
            let State::Exited { exit_code, .. } = &info.state else {
                continue;
            };
            if let Some(known) = self.messages.get(&info.id) {
                out.insert(info.id.clone(), known);
                continue;
            }
            let Some(c) = spec_container(&spec, &info.name) else {
                continue;
            };
            let path = self
                .pod_dir(pod)
                .join("containers")
                .join(&info.name)
                .join(info.restart_count.to_string())
                .join("termination-log");
            let mut message = std::fs::read(&path)
                .map(|bytes| {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    cut(&text, MESSAGE_LIMIT).to_string()
                })
                .unwrap_or_default();
            let fallback = c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
            if message.is_empty() && fallback && *exit_code != 0 {
                message = self.log_tail(&info.id).await;
            }
            self.messages.put(&info.id, message.clone());
            out.insert(info.id.clone(), message);
        }
        out
    }

    /// The last lines of a container's log, for `FallbackToLogsOnError`.
    async fn log_tail(&self, id: &str) -> String {
        let opts = LogOptions {
            tail: Some(LOG_FALLBACK_LINES),
            ..Default::default()
        };
        let mut stream = self.runtime.logs(id, opts);
        let mut bytes = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        tail_of(&text, LOG_FALLBACK_LIMIT).to_string()
    }
}

/// The pod's termination grace period (30 s by default).
pub fn pod_grace(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
}

/// Termination messages by container id, kept until the container is gone.
#[derive(Default)]
pub struct Messages(std::sync::Mutex<HashMap<String, String>>);

impl Messages {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn get(&self, id: &str) -> Option<String> {
        self.lock().get(id).cloned()
    }
    pub fn put(&self, id: &str, message: String) {
        self.lock().insert(id.to_string(), message);
    }
    /// Forgets containers that no longer exist.
    pub fn retain(&self, live: &std::collections::HashSet<String>) {
        self.lock().retain(|id, _| live.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_on_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("hello", 10), "hello");
        assert_eq!(tail_of("héllo", 4), "llo");
        assert_eq!(tail_of("hello", 10), "hello");
        let long = "x".repeat(5000);
        assert_eq!(cut(&long, MESSAGE_LIMIT).len(), 4096);
    }
}
