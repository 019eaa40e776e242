//! The Docker implementation of [`ContainerRuntime`], through bollard: a
//! sandbox is a pause container on the node's bridge network; app containers
//! join its network and IPC namespaces (`container:<sandbox>`), as dockershim
//! did.

use super::{
    ContainerInfo, ContainerRuntime, ContainerSpec, ContainerStats, ExecSession, ExecSpec,
    LogOptions, MachineInfo, OutputStream, ResourceLimits, Result, RuntimeError, SandboxSpec,
    State, LABEL_NODE, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID,
};
use bollard::container::{
    Config, CreateContainerOptions, InspectContainerOptions, ListContainersOptions, LogOutput,
    LogsOptions, MemoryStatsStats, RemoveContainerOptions, StartContainerOptions, Stats,
    StatsOptions, StopContainerOptions,
};
use bollard::models::{ContainerStateStatusEnum, HostConfig, Ipam, IpamConfig};
use bollard::network::CreateNetworkOptions;
use bollard::Docker;
use futures::stream::BoxStream;
use futures::StreamExt;
use std::collections::HashMap;

#[derive(Clone)]
pub struct DockerRuntime {
    pub docker: Docker,
    /// The Docker network pods join (a bridge on the node's pod CIDR).
    pub network: String,
    /// This node's name: containers are labelled with it and listed by it.
    pub node: String,
}

fn not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// CPU use in nanocores between the two samples of one Docker stats reading.
pub fn nano_cores(s: &Stats) -> u64 {
    let cpu = s
        .cpu_stats
        .cpu_usage
        .total_usage
        .saturating_sub(s.precpu_stats.cpu_usage.total_usage) as f64;
    let system = s
        .cpu_stats
        .system_cpu_usage
        .unwrap_or(0)
        .saturating_sub(s.precpu_stats.system_cpu_usage.unwrap_or(0)) as f64;
    let cpus = s.cpu_stats.online_cpus.unwrap_or(1).max(1) as f64;
    if system <= 0.0 {
        return 0;
    }
    (cpu / system * cpus * 1e9) as u64
}

/// Working set as the kubelet computes it: usage minus inactive file pages.
pub fn working_set(s: &Stats) -> u64 {
    let usage = s.memory_stats.usage.unwrap_or(0);
    let inactive = match &s.memory_stats.stats {
        Some(MemoryStatsStats::V1(v1)) => v1.total_inactive_file,
        Some(MemoryStatsStats::V2(v2)) => v2.inactive_file,
        None => 0,
    };
    usage.saturating_sub(inactive)
}

/// How much of a probe's or hook's output is kept (Kubernetes keeps 10 KiB).
const EXEC_OUTPUT_LIMIT: usize = 10 * 1024;

/// The bollard configuration of an app container.
fn container_config(spec: &ContainerSpec) -> Config<String> {
    let binds = spec
        .mounts
        .iter()
        .map(|m| {
            let ro = if m.read_only { ":ro" } else { "" };
            format!("{}:{}{ro}", m.host_path, m.container_path)
        })
        .collect();
    let mode = format!("container:{}", spec.sandbox_id);
    let ns = spec.namespaces;
    let ipc_mode = if ns.host_ipc {
        "host".to_string()
    } else {
        mode.clone()
    };
    // An ephemeral container's target, else the node's or the sandbox's
    // process namespace when the pod shares one.
    let pid_mode = match &spec.pid_of {
        Some(id) => Some(format!("container:{id}")),
        None if ns.host_pid => Some("host".to_string()),
        None if ns.share_process => Some(mode.clone()),
        None => None,
    };
    Config {
        image: Some(spec.image.clone()),
        entrypoint: spec.command.clone().filter(|v| !v.is_empty()),
        cmd: spec.args.clone().filter(|v| !v.is_empty()),
        env: Some(spec.env.clone()),
        working_dir: spec.working_dir.clone(),
        tty: Some(spec.tty),
        open_stdin: Some(spec.stdin),
        stdin_once: Some(spec.stdin_once),
        labels: Some(spec.labels.clone()),
        stop_signal: spec.stop_signal.clone(),
        user: spec.security.user.clone(),
        host_config: Some(HostConfig {
            network_mode: Some(mode),
            ipc_mode: Some(ipc_mode),
            pid_mode,
            cgroup_parent: spec.cgroup_parent.clone(),
            runtime: spec.runtime_handler.clone(),
            binds: Some(binds),
            devices: (!spec.device_nodes.is_empty()).then(|| {
                spec.device_nodes
                    .iter()
                    .map(|path| bollard::models::DeviceMapping {
                        path_on_host: Some(path.clone()),
                        path_in_container: Some(path.clone()),
                        cgroup_permissions: Some("rwm".into()),
                    })
                    .collect()
            }),
            nano_cpus: spec.nano_cpus,
            memory: spec.memory_limit_bytes,
            cpu_shares: spec.cpu_shares,
            privileged: Some(spec.security.privileged),
            readonly_rootfs: Some(spec.security.readonly_rootfs),
            cap_add: Some(spec.security.cap_add.clone()).filter(|c| !c.is_empty()),
            cap_drop: Some(spec.security.cap_drop.clone()).filter(|c| !c.is_empty()),
            group_add: Some(spec.security.group_add.clone()).filter(|g| !g.is_empty()),
            security_opt: {
                let mut opts = spec.security.profiles.clone();
                if spec.security.no_new_privileges {
                    opts.push("no-new-privileges".to_string());
                }
                (!opts.is_empty()).then_some(opts)
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl DockerRuntime {
    /// Docker's inspection of a container; None when it is gone.
    async fn inspect_raw(
        &self,
        id: &str,
    ) -> Result<Option<bollard::models::ContainerInspectResponse>> {
        match self
            .docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
        {
            Ok(c) => Ok(Some(c)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Connects to the Docker socket (`unix:///var/run/docker.sock` style or a path).
    pub fn connect(socket: &str, network: &str, node: &str) -> Result<DockerRuntime> {
        let path = socket.trim_start_matches("unix://");
        let docker = Docker::connect_with_unix(path, 120, bollard::API_DEFAULT_VERSION)?;
        Ok(DockerRuntime {
            docker,
            network: network.to_string(),
            node: node.to_string(),
        })
    }

    /// Creates and starts a container from a bollard configuration; returns its id.
    /// (Also the floor the pod-startup benchmark compares against.)
    pub async fn create_and_start(&self, name: &str, config: Config<String>) -> Result<String> {
        // A leftover container of the same name (a crash between create and start) is replaced.
        let _ = self
            .docker
            .remove_container(
                name,
                Some(RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions {
                    name: name.to_string(),
                    platform: None,
                }),
                config,
            )
            .await?;
        if let Err(e) = self
            .docker
            .start_container(&created.id, None::<StartContainerOptions<String>>)
            .await
        {
            let _ = self.remove(&created.id).await;
            return Err(e.into());
        }
        Ok(created.id)
    }

    /// Creates and starts a container, then reads back what Docker made of it.
    async fn run_config(&self, name: &str, config: Config<String>) -> Result<ContainerInfo> {
        let id = self.create_and_start(name, config).await?;
        self.inspect(&id)
            .await?
            .ok_or_else(|| RuntimeError::Other(format!("container {id} vanished after start")))
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for DockerRuntime {
    fn scheme(&self) -> &'static str {
        "docker"
    }

    async fn version(&self) -> Result<String> {
        Ok(self.docker.version().await?.version.unwrap_or_default())
    }

    fn machine(&self) -> MachineInfo {
        let mut sys = sysinfo::System::new();
        sys.refresh_memory();
        sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
        MachineInfo {
            cpus: sys.cpus().len().max(1) as u64,
            memory_bytes: sys.total_memory(),
        }
    }

    async fn ensure_network(&self, cidr: &str, mtu: Option<u32>, masquerade: bool) -> Result<()> {
        match self
            .docker
            .inspect_network::<String>(&self.network, None)
            .await
        {
            Ok(net) => {
                let existing = net
                    .ipam
                    .and_then(|i| i.config)
                    .and_then(|c| c.first().and_then(|c| c.subnet.clone()))
                    .unwrap_or_default();
                if existing != cidr {
                    return Err(RuntimeError::Other(format!("docker network {} exists with subnet {existing}, not {cidr}: remove it or use another --network", self.network)));
                }
                Ok(())
            }
            Err(e) if not_found(&e) => {
                let ipam = Ipam {
                    config: Some(vec![IpamConfig {
                        subnet: Some(cidr.to_string()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                };
                let mut options = HashMap::new();
                if let Some(mtu) = mtu {
                    options.insert("com.docker.network.driver.mtu".to_string(), mtu.to_string());
                }
                if !masquerade {
                    options.insert(
                        "com.docker.network.bridge.enable_ip_masquerade".to_string(),
                        "false".to_string(),
                    );
                }
                self.docker
                    .create_network(CreateNetworkOptions {
                        name: self.network.clone(),
                        driver: "bridge".into(),
                        ipam,
                        check_duplicate: true,
                        options,
                        ..Default::default()
                    })
                    .await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn image_present(&self, image: &str) -> Result<bool> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn pull(
        &self,
        image: &str,
        credential: Option<&crate::credentials::Credential>,
    ) -> Result<()> {
        let opts = bollard::image::CreateImageOptions {
            from_image: image.to_string(),
            ..Default::default()
        };
        let login = credential.map(|c| bollard::auth::DockerCredentials {
            username: Some(c.username.clone()),
            password: Some(c.password.clone()),
            serveraddress: Some(c.server.clone()),
            ..Default::default()
        });
        let mut s = self.docker.create_image(Some(opts), None, login);
        while let Some(item) = s.next().await {
            item?;
        }
        Ok(())
    }

    async fn list(&self, pod_uid: Option<&str>) -> Result<Vec<ContainerInfo>> {
        let label = match pod_uid {
            Some(uid) => format!("{LABEL_POD_UID}={uid}"),
            None => LABEL_POD_UID.to_string(),
        };
        let filters = HashMap::from([(
            "label".to_string(),
            vec![label, format!("{LABEL_NODE}={}", self.node)],
        )]);
        let summaries = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters,
                ..Default::default()
            }))
            .await?;
        // Inspected together: a pod's sync waits for the slowest, not the sum.
        let inspections = summaries
            .iter()
            .filter_map(|s| s.id.as_deref())
            .map(|id| self.inspect(id));
        let mut out = Vec::new();
        for c in futures::future::join_all(inspections).await {
            if let Some(c) = c? {
                out.push(c);
            }
        }
        Ok(out)
    }

    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let Some(c) = self.inspect_raw(id).await? else {
            return Ok(None);
        };
        let labels = c
            .config
            .as_ref()
            .and_then(|cfg| cfg.labels.clone())
            .unwrap_or_default();
        let st = c.state.clone().unwrap_or_default();
        let state = match st.status {
            Some(ContainerStateStatusEnum::RUNNING)
            | Some(ContainerStateStatusEnum::RESTARTING)
            | Some(ContainerStateStatusEnum::PAUSED) => State::Running {
                started_at: st.started_at.clone().unwrap_or_default(),
            },
            Some(ContainerStateStatusEnum::EXITED) | Some(ContainerStateStatusEnum::DEAD) => {
                State::Exited {
                    exit_code: st.exit_code.unwrap_or(0),
                    started_at: st.started_at.clone().unwrap_or_default(),
                    finished_at: st.finished_at.clone().unwrap_or_default(),
                    oom_killed: st.oom_killed.unwrap_or(false),
                }
            }
            _ => State::Created,
        };
        let mut info = ContainerInfo::from_labels(c.id.unwrap_or_default(), &labels, state);
        info.ip = c
            .network_settings
            .as_ref()
            .and_then(|n| n.networks.as_ref())
            .and_then(|nets| nets.get(&self.network))
            .and_then(|n| n.ip_address.clone())
            .filter(|ip| !ip.is_empty())
            .or(info.ip);
        info.image = c.config.and_then(|cfg| cfg.image).unwrap_or_default();
        // The image reference as pod status shows it (dockershim's form).
        info.image_id = format!("docker-pullable://{}", c.image.unwrap_or_default());
        Ok(Some(info))
    }

    async fn run_sandbox(&self, name: &str, spec: &SandboxSpec) -> Result<ContainerInfo> {
        let ns = spec.namespaces;
        let sysctls: HashMap<String, String> = spec.sysctls.iter().cloned().collect();
        let config = Config {
            image: Some(spec.image.clone()),
            hostname: spec.hostname.clone(),
            domainname: spec.domainname.clone(),
            labels: Some(spec.labels.clone()),
            host_config: Some(HostConfig {
                network_mode: Some(if ns.host_network {
                    "host".to_string()
                } else {
                    self.network.clone()
                }),
                ipc_mode: Some(if ns.host_ipc { "host" } else { "shareable" }.into()),
                pid_mode: ns.host_pid.then(|| "host".to_string()),
                sysctls: (!sysctls.is_empty()).then_some(sysctls),
                cgroup_parent: spec.cgroup_parent.clone(),
                runtime: spec.runtime_handler.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.run_config(name, config).await
    }

    async fn run_container(&self, name: &str, spec: &ContainerSpec) -> Result<ContainerInfo> {
        self.run_config(name, container_config(spec)).await
    }

    async fn update_resources(&self, id: &str, limits: ResourceLimits) -> Result<()> {
        // The swap limit moves with the memory limit (Kubernetes runs
        // without swap): Docker refuses a memory limit above the swap limit.
        let options = bollard::container::UpdateContainerOptions::<String> {
            nano_cpus: limits.nano_cpus,
            memory: limits.memory_limit_bytes,
            memory_swap: limits.memory_limit_bytes,
            cpu_shares: limits.cpu_shares.map(|s| s as isize),
            ..Default::default()
        };
        self.docker.update_container(id, options).await?;
        Ok(())
    }

    async fn pod_cgroup(&self, pod_uid: &str, limits: &ResourceLimits) -> Result<String> {
        // Docker places a container under a parent cgroup it is given only
        // with its cgroupfs driver; the limits are written on cgroup v1.
        let info = self.docker.info().await?;
        let driver = info
            .cgroup_driver
            .map(|d| d.to_string())
            .unwrap_or_default();
        let version = info
            .cgroup_version
            .map(|v| v.to_string())
            .unwrap_or_default();
        if driver != "cgroupfs" || version != "1" {
            return Err(RuntimeError::Other(format!(
                "pod-level resources need Docker's cgroupfs driver on cgroup v1 (this node: driver {driver:?}, cgroup v{version})"
            )));
        }
        let root = std::path::Path::new(crate::pod_cgroup::CGROUP_ROOT);
        crate::pod_cgroup::create(root, pod_uid, limits)
            .map_err(|e| RuntimeError::Other(format!("creating the pod's cgroup: {e}")))
    }

    async fn remove_pod_cgroup(&self, pod_uid: &str) {
        crate::pod_cgroup::remove(
            std::path::Path::new(crate::pod_cgroup::CGROUP_ROOT),
            pod_uid,
        );
    }

    async fn stop(&self, id: &str, grace_seconds: i64) -> Result<()> {
        let opts = StopContainerOptions {
            t: grace_seconds.max(0),
        };
        match self.docker.stop_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            // 304: already stopped.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn remove(&self, id: &str) -> Result<()> {
        let opts = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn exec(&self, id: &str, cmd: Vec<String>) -> Result<(i64, String)> {
        let exec = self
            .docker
            .create_exec(
                id,
                bollard::exec::CreateExecOptions {
                    cmd: Some(cmd),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await?;
        let mut text = Vec::new();
        if let bollard::exec::StartExecResults::Attached { mut output, .. } =
            self.docker.start_exec(&exec.id, None).await?
        {
            while let Some(item) = output.next().await {
                let bytes = item?.into_bytes();
                // Bounded: a probe's output is for its event, not for memory.
                let room = EXEC_OUTPUT_LIMIT.saturating_sub(text.len());
                text.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
        }
        let code = self
            .docker
            .inspect_exec(&exec.id)
            .await?
            .exit_code
            .unwrap_or(-1);
        Ok((code, String::from_utf8_lossy(&text).into_owned()))
    }

    async fn exec_attached(&self, id: &str, spec: &ExecSpec) -> Result<ExecSession> {
        let exec = self
            .docker
            .create_exec(
                id,
                bollard::exec::CreateExecOptions {
                    cmd: Some(spec.cmd.clone()),
                    attach_stdin: Some(spec.stdin),
                    attach_stdout: Some(spec.stdout),
                    attach_stderr: Some(spec.stderr),
                    tty: Some(spec.tty),
                    ..Default::default()
                },
            )
            .await?;
        let started = self
            .docker
            .start_exec(
                &exec.id,
                Some(bollard::exec::StartExecOptions {
                    detach: false,
                    tty: spec.tty,
                    output_capacity: None,
                }),
            )
            .await?;
        let bollard::exec::StartExecResults::Attached { output, input } = started else {
            return Err(RuntimeError::Other(
                "docker started the exec detached".into(),
            ));
        };
        Ok(ExecSession {
            id: exec.id,
            output: output_stream(output),
            input,
        })
    }

    async fn attach(&self, id: &str, spec: &ExecSpec) -> Result<ExecSession> {
        let attached = self
            .docker
            .attach_container(
                id,
                Some(bollard::container::AttachContainerOptions::<String> {
                    stdin: Some(spec.stdin),
                    stdout: Some(spec.stdout),
                    stderr: Some(spec.stderr),
                    stream: Some(true),
                    logs: Some(false),
                    detach_keys: None,
                }),
            )
            .await?;
        Ok(ExecSession {
            id: id.to_string(),
            output: output_stream(attached.output),
            input: attached.input,
        })
    }

    async fn attach_resize(&self, id: &str, width: u16, height: u16) -> Result<()> {
        self.docker
            .resize_container_tty(
                id,
                bollard::container::ResizeContainerTtyOptions { width, height },
            )
            .await?;
        Ok(())
    }

    async fn netns_path(&self, id: &str) -> Result<Option<String>> {
        let Some(c) = self.inspect_raw(id).await? else {
            return Ok(None);
        };
        let pid = c.state.and_then(|s| s.pid).filter(|&p| p > 0);
        Ok(pid.map(|p| format!("/proc/{p}/ns/net")))
    }

    async fn exec_resize(&self, exec_id: &str, width: u16, height: u16) -> Result<()> {
        self.docker
            .resize_exec(exec_id, bollard::exec::ResizeExecOptions { height, width })
            .await?;
        Ok(())
    }

    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>> {
        let inspected = self.docker.inspect_exec(exec_id).await?;
        Ok(if inspected.running == Some(true) {
            None
        } else {
            inspected.exit_code
        })
    }

    fn logs(&self, id: &str, opts: LogOptions) -> BoxStream<'static, Result<bytes::Bytes>> {
        let opts = LogsOptions::<String> {
            follow: opts.follow,
            stdout: true,
            stderr: true,
            timestamps: opts.timestamps,
            since: opts.since,
            tail: opts
                .tail
                .map(|t| t.to_string())
                .unwrap_or_else(|| "all".into()),
            ..Default::default()
        };
        self.docker
            .logs(id, Some(opts))
            .map(|item| match item {
                Ok(LogOutput::StdOut { message })
                | Ok(LogOutput::StdErr { message })
                | Ok(LogOutput::Console { message }) => Ok(message),
                Ok(LogOutput::StdIn { .. }) => Ok(bytes::Bytes::new()),
                Err(e) => Err(RuntimeError::Docker(e)),
            })
            .boxed()
    }

    fn exits(&self) -> BoxStream<'static, Result<(String, String)>> {
        let filters = HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("event".to_string(), vec!["die".to_string()]),
            (
                "label".to_string(),
                vec![format!("{LABEL_NODE}={}", self.node)],
            ),
        ]);
        let opts = bollard::system::EventsOptions::<String> {
            filters,
            ..Default::default()
        };
        self.docker
            .events(Some(opts))
            .filter_map(|item| async move {
                match item {
                    Err(e) => Some(Err(RuntimeError::Docker(e))),
                    Ok(event) => {
                        // A container's labels come with its events.
                        let attributes = event.actor?.attributes?;
                        let namespace = attributes.get(LABEL_POD_NAMESPACE)?.clone();
                        let name = attributes.get(LABEL_POD_NAME)?.clone();
                        Some(Ok((namespace, name)))
                    }
                }
            })
            .boxed()
    }

    async fn disk_usage(&self, id: &str) -> Result<Option<u64>> {
        let opts = InspectContainerOptions { size: true };
        let c = match self.docker.inspect_container(id, Some(opts)).await {
            Ok(c) => c,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let layer = c.size_rw.unwrap_or(0).max(0) as u64;
        let log = c
            .log_path
            .filter(|p| !p.is_empty())
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        Ok(Some(layer + log))
    }

    async fn stats(&self, id: &str) -> Result<Option<ContainerStats>> {
        let opts = StatsOptions {
            stream: false,
            one_shot: false,
        };
        let Some(reading) = self.docker.stats(id, Some(opts)).next().await else {
            return Ok(None);
        };
        let s = match reading {
            Ok(s) => s,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let rss = match &s.memory_stats.stats {
            Some(MemoryStatsStats::V1(v1)) => v1.total_rss,
            Some(MemoryStatsStats::V2(v2)) => v2.anon,
            None => 0,
        };
        Ok(Some(ContainerStats {
            usage_nano_cores: nano_cores(&s),
            usage_core_nano_seconds: s.cpu_stats.cpu_usage.total_usage,
            memory_usage_bytes: s.memory_stats.usage.unwrap_or(0),
            working_set_bytes: working_set(&s),
            rss_bytes: rss,
        }))
    }
}

/// Docker's multiplexed output as (stream, bytes); a tty's output is stdout.
fn output_stream(
    output: std::pin::Pin<
        Box<
            dyn futures::Stream<
                    Item = std::result::Result<
                        bollard::container::LogOutput,
                        bollard::errors::Error,
                    >,
                > + Send,
        >,
    >,
) -> BoxStream<'static, Result<(OutputStream, bytes::Bytes)>> {
    output
        .filter_map(|item| async move {
            match item {
                Ok(bollard::container::LogOutput::StdErr { message }) => {
                    Some(Ok((OutputStream::Stderr, message)))
                }
                Ok(bollard::container::LogOutput::StdOut { message })
                | Ok(bollard::container::LogOutput::Console { message }) => {
                    Some(Ok((OutputStream::Stdout, message)))
                }
                Ok(bollard::container::LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(RuntimeError::from(e))),
            }
        })
        .boxed()
}
