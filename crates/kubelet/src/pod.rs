//! `sync_pod`: make the runtime match one pod, then report the pod's status.
//!
//! ```text
//!  runtime.list(pod) ──▶ actions::pod_actions (pure) ──▶ Terminate: SIGTERM apps, wait grace, SIGKILL, remove, confirm delete
//!     (once per sync)                               ├──▶ Finished: nothing
//!                                                   └──▶ Sync: remove ▶ sandbox ▶ image + start ▶ probes ▶ status
//! ```
//!
//! The containers are listed once; every action's result (a started
//! container, a stopped one) updates that list, and the status is computed
//! from it.

use crate::actions::{self, latest_of, ContainerStart, PodActions, PodPlan};
use crate::config_data::{self, Kind, PodConfig};
use crate::runtime::{
    ContainerInfo, ContainerSpec, Mount, SandboxSpec, LABEL_CONTAINER, LABEL_HASH, LABEL_NODE,
    LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTARTS, SANDBOX,
};
use crate::Kubelet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret};
use minik8s_api::quantity::Quantity;
use minik8s_api::registry;
use minik8s_client::{DeleteParams, TRACE_POD_START};
use std::collections::{BTreeMap, HashMap, HashSet};
use tracing::Instrument;

/// A span of the pod start pipeline (see `minik8s_client::init_logging`).
macro_rules! step {
    ($name:literal) => {
        tracing::debug_span!(target: TRACE_POD_START, $name)
    };
}

fn short(uid: &str) -> &str {
    &uid[..uid.len().min(8)]
}

/// Docker's name for a pod's container, as dockershim named them.
fn docker_name(pod: &Pod, container: &str, restarts: i32) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    format!(
        "k8s_{container}_{}_{}_{}_{restarts}",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        short(uid)
    )
}

fn labels(pod: &Pod, container: &str, hash: &str, restarts: i32) -> HashMap<String, String> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    HashMap::from([
        (LABEL_NODE.to_string(), node),
        (
            LABEL_POD_UID.to_string(),
            pod.metadata.uid.clone().unwrap_or_default(),
        ),
        (
            LABEL_POD_NAME.to_string(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
        (
            LABEL_POD_NAMESPACE.to_string(),
            pod.metadata.namespace.clone().unwrap_or_default(),
        ),
        (LABEL_CONTAINER.to_string(), container.to_string()),
        (LABEL_HASH.to_string(), hash.to_string()),
        (LABEL_RESTARTS.to_string(), restarts.to_string()),
    ])
}

/// CPU and memory of a container's resources, for the runtime's cgroup settings.
fn resource(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    name: &str,
) -> Option<Quantity> {
    list.and_then(|m| m.get(name))
        .and_then(|q| Quantity::parse(&q.0).ok())
}

/// A volume could not be set up (a required ConfigMap, Secret or key is
/// missing): the pod's containers wait in ContainerCreating.
#[derive(Debug)]
struct SetUpFailed(String);

impl std::fmt::Display for SetUpFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetUpFailed {}

impl Kubelet {
    fn pod_dir(&self, pod: &Pod) -> std::path::PathBuf {
        self.config
            .root_dir
            .join("pods")
            .join(pod.metadata.uid.as_deref().unwrap_or("unknown"))
    }

    /// Host paths for the pod's volumes, and whether they are read-only:
    /// emptyDir under the pod's directory, hostPath as given, configMap,
    /// secret and projected volumes published there from `cfg` (an error
    /// [`SetUpFailed`] when a required object or key is missing).
    fn prepare_volumes(
        &self,
        pod: &Pod,
        cfg: &PodConfig,
    ) -> anyhow::Result<HashMap<String, (String, bool)>> {
        let mut out = HashMap::new();
        for v in pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
        {
            let dir = self.pod_dir(pod).join("volumes").join(&v.name);
            let entry = if v.persistent_volume_claim.is_some() {
                let Some(m) = cfg.claims.get(&v.name) else {
                    return Err(SetUpFailed(format!(
                        "volume \"{}\" has not been resolved",
                        v.name
                    ))
                    .into());
                };
                let failed = |e: std::io::Error| {
                    SetUpFailed(format!(
                        "MountVolume.SetUp failed for volume \"{}\" : {e}",
                        v.name
                    ))
                };
                match &m.nfs {
                    Some(source) => {
                        let uid = pod.metadata.uid.as_deref().unwrap_or("");
                        let at = self
                            .nfs
                            .ensure(&self.config.root_dir, source, uid)
                            .map_err(failed)?;
                        (at.display().to_string(), m.read_only)
                    }
                    None => {
                        crate::claims::set_up(m, pod).map_err(failed)?;
                        (m.path.clone(), m.read_only)
                    }
                }
            } else if let Some(hp) = &v.host_path {
                if matches!(hp.type_.as_deref(), Some("DirectoryOrCreate")) {
                    std::fs::create_dir_all(&hp.path)?;
                }
                (hp.path.clone(), false)
            } else if !config_data::is_published(v) {
                std::fs::create_dir_all(&dir)?;
                crate::security::empty_dir_ownership(&dir, pod)?;
                (dir.display().to_string(), false)
            } else {
                let files = config_data::volume_files(v, cfg).map_err(|message| {
                    SetUpFailed(format!(
                        "MountVolume.SetUp failed for volume \"{}\" : {message}",
                        v.name
                    ))
                })?;
                if config_data::publish(&dir, &files)? {
                    tracing::debug!(pod = ?pod.metadata.name, volume = %v.name, "volume content published");
                }
                (dir.display().to_string(), true)
            };
            out.insert(v.name.clone(), entry);
        }
        Ok(out)
    }

    /// The ConfigMaps and Secrets the pod refers to, as they are now.
    async fn fetch_config(&self, pod: &Pod) -> anyhow::Result<PodConfig> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut cfg = PodConfig {
            namespace: namespace.clone(),
            ..Default::default()
        };
        cfg.downward = config_data::downward_fields(pod);
        cfg.claims = crate::claims::resolve(&self.client, pod)
            .await?
            .map_err(SetUpFailed)?;
        for (audience, expiration) in config_data::token_sources(pod) {
            let token = self
                .tokens
                .get(&self.client, pod, &audience, expiration)
                .await
                .map_err(|e| SetUpFailed(format!("MountVolume.SetUp failed: {e:#}")))?;
            cfg.tokens.insert((audience, expiration), token);
        }
        for (kind, name) in config_data::references(pod) {
            let info = match kind {
                Kind::ConfigMap => registry::of::<ConfigMap>(),
                Kind::Secret => registry::of::<Secret>(),
            };
            let data = match self.client.dynamic(info, Some(&namespace)).get(&name).await {
                Ok(v) => Some(match kind {
                    Kind::ConfigMap => config_data::config_map_data(&serde_json::from_value(v)?),
                    Kind::Secret => config_data::secret_data(&serde_json::from_value(v)?),
                }),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e.into()),
            };
            cfg.objects.insert((kind, name), data);
        }
        Ok(cfg)
    }

    /// The runtime-neutral spec of one app container in the pod's sandbox.
    fn container_spec(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &ContainerInfo,
        mounts: &[(String, Mount)],
        start: &ContainerStart,
        cfg: &PodConfig,
    ) -> Result<ContainerSpec, String> {
        let resources = c.resources.as_ref();
        let limits = resources.and_then(|r| r.limits.as_ref());
        let requests = resources.and_then(|r| r.requests.as_ref());
        let pod_ip = sandbox.ip.as_deref().unwrap_or("");
        let mut own_mounts: Vec<Mount> = c
            .volume_mounts
            .iter()
            .flatten()
            .filter_map(|m| {
                let (_, volume) = mounts.iter().find(|(name, _)| *name == m.name)?;
                // subPath: one entry of the volume (resolved once: no updates,
                // as in Kubernetes).
                let host_path = match m.sub_path.as_deref().filter(|p| !p.is_empty()) {
                    Some(sub) => format!("{}/{}", volume.host_path, sub.trim_start_matches('/')),
                    None => volume.host_path.clone(),
                };
                Some(Mount {
                    host_path,
                    container_path: m.mount_path.clone(),
                    read_only: m.read_only == Some(true) || volume.read_only,
                })
            })
            .collect();
        // The pod-wide files (resolv.conf) come under the empty name.
        own_mounts.extend(
            mounts
                .iter()
                .filter(|(name, _)| name.is_empty())
                .map(|(_, m)| m.clone()),
        );
        Ok(ContainerSpec {
            image: c.image.clone().unwrap_or_default(),
            command: c.command.clone(),
            args: c.args.clone(),
            env: crate::env::environment(pod, c, pod_ip, &self.config.node_ip, cfg)?,
            working_dir: c.working_dir.clone(),
            tty: c.tty.unwrap_or(false),
            stdin: c.stdin.unwrap_or(false),
            stdin_once: c.stdin_once.unwrap_or(false),
            labels: labels(pod, &c.name, &start.hash, start.restart_count),
            sandbox_id: sandbox.id.clone(),
            pid_of: None,
            mounts: own_mounts,
            nano_cpus: resource(limits, "cpu").map(|v| v.millis() * 1_000_000),
            memory_limit_bytes: resource(limits, "memory").map(|v| v.units()),
            cpu_shares: resource(requests, "cpu").map(|v| (v.millis() * 1024 / 1000).max(2)),
            security: crate::security::container_security(pod, c)?,
        })
    }

    /// The host side of the pod's mounts: its volumes by name, and its
    /// resolv.conf under the empty name.
    fn pod_mounts(&self, pod: &Pod, cfg: &PodConfig) -> anyhow::Result<Vec<(String, Mount)>> {
        let mut mounts: Vec<(String, Mount)> = self
            .prepare_volumes(pod, cfg)?
            .into_iter()
            .map(|(name, (host_path, read_only))| {
                let m = Mount {
                    host_path,
                    container_path: String::new(),
                    read_only,
                };
                (name, m)
            })
            .collect();
        match self.write_resolv_conf(pod) {
            Ok(Some(path)) => mounts.push((
                String::new(),
                Mount {
                    host_path: path.display().to_string(),
                    container_path: "/etc/resolv.conf".into(),
                    read_only: true,
                },
            )),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "writing the pod's resolv.conf"),
        }
        Ok(mounts)
    }

    /// Writes the pod's resolv.conf (dnsPolicy, dnsConfig, --cluster-dns) under
    /// the pod's directory, to be mounted at /etc/resolv.conf in each container.
    /// None: Docker's default (the node's resolvers) is what the pod should get.
    /// A file, not Docker's `--dns`: on a user network Docker would put its
    /// embedded resolver (127.0.0.11) in the file instead of the cluster DNS.
    fn write_resolv_conf(&self, pod: &Pod) -> std::io::Result<Option<std::path::PathBuf>> {
        let host = crate::dns::ResolvConf::parse(
            &std::fs::read_to_string(&self.config.resolv_conf).unwrap_or_default(),
        );
        let conf = crate::dns::resolv_conf(
            pod,
            &self.config.cluster_dns,
            &self.config.cluster_domain,
            &host,
        );
        // The node's own configuration is Docker's default too (and Docker
        // knows to drop loopback resolvers a container cannot reach).
        if conf == host || conf == crate::dns::ResolvConf::default() {
            return Ok(None);
        }
        let dir = self.pod_dir(pod);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("resolv.conf");
        std::fs::write(&path, conf.render())?;
        Ok(Some(path))
    }

    /// Whether a container failed to start because of its sandbox: the
    /// sandbox is no longer running, or the runtime could not join its namespaces.
    async fn sandbox_is_broken(&self, sandbox: &ContainerInfo, error: &str) -> bool {
        let running =
            matches!(self.runtime.inspect(&sandbox.id).await, Ok(Some(s)) if s.state.is_running());
        !running || crate::decide::is_sandbox_join_error(error)
    }

    /// Starts the sandbox: the pause container owning the network namespace and hostname.
    async fn start_sandbox(&self, pod: &Pod) -> anyhow::Result<ContainerInfo> {
        let spec = pod.spec.as_ref();
        let hostname = spec
            .and_then(|s| s.hostname.clone())
            .or_else(|| pod.metadata.name.clone())
            .unwrap_or_default();
        let domainname = match (
            spec.and_then(|s| s.subdomain.as_deref()),
            pod.metadata.namespace.as_deref(),
        ) {
            (Some(sub), Some(ns)) if !sub.is_empty() => {
                Some(format!("{sub}.{ns}.svc.{}", self.config.cluster_domain))
            }
            _ => None,
        };
        let sandbox = SandboxSpec {
            image: self.config.pause_image.clone(),
            hostname: hostname.chars().take(63).collect(),
            domainname,
            labels: labels(pod, SANDBOX, "", 0),
        };
        Ok(self
            .runtime
            .run_sandbox(&docker_name(pod, SANDBOX, 0), &sandbox)
            .await?)
    }

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

    /// Brings one pod's containers in line with its spec and reports its status.
    /// Returns true when the pod needs no more syncing (it is gone).
    pub async fn sync_pod(&self, pod: &Pod) -> anyhow::Result<bool> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let observed = self
            .runtime
            .list(Some(&uid))
            .instrument(step!("list"))
            .await?;
        match actions::pod_actions(pod, &observed, chrono::Utc::now()) {
            PodPlan::Terminate { grace_secs } => {
                let stopping = observed
                    .iter()
                    .filter(|c| c.name != SANDBOX && c.state.is_running())
                    .map(|c| ("Killing", format!("Stopping container {}", c.name)))
                    .collect();
                self.container_events(pod, stopping);
                self.kill_containers(&observed, grace_secs).await?;
                let _ = std::fs::remove_dir_all(self.pod_dir(pod));
                self.confirm_deletion(pod).await?;
                Ok(true)
            }
            // Finished pods keep their exited containers (for logs) until deleted.
            PodPlan::Finished => Ok(false),
            PodPlan::Sync(plan) => {
                self.carry_out(pod, plan, observed).await?;
                Ok(false)
            }
        }
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

    /// Carries out a live pod's actions in order, keeping `observed` current
    /// from each action's result, then reports the status.
    async fn carry_out(
        &self,
        pod: &Pod,
        plan: PodActions,
        mut observed: Vec<ContainerInfo>,
    ) -> anyhow::Result<()> {
        let spec = pod.spec.clone().unwrap_or_default();
        let creates = plan.create_sandbox || !plan.to_start.is_empty();
        // Docker does a burst's creations fastest a few at a time: the pod
        // waits for a slot, and says it is creating containers meanwhile.
        let slot = match creates.then(|| self.start_slots.clone().try_acquire_owned()) {
            Some(Err(_)) => {
                let wait = self.start_slots.clone().acquire_owned();
                let ip = sandbox_ip(&plan, &observed);
                let none_unready = HashSet::new();
                let report = self.report_status(pod, &observed, &ip, &plan.waiting, &none_unready);
                let (slot, reported) = tokio::join!(wait.instrument(step!("wait_slot")), report);
                if let Err(e) = reported {
                    tracing::debug!(pod = ?pod.metadata.name, error = %e, "reporting ContainerCreating");
                }
                Some(slot.expect("the start slots are never closed"))
            }
            Some(Ok(slot)) => Some(slot),
            None => None,
        };
        for id in &plan.to_remove {
            self.runtime.stop(id, 0).await?;
            self.runtime.remove(id).await?;
            observed.retain(|c| &c.id != id);
        }
        let sandbox = match plan.sandbox_id.as_deref() {
            Some(id) if !plan.create_sandbox => observed
                .iter()
                .find(|c| c.id == id)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("sandbox {id} left the observed list"))?,
            _ => {
                let s = self.start_sandbox(pod).instrument(step!("sandbox")).await?;
                observed.push(s.clone());
                s
            }
        };
        let pod_ip = sandbox.ip.clone().unwrap_or_default();
        let mut waiting = plan.waiting;
        let has_config_volumes = spec.volumes.iter().flatten().any(config_data::is_published);
        let has_claims = spec
            .volumes
            .iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.is_some());
        // Read only when something starts or mounted content may have changed.
        let needed = !plan.to_start.is_empty() || has_config_volumes;
        let prepared = async {
            let cfg = if needed
                && (has_config_volumes
                    || (has_claims && !plan.to_start.is_empty())
                    || !config_data::references(pod).is_empty())
            {
                self.fetch_config(pod).await?
            } else {
                PodConfig::default()
            };
            // Mounted ConfigMaps and Secrets are refreshed on every sync.
            let mounts = if plan.to_start.is_empty() && !has_config_volumes {
                Vec::new()
            } else {
                self.pod_mounts(pod, &cfg)?
            };
            Ok::<_, anyhow::Error>((cfg, mounts))
        }
        .instrument(step!("volumes"))
        .await;
        let (cfg, mounts) = match prepared {
            Ok(m) => m,
            Err(e) => match e.downcast::<SetUpFailed>() {
                Ok(SetUpFailed(message)) => {
                    tracing::info!(pod = ?pod.metadata.name, %message, "volume set-up failed");
                    self.pull_event(pod, "Warning", "FailedMount", &message)
                        .await;
                    for start in &plan.to_start {
                        if let Some((c, _)) = start_target(&spec, start) {
                            waiting.insert(c.name, ("ContainerCreating".into(), message.clone()));
                        }
                    }
                    return self
                        .report_status(pod, &observed, &pod_ip, &waiting, &HashSet::new())
                        .await;
                }
                Err(other) => return Err(other),
            },
        };
        for start in &plan.to_start {
            let (c, target) = match start_target(&spec, start) {
                Some(found) => found,
                None => continue,
            };
            let c = &c;
            let image = c.image.clone().unwrap_or_default();
            let pull = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
            if let Err((reason, message)) = self
                .ensure_image(pod, &image, pull)
                .instrument(step!("image"))
                .await
            {
                waiting.insert(c.name.clone(), (reason, message));
                continue;
            }
            for id in &start.remove_first {
                self.runtime.stop(id, 0).await?;
                self.runtime.remove(id).await?;
                observed.retain(|x| &x.id != id);
            }
            let container = match self.container_spec(pod, c, &sandbox, &mounts, start, &cfg) {
                Ok(mut spec) => {
                    // An ephemeral container sees its target's processes.
                    spec.pid_of = target
                        .and_then(|t| latest_of(&observed, &t, 0))
                        .filter(|t| t.state.is_running())
                        .map(|t| t.id.clone());
                    spec
                }
                Err(message) => {
                    waiting.insert(
                        c.name.clone(),
                        ("CreateContainerConfigError".into(), message),
                    );
                    continue;
                }
            };
            let name = docker_name(pod, &c.name, start.restart_count);
            match self
                .runtime
                .run_container(&name, &container)
                .instrument(step!("container"))
                .await
            {
                Ok(info) => {
                    observed.push(info);
                    self.container_events(
                        pod,
                        vec![
                            ("Created", format!("Created container: {}", c.name)),
                            ("Started", format!("Started container {}", c.name)),
                        ],
                    );
                }
                Err(e) => {
                    waiting.insert(
                        c.name.clone(),
                        ("CreateContainerError".into(), e.to_string()),
                    );
                    if self.sandbox_is_broken(&sandbox, &e.to_string()).await {
                        // A container cannot join a sandbox that died under it (its
                        // dockerd restarted): remove the sandbox, and the next sync
                        // starts the pod afresh in a new one instead of failing for good.
                        tracing::warn!(pod = pod.metadata.name.as_deref().unwrap_or(""), error = %e, "the pod's sandbox is broken; recreating it");
                        let _ = self.runtime.stop(&sandbox.id, 0).await;
                        let _ = self.runtime.remove(&sandbox.id).await;
                        break;
                    }
                }
            }
        }
        drop(slot);
        // Probes: readiness feeds the status; a failed liveness probe stops the
        // container, and the next sync restarts it under the restart policy.
        let mut unready = HashSet::new();
        for &index in &plan.to_probe {
            let c = &spec.containers[index];
            let Some(cur) = latest_of(&observed, &c.name, 0)
                .filter(|x| x.state.is_running())
                .cloned()
            else {
                continue;
            };
            let (ready, alive) = self.probe_container(c, &cur, &pod_ip).await;
            if !ready {
                unready.insert(c.name.clone());
            }
            if !alive {
                tracing::info!(pod = ?pod.metadata.name, container = %c.name, "liveness probe failed; restarting the container");
                let why = format!(
                    "Container {} failed liveness probe, will be restarted",
                    c.name
                );
                self.container_events(pod, vec![("Killing", why)]);
                let grace = spec.termination_grace_period_seconds.unwrap_or(30);
                self.runtime.stop(&cur.id, grace).await?;
                if let Some(now) = self.runtime.inspect(&cur.id).await? {
                    observed.retain(|x| x.id != cur.id);
                    observed.push(now);
                }
            }
        }
        self.report_status(pod, &observed, &pod_ip, &waiting, &unready)
            .instrument(step!("status"))
            .await
    }
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

/// The container a start is for, and for an ephemeral container the name of
/// the container whose processes it joins. An ephemeral container has the
/// fields of a container (and a few more), so it is read as one.
fn start_target(spec: &PodSpec, start: &ContainerStart) -> Option<(Container, Option<String>)> {
    if !start.ephemeral {
        return spec.containers.get(start.index).cloned().map(|c| (c, None));
    }
    let ephemeral = spec.ephemeral_containers.as_ref()?.get(start.index)?;
    let container: Container = serde_json::to_value(ephemeral)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())?;
    Some((container, ephemeral.target_container_name.clone()))
}
