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
use crate::config_data::{self, Kind, PodConfig};
use crate::runtime::{
    ContainerInfo, ContainerSpec, Mount, SandboxSpec, LABEL_CONTAINER, LABEL_HASH, LABEL_NODE,
    LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTARTS, SANDBOX,
};
use crate::status::Report;
use crate::Kubelet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret, Service};
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
    pub(crate) fn pod_dir(&self, pod: &Pod) -> std::path::PathBuf {
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
        // The termination message file, one per container instance.
        let log = self
            .termination_log(pod, &c.name, start.restart_count)
            .map_err(|e| format!("creating the termination message file: {e}"))?;
        own_mounts.push(Mount {
            host_path: log.display().to_string(),
            container_path: c
                .termination_message_path
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| crate::lifecycle::DEFAULT_MESSAGE_PATH.into()),
            read_only: false,
        });
        // The pod-wide files (resolv.conf) come under the empty name.
        own_mounts.extend(
            mounts
                .iter()
                .filter(|(name, _)| name.is_empty())
                .map(|(_, m)| m.clone()),
        );
        let env = crate::env::environment(pod, c, pod_ip, &self.config.node_ip, cfg)?;
        Ok(ContainerSpec {
            image: c.image.clone().unwrap_or_default(),
            command: crate::env::expand_list(&c.command, &env),
            args: crate::env::expand_list(&c.args, &env),
            env,
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
            stop_signal: c.lifecycle.as_ref().and_then(|l| l.stop_signal.clone()),
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

    /// The Service variables of the pod's containers, from the Service
    /// cache (none on hollow nodes, which have no cache).
    async fn service_env(&self, pod: &Pod) -> Vec<(String, String)> {
        let Some(services) = self.services.get() else {
            return Vec::new();
        };
        // As the real kubelet, no container starts before the Services were
        // read once: its variables would be missing for good.
        services.wait_synced().await;
        let links = pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let all: Vec<Service> = services.list().iter().map(|s| (**s).clone()).collect();
        crate::service_env::service_env(&all, namespace, links)
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
        let seen = Observed {
            containers: &observed,
            started: &started,
            finished,
            now: chrono::Utc::now(),
        };
        match actions::pod_actions(pod, &seen) {
            PodPlan::Terminate { grace_secs } => {
                tracing::info!(pod = ?pod.metadata.name, grace_secs, containers = observed.len(), "terminating the pod");
                self.stop_pod(pod, &observed, grace_secs).await;
                // Watchers see the pod terminate (Ready=False, its containers'
                // final states) before it goes.
                let after = self.runtime.list(Some(&uid)).await?;
                let waiting = BTreeMap::new();
                let report = Report {
                    containers: &after,
                    pod_ip: &sandbox_ip_of(&after),
                    waiting: &waiting,
                    terminal: true,
                    failed: None,
                };
                if let Err(e) = self.report_status(pod, report).await {
                    tracing::debug!(pod = ?pod.metadata.name, error = %e, "reporting the final status");
                }
                self.kill_containers(&after, 0).await?;
                let _ = std::fs::remove_dir_all(self.pod_dir(pod));
                self.confirm_deletion(pod).await?;
                tracing::info!(pod = ?pod.metadata.name, removed = after.len(), "pod terminated; deletion confirmed");
                Ok(Next::Gone)
            }
            // Finished pods keep their exited containers (for logs) until deleted.
            PodPlan::Finished => Ok(Next::Wait),
            PodPlan::Sync(plan) => self.carry_out(pod, plan, observed).await,
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
    ) -> anyhow::Result<Next> {
        let spec = pod.spec.clone().unwrap_or_default();
        let creates = plan.create_sandbox || !plan.to_start.is_empty();
        // Docker does a burst's creations fastest a few at a time: the pod
        // waits for a slot, and says it is creating containers meanwhile.
        let slot = match creates.then(|| self.start_slots.clone().try_acquire_owned()) {
            Some(Err(_)) => {
                let wait = self.start_slots.clone().acquire_owned();
                let ip = sandbox_ip(&plan, &observed);
                let report = self.report_status(
                    pod,
                    Report {
                        containers: &observed,
                        pod_ip: &ip,
                        waiting: &plan.waiting,
                        terminal: false,
                        failed: None,
                    },
                );
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
                // A new pod (or a new sandbox): what it asks that this
                // kubelet does not do is said once, as a Warning event.
                let spec_value = serde_json::to_value(&spec).unwrap_or_default();
                let ignored = minik8s_api::pod_fields::not_honoured(&spec_value, "spec");
                if !ignored.is_empty() {
                    self.warning_event(pod, "FieldsNotHonoured", ignored.join("; "));
                }
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
        let (mut cfg, mounts) = match prepared {
            Ok(m) => m,
            Err(e) => match e.downcast::<SetUpFailed>() {
                Ok(SetUpFailed(message)) => {
                    tracing::info!(pod = ?pod.metadata.name, %message, "volume set-up failed");
                    self.pull_event(pod, "Warning", "FailedMount", &message)
                        .await;
                    for start in &plan.to_start {
                        if let Some(c) = container_at(&spec, start.which, start.index) {
                            waiting.insert(c.name, ("ContainerCreating".into(), message.clone()));
                        }
                    }
                    let report = Report {
                        containers: &observed,
                        pod_ip: &pod_ip,
                        waiting: &waiting,
                        terminal: false,
                        failed: None,
                    };
                    self.report_status(pod, report).await?;
                    return Ok(Next::Wait);
                }
                Err(other) => return Err(other),
            },
        };
        if !plan.to_start.is_empty() {
            cfg.service_env = self.service_env(pod).await;
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
            // Nothing runs again: stop what still runs (sidecars after
            // the apps), and report the pod's final phase.
            if plan.deadline_exceeded {
                self.warning_event(pod, "DeadlineExceeded", DEADLINE_MESSAGE.to_string());
            }
            self.stop_pod(pod, &observed, crate::lifecycle::pod_grace(pod))
                .await;
            let after = self.runtime.list(pod.metadata.uid.as_deref()).await?;
            let report = Report {
                containers: &after,
                pod_ip: &pod_ip,
                waiting: &waiting,
                terminal: true,
                failed: plan
                    .deadline_exceeded
                    .then_some(("DeadlineExceeded", DEADLINE_MESSAGE)),
            };
            self.report_status(pod, report).await?;
            return Ok(Next::Wait);
        }
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
        let report = Report {
            containers: &observed,
            pod_ip: &pod_ip,
            waiting: &waiting,
            terminal: false,
            failed: None,
        };
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
    /// status), and `observed` gets the new container.
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
            .instrument(step!("image"))
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
            .instrument(step!("container"))
            .await
        {
            Ok(info) => {
                observed.push(info.clone());
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
