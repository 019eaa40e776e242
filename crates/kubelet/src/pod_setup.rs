//! What a pod's containers are made of, before `sync_pod` starts them:
//! Docker names and labels, the pod's directory, its volumes (emptyDir,
//! hostPath, claims, and the ConfigMaps, Secrets and tokens published into
//! them), the runtime-neutral [`ContainerSpec`] (environment, mounts,
//! limits, security, the termination message file), resolv.conf, and the
//! sandbox.

use crate::actions::ContainerStart;
use crate::config_data::{self, Kind, PodConfig};
use crate::runtime::{
    ContainerInfo, ContainerSpec, Mount, SandboxSpec, LABEL_CONTAINER, LABEL_HASH, LABEL_HOST_IP,
    LABEL_NODE, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTARTS,
    LABEL_RUNTIME_HANDLER, SANDBOX,
};
use crate::Kubelet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use minik8s_api::quantity::Quantity;
use minik8s_api::registry;
use std::collections::HashMap;

fn short(uid: &str) -> &str {
    &uid[..uid.len().min(8)]
}

/// Docker's name for a pod's container, as dockershim named them.
pub(crate) fn docker_name(pod: &Pod, container: &str, restarts: i32) -> String {
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

/// A volume could not be set up (a required ConfigMap, Secret or key is
/// missing): the pod's containers wait in ContainerCreating.
#[derive(Debug)]
pub(crate) struct SetUpFailed(pub(crate) String);

impl std::fmt::Display for SetUpFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetUpFailed {}

/// A resource claim is not ready for the pod on this node (not reserved for
/// it, a driver missing): the containers wait, the event says why.
#[derive(Debug)]
pub(crate) struct PrepareResourcesFailed(pub(crate) String);

impl std::fmt::Display for PrepareResourcesFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Failed to prepare dynamic resources: {}", self.0)
    }
}

impl std::error::Error for PrepareResourcesFailed {}

/// The container's volume mounts, each at its volume's host path (or the
/// entry its subPath or subPathExpr names, expanded with `env`).
fn volume_mounts(
    c: &Container,
    mounts: &[(String, Mount)],
    env: &[String],
) -> Result<Vec<Mount>, String> {
    let mut own_mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let Some((_, volume)) = mounts.iter().find(|(name, _)| *name == m.name) else {
            continue;
        };
        // subPath: one entry of the volume (resolved once: no updates,
        // as in Kubernetes); subPathExpr: one named by the container's
        // variables (`$(POD_NAME)`).
        let sub = match (&m.sub_path, &m.sub_path_expr) {
            (Some(p), _) if !p.is_empty() => Some(p.clone()),
            (_, Some(e)) if !e.is_empty() => {
                let expanded = crate::env::expand_with(e, env);
                if expanded.starts_with('/') || expanded.split('/').any(|p| p == "..") {
                    return Err(format!(
                        "failed to prepare subPath for volumeMount {:?} of container {:?}",
                        m.name, c.name
                    ));
                }
                Some(expanded)
            }
            _ => None,
        };
        let host_path = match sub {
            Some(sub) => format!("{}/{}", volume.host_path, sub.trim_start_matches('/')),
            None => volume.host_path.clone(),
        };
        own_mounts.push(Mount {
            host_path,
            container_path: m.mount_path.clone(),
            read_only: m.read_only == Some(true) || volume.read_only,
        });
    }
    Ok(own_mounts)
}

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
                let medium = v.empty_dir.as_ref().and_then(|e| e.medium.as_deref());
                if medium == Some("Memory") {
                    let size = v
                        .empty_dir
                        .as_ref()
                        .and_then(|e| e.size_limit.as_ref())
                        .and_then(|q| Quantity::parse(&q.0).ok())
                        .map(|q| q.units());
                    crate::tmpfs::ensure_tmpfs(&dir, size).map_err(|e| {
                        SetUpFailed(format!(
                            "MountVolume.SetUp failed for volume \"{}\" : mounting a tmpfs: {e}",
                            v.name
                        ))
                    })?;
                } else {
                    std::fs::create_dir_all(&dir)?;
                }
                crate::security::empty_dir_ownership(&dir, pod)?;
                (dir.display().to_string(), false)
            } else {
                let mut files = config_data::volume_files(v, cfg).map_err(|message| {
                    SetUpFailed(format!(
                        "MountVolume.SetUp failed for volume \"{}\" : {message}",
                        v.name
                    ))
                })?;
                let fs_group = crate::security::fs_group(pod);
                config_data::with_fs_group(&mut files, fs_group);
                if config_data::publish(&dir, &files, fs_group)? {
                    tracing::debug!(pod = ?pod.metadata.name, volume = %v.name, "volume content published");
                }
                (dir.display().to_string(), true)
            };
            out.insert(v.name.clone(), entry);
        }
        Ok(out)
    }

    /// The ConfigMaps and Secrets the pod refers to, as they are now.
    pub(crate) async fn fetch_config(&self, pod: &Pod) -> anyhow::Result<PodConfig> {
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
        cfg.device_edits = self
            .prepare_resources(pod)
            .await?
            .map_err(PrepareResourcesFailed)?;
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
    pub(crate) fn container_spec(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &ContainerInfo,
        mounts: &[(String, Mount)],
        start: &ContainerStart,
        cfg: &PodConfig,
    ) -> Result<ContainerSpec, String> {
        // The container's allocation: its spec's, or an accepted resize's.
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let allocated = self.allocations.for_start(uid, c);
        let (nano_cpus, memory_limit_bytes, cpu_shares) = crate::resize::runtime_limits(&allocated);
        let pod_ip = sandbox.ip.as_deref().unwrap_or("");
        let mut env = crate::env::environment(pod, c, pod_ip, &self.config.node_ip, cfg)?;
        // A DRA driver's edits come last, as CDI applies them over the spec.
        let device_edits = cfg.device_edits.get(&c.name).cloned().unwrap_or_default();
        env.extend(device_edits.env.iter().map(|(k, v)| format!("{k}={v}")));
        let mut own_mounts = volume_mounts(c, mounts, &env)?;
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
        // The kubelet's /etc/hosts, unless the container mounts its own.
        if !own_mounts.iter().any(|m| m.container_path == "/etc/hosts") {
            let hosts = self
                .write_hosts_file(pod, pod_ip)
                .map_err(|e| format!("writing the pod's /etc/hosts: {e}"))?;
            own_mounts.push(Mount {
                host_path: hosts.display().to_string(),
                container_path: "/etc/hosts".into(),
                read_only: false,
            });
        }
        // The pod-wide files (resolv.conf) come under the empty name.
        own_mounts.extend(
            mounts
                .iter()
                .filter(|(name, _)| name.is_empty())
                .map(|(_, m)| m.clone()),
        );
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
            namespaces: crate::pod_host::namespaces(pod.spec.as_ref()),
            pid_of: None,
            mounts: own_mounts,
            nano_cpus,
            memory_limit_bytes,
            cpu_shares,
            security: crate::security::container_security(
                pod,
                c,
                &self.config.root_dir.join("seccomp"),
            )?,
            stop_signal: c.lifecycle.as_ref().and_then(|l| l.stop_signal.clone()),
            cgroup_parent: pod
                .spec
                .as_ref()
                .and_then(crate::pod_cgroup::pod_limits)
                .map(|_| crate::pod_cgroup::parent(uid)),
            runtime_handler: sandbox.runtime_handler.clone(),
            device_nodes: device_edits.device_nodes,
        })
    }

    /// What the containers to start need (`starting`), and what mounted
    /// content needs refreshing on every sync: the ConfigMaps, Secrets,
    /// tokens and claims the pod refers to, and the host side of its mounts.
    /// Read only when something starts or mounted content may have changed.
    pub(crate) async fn prepare_config_and_mounts(
        &self,
        pod: &Pod,
        starting: bool,
    ) -> anyhow::Result<(PodConfig, Vec<(String, Mount)>)> {
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        let has_config_volumes = volumes.into_iter().flatten().any(config_data::is_published);
        let has_claims = volumes
            .into_iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.is_some());
        let needed = starting || has_config_volumes;
        let has_resource_claims = !minik8s_api::dra::pod_claim_entries(pod).is_empty();
        let cfg = if needed
            && (has_config_volumes
                || ((has_claims || has_resource_claims) && starting)
                || !config_data::references(pod).is_empty())
        {
            self.fetch_config(pod).await?
        } else {
            PodConfig::default()
        };
        let machine = self.runtime.machine();
        let allocatable = (machine.cpus as i64 * 1000, machine.memory_bytes as i64);
        let mut cfg = cfg;
        cfg.resources = crate::resource_fields::ResourceView::of(pod, allocatable);
        // Mounted ConfigMaps and Secrets are refreshed on every sync.
        let mounts = if !starting && !has_config_volumes {
            Vec::new()
        } else {
            self.pod_mounts(pod, &cfg)?
        };
        Ok((cfg, mounts))
    }

    /// The host side of the pod's mounts: its volumes by name, and its
    /// resolv.conf under the empty name.
    pub(crate) fn pod_mounts(
        &self,
        pod: &Pod,
        cfg: &PodConfig,
    ) -> anyhow::Result<Vec<(String, Mount)>> {
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

    /// Writes the pod's /etc/hosts under its directory (see [`crate::pod_host`]).
    fn write_hosts_file(&self, pod: &Pod, pod_ip: &str) -> std::io::Result<std::path::PathBuf> {
        let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let text =
            crate::pod_host::hosts_file(pod, pod_ip, &self.config.cluster_domain, &node_hosts);
        let dir = self.pod_dir(pod);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("etc-hosts");
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text)?;
        }
        Ok(path)
    }

    /// Whether a container failed to start because of its sandbox: the
    /// sandbox is no longer running, or the runtime could not join its namespaces.
    pub(crate) async fn sandbox_is_broken(&self, sandbox: &ContainerInfo, error: &str) -> bool {
        let running =
            matches!(self.runtime.inspect(&sandbox.id).await, Ok(Some(s)) if s.state.is_running());
        !running || crate::decide::is_sandbox_join_error(error)
    }

    /// Starts the sandbox: the pause container owning the network namespace and hostname.
    pub(crate) async fn start_sandbox(&self, pod: &Pod) -> anyhow::Result<ContainerInfo> {
        let spec = pod.spec.as_ref();
        let (hostname, domainname) =
            crate::pod_host::sandbox_hostname(pod, &self.config.cluster_domain)
                .map_err(anyhow::Error::msg)?;
        let namespaces = crate::pod_host::namespaces(spec);
        let mut labels = labels(pod, SANDBOX, "", 0);
        if namespaces.host_network {
            labels.insert(LABEL_HOST_IP.to_string(), self.config.node_ip.clone());
        }
        // Pod-level resources: the pod's own cgroup, limits written first.
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let cgroup_parent = match spec.and_then(crate::pod_cgroup::pod_limits) {
            Some(limits) => Some(self.runtime.pod_cgroup(uid, &limits).await?),
            None => None,
        };
        let runtime_handler = match self.runtime_handler(pod).await {
            Ok(h) => h,
            Err(e) => {
                let message = format!("Failed to create pod sandbox: {e}");
                self.warning_event(pod, "FailedCreatePodSandBox", message.clone());
                anyhow::bail!(message);
            }
        };
        if let Some(h) = &runtime_handler {
            labels.insert(LABEL_RUNTIME_HANDLER.to_string(), h.clone());
        }
        let sandbox = SandboxSpec {
            image: self.config.pause_image.clone(),
            hostname,
            domainname,
            namespaces,
            sysctls: crate::pod_host::sysctls(spec),
            labels,
            cgroup_parent,
            runtime_handler,
        };
        let started = self
            .runtime
            .run_sandbox(&docker_name(pod, SANDBOX, 0), &sandbox)
            .await;
        if let (Err(e), Some(h)) = (&started, &sandbox.runtime_handler) {
            // The node's runtime does not know the handler: said as Kubernetes says it.
            self.warning_event(
                pod,
                "FailedCreatePodSandBox",
                format!("Failed to create pod sandbox: runtime handler {h:?}: {e}"),
            );
        }
        Ok(started?)
    }

    /// The handler of the pod's RuntimeClass (None: the node's default runtime).
    async fn runtime_handler(&self, pod: &Pod) -> anyhow::Result<Option<String>> {
        let Some(name) = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .filter(|n| !n.is_empty())
        else {
            return Ok(None);
        };
        let classes: minik8s_client::Api<k8s_openapi::api::node::v1::RuntimeClass> =
            minik8s_client::Api::all(&self.client);
        match classes.get(name).await {
            Ok(class) => Ok(Some(class.handler)),
            Err(e) if e.is_not_found() => {
                anyhow::bail!("runtimeclass.node.k8s.io {name:?} not found")
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The Service variables of the pod's containers, from the Service
    /// cache (none on hollow nodes, which have no cache).
    pub(crate) async fn service_env(&self, pod: &Pod) -> Vec<(String, String)> {
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
        crate::service_env::service_env(&services.list(), namespace, links)
    }
}
