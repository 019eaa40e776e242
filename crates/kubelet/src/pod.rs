//! `sync_pod`: make the runtime match one pod, then report the pod's status.
//!
//! ```text
//!  runtime.list(pod) ──▶ actions::pod_actions (pure) ──▶ Terminate: preStop, stop apps, then sidecars; final status; remove; confirm delete
//!     (once per sync)                               ├──▶ Finished: nothing
//!                                                   └──▶ Sync: remove ▶ sandbox ▶ (image, start, postStart) per container
//!                                                              ▶ kill the pod (apps done) or probe ▶ status
//! ```
//!
//! The containers are listed once; every action's result (a started
//! container, a stopped one) updates that list, and the status is computed
//! from it.

use crate::actions::{
    self, container_at, is_sidecar, latest_of, ContainerStart, Observed, PodActions, PodPlan, Which,
};
use crate::config_data::PodConfig;
use crate::pod_setup::{docker_name, SetUpFailed};
use crate::resize::ResizeSteps;
use crate::runtime::{ContainerInfo, Mount, SANDBOX};
use crate::status::Report;
use crate::Kubelet;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use minik8s_api::registry;
use minik8s_client::events::EventType;
use minik8s_client::{DeleteParams, TRACE_POD_START};
use std::collections::{BTreeMap, HashSet};
use tracing::Instrument;

/// A span of the pod start pipeline (see `minik8s_process::init_logging`).
macro_rules! step {
    ($name:literal $(, $($field:tt)*)?) => {
        tracing::debug_span!(target: TRACE_POD_START, $name $(, $($field)*)?)
    };
}

impl Kubelet {
    /// Stops containers (apps within `grace` seconds, all at once, then the
    /// sandbox) and removes them.
    pub async fn kill_containers(
        &self,
        containers: &[ContainerInfo],
        grace: i64,
    ) -> anyhow::Result<()> {
        let apps = containers
            .iter()
            .filter(|c| c.name != SANDBOX && c.state.is_running());
        let stops = apps.map(|c| self.runtime.stop(&c.id, grace));
        for r in futures::future::join_all(stops).await {
            r?;
        }
        // Each container is tried even when one before it failed: one Docker
        // refuses now is no reason to keep the others.
        let mut first_error = None;
        for c in containers {
            let removed = match self.runtime.stop(&c.id, 0).await {
                Ok(()) => self.runtime.remove(&c.id).await,
                Err(e) => Err(e),
            };
            if let Err(e) = removed {
                tracing::warn!(container = %c.id, error = %e, "removing a container");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    /// Ids of the pod's running containers whose startup probe passed.
    fn startup_passed(&self, observed: &[ContainerInfo]) -> HashSet<String> {
        observed
            .iter()
            .filter(|c| c.state.is_running())
            .filter(|c| self.probes.get(&c.id, crate::probe::Kind::Startup).result == Some(true))
            .map(|c| c.id.clone())
            .collect()
    }

    /// Brings one pod's containers in line with its spec and reports its status.
    pub async fn sync_pod(&self, pod: &Pod) -> anyhow::Result<Next> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let observed = self
            .runtime
            .list(Some(&uid))
            .instrument(step!("list"))
            .await?;
        let started = self.startup_passed(&observed);
        let finished = crate::lock(&self.finished).contains(&uid);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let live = pod.metadata.deletion_timestamp.is_none()
            && !finished
            && !matches!(phase, Some("Succeeded" | "Failed"));
        let Some(resize) = self.admit_evict_resize(pod, &observed, live).await? else {
            return Ok(Next::Wait);
        };
        let seen = Observed {
            containers: &observed,
            started: &started,
            finished,
            resize_restarts: &resize.restart,
            now: chrono::Utc::now(),
        };
        match actions::pod_actions(pod, &seen) {
            PodPlan::Terminate { grace_secs } => {
                tracing::info!(pod = ?pod.metadata.name, grace_secs, containers = observed.len(), "terminating the pod");
                // Watchers see the pod terminate (Ready=False, its containers'
                // final states) before it goes.
                let (after, reported) = self
                    .stop_and_report(pod, &observed, grace_secs, None)
                    .await?;
                if let Err(e) = reported {
                    tracing::debug!(pod = ?pod.metadata.name, error = %e, "reporting the final status");
                }
                self.kill_containers(&after, 0).await?;
                self.runtime.remove_pod_cgroup(&uid).await;
                crate::tmpfs::remove_pod_dir(&self.pod_dir(pod));
                self.confirm_deletion(pod).await?;
                tracing::info!(pod = ?pod.metadata.name, removed = after.len(), "pod terminated; deletion confirmed");
                Ok(Next::Gone)
            }
            // Finished pods keep their exited containers (for logs) until deleted.
            PodPlan::Finished => Ok(Next::Wait),
            PodPlan::Sync(plan) => self.carry_out(pod, plan, resize, observed).await,
        }
    }

    /// What is decided about a pod before its containers: the kubelet's
    /// admission of a new pod (sysctls this node does not allow, an AppArmor
    /// profile on a node without AppArmor), the eviction of one over its
    /// local storage limits, and its resize's admission (a container whose
    /// resize needs a restart is then replaced). None: the pod was refused
    /// or evicted, and its status says so.
    async fn admit_evict_resize(
        &self,
        pod: &Pod,
        observed: &[ContainerInfo],
        live: bool,
    ) -> anyhow::Result<Option<ResizeSteps>> {
        if !live {
            self.allocations
                .forget(pod.metadata.uid.as_deref().unwrap_or(""));
            return Ok(Some(ResizeSteps::default()));
        }
        if observed.is_empty() {
            let spec = pod.spec.as_ref();
            let refusal =
                crate::pod_host::forbidden_sysctl(spec, &self.config.allowed_unsafe_sysctls)
                    .map(|why| ("SysctlForbidden", why))
                    .or_else(|| {
                        let enabled = crate::profiles::apparmor_enabled();
                        crate::profiles::apparmor_refusal(pod, enabled).map(|why| ("AppArmor", why))
                    });
            if let Some((reason, why)) = refusal {
                self.reject(pod, reason, &why).await?;
                return Ok(None);
            }
        } else if let Some(message) = self.storage_eviction(pod, observed).await {
            self.evict(pod, observed, &message).await?;
            return Ok(None);
        }
        let machine = self.runtime.machine();
        let allocatable = (machine.cpus as i64 * 1000, machine.memory_bytes as i64);
        Ok(Some(self.allocations.plan(pod, observed, allocatable)))
    }

    /// Refuses a pod the node will not run (Kubernetes' `rejectPod`): a
    /// Warning event, and the pod Failed with the reason.
    async fn reject(&self, pod: &Pod, reason: &'static str, why: &str) -> anyhow::Result<()> {
        tracing::info!(pod = ?pod.metadata.name, reason, why, "pod rejected");
        self.warning_event(pod, reason, why.to_string());
        let message = format!("Pod was rejected: {why}");
        let waiting = BTreeMap::new();
        let report = Report {
            containers: &[],
            pod_ip: "",
            waiting: &waiting,
            terminal: true,
            failed: Some((reason, &message)),
        };
        self.report_status(pod, report).await
    }

    /// Evicts a pod (local storage): its containers are killed at once and
    /// it ends Failed, reason `Evicted`, as the real kubelet's eviction manager does.
    async fn evict(&self, pod: &Pod, observed: &[ContainerInfo], why: &str) -> anyhow::Result<()> {
        tracing::info!(pod = ?pod.metadata.name, why, "evicting the pod");
        self.warning_event(pod, "Evicted", why.to_string());
        let (_, reported) = self
            .stop_and_report(pod, observed, 0, Some(("Evicted", why)))
            .await?;
        reported
    }

    /// Stops the pod's containers (apps, then sidecars) within `grace`
    /// seconds and reports its final status (`failed`: its reason and
    /// message). Returns the containers as they are now, and how the report went.
    async fn stop_and_report(
        &self,
        pod: &Pod,
        observed: &[ContainerInfo],
        grace: i64,
        failed: Option<(&str, &str)>,
    ) -> anyhow::Result<(Vec<ContainerInfo>, anyhow::Result<()>)> {
        self.stop_pod(pod, observed, grace).await;
        let after = self.runtime.list(pod.metadata.uid.as_deref()).await?;
        let waiting = BTreeMap::new();
        let report = Report {
            containers: &after,
            pod_ip: &sandbox_ip_of(&after),
            waiting: &waiting,
            terminal: true,
            failed,
        };
        let reported = self.report_status(pod, report).await;
        Ok((after, reported))
    }

    /// Deletes the pod object for good (grace 0) once its containers are gone.
    async fn confirm_deletion(&self, pod: &Pod) -> anyhow::Result<()> {
        let api = self
            .client
            .dynamic(registry::of::<Pod>(), pod.metadata.namespace.as_deref());
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: pod.metadata.uid.clone(),
            ..Default::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or(""), &dp)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A start slot when the plan creates a sandbox or containers: Docker
    /// does a burst's creations fastest a few at a time, so the pod waits
    /// for a slot, and says it is creating containers meanwhile.
    async fn start_slot(
        &self,
        pod: &Pod,
        plan: &PodActions,
        observed: &[ContainerInfo],
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if !plan.create_sandbox && plan.to_start.is_empty() {
            return None;
        }
        if let Ok(slot) = self.start_slots.clone().try_acquire_owned() {
            return Some(slot);
        }
        let wait = self.start_slots.clone().acquire_owned();
        let ip = sandbox_ip(plan, observed);
        let report = self.report_status(pod, Report::live(observed, &ip, &plan.waiting));
        let (slot, reported) = tokio::join!(wait.instrument(step!("wait_slot")), report);
        if let Err(e) = reported {
            tracing::debug!(pod = ?pod.metadata.name, error = %e, "reporting ContainerCreating");
        }
        Some(slot.expect("the start slots are never closed"))
    }

    /// The pod's sandbox: the running one, or a new one (a new pod's, or
    /// after the old one died), added to `observed`.
    async fn sandbox(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        plan: &PodActions,
        observed: &mut Vec<ContainerInfo>,
    ) -> anyhow::Result<ContainerInfo> {
        if let Some(id) = plan.sandbox_id.as_deref().filter(|_| !plan.create_sandbox) {
            return observed
                .iter()
                .find(|c| c.id == id)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("sandbox {id} left the observed list"));
        }
        // A new pod (or a new sandbox): what it asks that this kubelet does
        // not do is said once, as a Warning event.
        let spec_value = serde_json::to_value(spec).unwrap_or_default();
        let ignored = minik8s_api::pod_fields::not_honoured(&spec_value, "spec");
        if !ignored.is_empty() {
            self.warning_event(pod, "FieldsNotHonoured", ignored.join("; "));
        }
        let s = self.start_sandbox(pod).instrument(step!("sandbox")).await?;
        observed.push(s.clone());
        Ok(s)
    }

    /// Nothing runs again: stops what still runs (sidecars after the
    /// apps) and reports the pod's final phase (Failed with
    /// DeadlineExceeded past `activeDeadlineSeconds`).
    async fn end_pod(
        &self,
        pod: &Pod,
        observed: &[ContainerInfo],
        pod_ip: &str,
        waiting: &BTreeMap<String, (String, String)>,
        deadline_exceeded: bool,
    ) -> anyhow::Result<()> {
        if deadline_exceeded {
            self.warning_event(pod, "DeadlineExceeded", DEADLINE_MESSAGE.to_string());
        }
        self.stop_pod(pod, observed, crate::lifecycle::pod_grace(pod))
            .await;
        let after = self.runtime.list(pod.metadata.uid.as_deref()).await?;
        let report = Report {
            containers: &after,
            pod_ip,
            waiting,
            terminal: true,
            failed: deadline_exceeded.then_some(("DeadlineExceeded", DEADLINE_MESSAGE)),
        };
        self.report_status(pod, report).await
    }

    /// Carries out a live pod's actions in order, keeping `observed` current
    /// from each action's result, then reports the status.
    /// Long on purpose: the actions are carried out in the order the sync
    /// must take them (removals, sandbox, volumes, init, sidecars, app
    /// containers), each step beside the state it leaves for the next.
    async fn carry_out(
        &self,
        pod: &Pod,
        plan: PodActions,
        resize: ResizeSteps,
        mut observed: Vec<ContainerInfo>,
    ) -> anyhow::Result<Next> {
        let spec = pod.spec.clone().unwrap_or_default();
        let slot = self.start_slot(pod, &plan, &observed).await;
        for id in &plan.to_remove {
            self.runtime.stop(id, 0).await?;
            self.runtime.remove(id).await?;
            observed.retain(|c| &c.id != id);
        }
        let sandbox = self.sandbox(pod, &spec, &plan, &mut observed).await?;
        let pod_ip = sandbox.ip.clone().unwrap_or_default();
        let mut waiting = plan.waiting;
        let prepared = self
            .prepare_config_and_mounts(pod, !plan.to_start.is_empty())
            .instrument(step!("volumes"))
            .await;
        let (mut cfg, mounts) = match prepared {
            Ok(m) => m,
            Err(e) => match set_up_failure(e) {
                Ok((reason, message)) => {
                    tracing::info!(pod = ?pod.metadata.name, %message, reason, "pod set-up failed");
                    self.recorder
                        .event(pod, EventType::Warning, reason, &message)
                        .await;
                    for start in &plan.to_start {
                        if let Some(c) = container_at(&spec, start.which, start.index) {
                            waiting.insert(c.name, ("ContainerCreating".into(), message.clone()));
                        }
                    }
                    let report = Report::live(&observed, &pod_ip, &waiting);
                    self.report_status(pod, report).await?;
                    return Ok(Next::Wait);
                }
                Err(other) => return Err(other),
            },
        };
        if !plan.to_start.is_empty() {
            cfg.service_env = self.service_env(pod).await;
        }
        // Containers restarted for a resize stop as a deletion stops them
        // (preStop, then the grace period); the starts below replace them.
        for id in &resize.restart {
            let Some(cur) = observed.iter().find(|c| &c.id == id).cloned() else {
                continue;
            };
            let c = crate::resize::spec_container(&spec, &cur.name);
            let message = format!("Container {} resize requires restart", cur.name);
            self.container_events(pod, vec![("Killing", message)]);
            let grace = crate::lifecycle::pod_grace(pod);
            self.stop_container(pod, c.as_ref(), &cur, grace, &pod_ip)
                .await;
        }
        let mut next = Next::Wait;
        for start in &plan.to_start {
            let Some(c) = container_at(&spec, start.which, start.index) else {
                continue;
            };
            let started = self
                .start_container(
                    pod,
                    &c,
                    start,
                    &sandbox,
                    &mounts,
                    &cfg,
                    &mut observed,
                    &mut waiting,
                )
                .await?;
            match started {
                Started::Yes if start.which == Which::Init && is_sidecar(&c) => {
                    // A sidecar without a startup probe lets the next init
                    // container start: sync again at once, not in 2 s.
                    if c.startup_probe.is_none() {
                        next = Next::Now;
                    }
                }
                Started::Yes => {}
                // A regular init container that did not start holds back the rest.
                Started::No if start.which == Which::Init && !is_sidecar(&c) => break,
                Started::No => {}
                Started::SandboxBroken => break,
            }
        }
        drop(slot);
        if plan.kill_pod {
            self.end_pod(pod, &observed, &pod_ip, &waiting, plan.deadline_exceeded)
                .await?;
            return Ok(Next::Wait);
        }
        self.resize_in_place(pod, &resize.update).await;
        if self
            .probe_all(pod, &spec, &plan.to_probe, &mut observed, &pod_ip)
            .await?
        {
            next = Next::Now;
        }
        // The sync that follows at once reports what this one did.
        if next == Next::Now {
            return Ok(next);
        }
        let report = Report::live(&observed, &pod_ip, &waiting);
        self.report_status(pod, report)
            .instrument(step!("status"))
            .await?;
        Ok(next)
    }

    /// Probes the running containers with probes: a failed startup or
    /// liveness probe stops the container (the next sync restarts it under
    /// the restart policy). Returns whether a sidecar's startup probe
    /// passed just now (the next init container may start).
    async fn probe_all(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        to_probe: &[(Which, usize)],
        observed: &mut Vec<ContainerInfo>,
        pod_ip: &str,
    ) -> anyhow::Result<bool> {
        let mut sidecar_started = false;
        for &(which, index) in to_probe {
            let Some(c) = container_at(spec, which, index) else {
                continue;
            };
            let Some(cur) = latest_of(observed, &c.name, 0)
                .filter(|x| x.state.is_running())
                .cloned()
            else {
                continue;
            };
            let startup = crate::probe::Kind::Startup;
            let before = self.probes.get(&cur.id, startup).result;
            let kill = self.probe_container(pod, &c, &cur, pod_ip).await;
            if which == Which::Init
                && before != Some(true)
                && self.probes.get(&cur.id, startup).result == Some(true)
            {
                sidecar_started = true;
            }
            let Some(kill) = kill else { continue };
            tracing::info!(pod = ?pod.metadata.name, container = %c.name, why = %kill.message, "probe failed; stopping the container");
            self.container_events(pod, vec![("Killing", kill.message)]);
            let grace = kill
                .grace
                .unwrap_or_else(|| crate::lifecycle::pod_grace(pod));
            self.stop_container(pod, Some(&c), &cur, grace, pod_ip)
                .await;
            if let Some(now) = self.runtime.inspect(&cur.id).await? {
                observed.retain(|x| x.id != cur.id);
                observed.push(now);
            }
        }
        Ok(sidecar_started)
    }

    /// Starts one container: its image, its spec, the runtime's start, its
    /// postStart hook. What went wrong goes into `waiting` (the container's
    /// status), and `observed` gets the new container. Long because it
    /// follows Kubernetes' `startContainer` step by step (image, config,
    /// create and start, postStart), each step a span of the pod's journey.
    #[allow(clippy::too_many_arguments)]
    async fn start_container(
        &self,
        pod: &Pod,
        c: &Container,
        start: &ContainerStart,
        sandbox: &ContainerInfo,
        mounts: &[(String, Mount)],
        cfg: &PodConfig,
        observed: &mut Vec<ContainerInfo>,
        waiting: &mut BTreeMap<String, (String, String)>,
    ) -> anyhow::Result<Started> {
        let image = c.image.clone().unwrap_or_default();
        let pull = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        if let Err((reason, message)) = self
            .ensure_image(pod, &image, pull)
            .instrument(step!("image", container = %c.name, %image))
            .await
        {
            waiting.insert(c.name.clone(), (reason, message));
            return Ok(Started::No);
        }
        for id in &start.remove_first {
            self.runtime.stop(id, 0).await?;
            self.runtime.remove(id).await?;
            observed.retain(|x| &x.id != id);
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let container = match self.container_spec(pod, c, sandbox, mounts, start, cfg) {
            Ok(mut container) => {
                // An ephemeral container sees its target's processes.
                let target = (start.which == Which::Ephemeral)
                    .then(|| {
                        spec.ephemeral_containers
                            .as_ref()?
                            .get(start.index)?
                            .target_container_name
                            .clone()
                    })
                    .flatten();
                container.pid_of = target
                    .and_then(|t| latest_of(observed, &t, 0))
                    .filter(|t| t.state.is_running())
                    .map(|t| t.id.clone());
                container
            }
            Err(message) => {
                waiting.insert(
                    c.name.clone(),
                    ("CreateContainerConfigError".into(), message),
                );
                return Ok(Started::No);
            }
        };
        let name = docker_name(pod, &c.name, start.restart_count);
        match self
            .runtime
            .run_container(&name, &container)
            .instrument(step!("container", container = %c.name))
            .await
        {
            Ok(info) => {
                tracing::debug!(target: TRACE_POD_START, container = %c.name, "container started");
                observed.push(info.clone());
                let uid = pod.metadata.uid.as_deref().unwrap_or("");
                let resources = self.allocations.for_start(uid, c);
                self.allocations.actuated(uid, &info.id, resources);
                self.container_events(
                    pod,
                    vec![
                        ("Created", format!("Created container: {}", c.name)),
                        ("Started", format!("Started container {}", c.name)),
                    ],
                );
                let pod_ip = sandbox.ip.as_deref().unwrap_or("");
                if !self.post_start(pod, c, &info, pod_ip).await {
                    if let Some(now) = self.runtime.inspect(&info.id).await? {
                        observed.retain(|x| x.id != info.id);
                        observed.push(now);
                    }
                    return Ok(Started::No);
                }
                Ok(Started::Yes)
            }
            Err(e) => {
                waiting.insert(
                    c.name.clone(),
                    ("CreateContainerError".into(), e.to_string()),
                );
                if self.sandbox_is_broken(sandbox, &e.to_string()).await {
                    // A container cannot join a sandbox that died under it (its
                    // dockerd restarted): remove the sandbox, and the next sync
                    // starts the pod afresh in a new one instead of failing for good.
                    tracing::warn!(pod = pod.metadata.name.as_deref().unwrap_or(""), error = %e, "the pod's sandbox is broken; recreating it");
                    let _ = self.runtime.stop(&sandbox.id, 0).await;
                    let _ = self.runtime.remove(&sandbox.id).await;
                    return Ok(Started::SandboxBroken);
                }
                Ok(Started::No)
            }
        }
    }
}

/// The kubelet's words for a pod past its `activeDeadlineSeconds`.
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// What a sync asks of the pod's worker next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The pod is gone: the worker ends.
    Gone,
    /// Sync again on the next change or the periodic resync.
    Wait,
    /// Sync again at once (a sidecar started: the next init container may).
    Now,
}

/// How one container's start went.
enum Started {
    Yes,
    No,
    /// The sandbox died under it: nothing more starts in this sync.
    SandboxBroken,
}

/// The IP of a running sandbox among `containers` (empty without one).
fn sandbox_ip_of(containers: &[ContainerInfo]) -> String {
    containers
        .iter()
        .find(|c| c.name == SANDBOX && c.state.is_running())
        .and_then(|c| c.ip.clone())
        .unwrap_or_default()
}

/// The IP of the pod's sandbox when it is kept (empty when a new one is to be made).
fn sandbox_ip(plan: &PodActions, observed: &[ContainerInfo]) -> String {
    plan.sandbox_id
        .as_deref()
        .filter(|_| !plan.create_sandbox)
        .and_then(|id| observed.iter().find(|c| c.id == id))
        .and_then(|c| c.ip.clone())
        .unwrap_or_default()
}

/// A set-up failure the pod waits out, as (event reason, message); other
/// errors are given back.
fn set_up_failure(e: anyhow::Error) -> Result<(&'static str, String), anyhow::Error> {
    let e = match e.downcast::<SetUpFailed>() {
        Ok(SetUpFailed(message)) => return Ok(("FailedMount", message)),
        Err(e) => e,
    };
    match e.downcast::<crate::pod_setup::PrepareResourcesFailed>() {
        Ok(failed) => Ok(("FailedPrepareDynamicResources", failed.to_string())),
        Err(e) => Err(e),
    }
}
