//! The container runtime: Docker through bollard. Every container the kubelet
//! makes carries labels naming its pod and container, so the kubelet can
//! rebuild what it knows from Docker alone after a restart.

use bollard::container::{
    Config, CreateContainerOptions, InspectContainerOptions, ListContainersOptions, LogOutput,
    LogsOptions, RemoveContainerOptions, StartContainerOptions, StopContainerOptions,
};
use bollard::models::{ContainerStateStatusEnum, Ipam, IpamConfig};
use bollard::network::CreateNetworkOptions;
use bollard::Docker;
use futures::{Stream, StreamExt};
use std::collections::HashMap;

pub const LABEL_POD_UID: &str = "io.minik8s.pod.uid";
pub const LABEL_POD_NAME: &str = "io.minik8s.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.minik8s.pod.namespace";
pub const LABEL_CONTAINER: &str = "io.minik8s.container.name";
pub const LABEL_HASH: &str = "io.minik8s.container.hash";
pub const LABEL_RESTARTS: &str = "io.minik8s.container.restart-count";
/// The node whose kubelet made the container: a kubelet only ever sees its own.
pub const LABEL_NODE: &str = "io.minik8s.node";
/// The container name of a pod's sandbox (pause) container.
pub const SANDBOX: &str = "POD";

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("docker: {0}")]
    Docker(#[from] bollard::errors::Error),
    #[error("{0}")]
    Other(String),
}

/// What Docker says about one of our containers.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerInfo {
    pub id: String,
    pub pod_uid: String,
    pub pod_name: String,
    pub pod_namespace: String,
    /// The pod's container name, or `POD` for the sandbox.
    pub name: String,
    pub hash: String,
    pub restart_count: i32,
    pub image: String,
    pub image_id: String,
    pub state: State,
    /// The sandbox's IP on the pod network (sandbox only).
    pub ip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Created,
    Running {
        started_at: String,
    },
    Exited {
        exit_code: i64,
        started_at: String,
        finished_at: String,
        oom_killed: bool,
    },
}

impl State {
    pub fn is_running(&self) -> bool {
        matches!(self, State::Running { .. })
    }
}

#[derive(Clone)]
pub struct Runtime {
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

impl Runtime {
    /// Connects to the Docker socket (`unix:///var/run/docker.sock` style or a path).
    pub fn connect(socket: &str, network: &str, node: &str) -> Result<Runtime, RuntimeError> {
        let path = socket.trim_start_matches("unix://");
        let docker = Docker::connect_with_unix(path, 120, bollard::API_DEFAULT_VERSION)?;
        Ok(Runtime {
            docker,
            network: network.to_string(),
            node: node.to_string(),
        })
    }

    pub async fn version(&self) -> Result<String, RuntimeError> {
        Ok(self.docker.version().await?.version.unwrap_or_default())
    }

    /// Creates the pod network on `cidr` unless it exists.
    /// The pod network: a Docker bridge network on the node's pod subnet
    /// (`mtu`: flannel's, so pod packets fit its encapsulation; `masquerade`
    /// false when flannel masquerades pod traffic itself, which keeps pod
    /// addresses on pod-to-pod traffic between nodes).
    pub async fn ensure_network(
        &self,
        cidr: &str,
        mtu: Option<u32>,
        masquerade: bool,
    ) -> Result<(), RuntimeError> {
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

    pub async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if not_found(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Pulls an image (only works with a registry in reach).
    pub async fn pull(&self, image: &str) -> Result<(), RuntimeError> {
        let opts = bollard::image::CreateImageOptions {
            from_image: image.to_string(),
            ..Default::default()
        };
        let mut s = self.docker.create_image(Some(opts), None, None);
        while let Some(item) = s.next().await {
            item?;
        }
        Ok(())
    }

    /// All containers of this node's pods, or those of one pod.
    pub async fn list(&self, pod_uid: Option<&str>) -> Result<Vec<ContainerInfo>, RuntimeError> {
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
        let mut out = Vec::new();
        for s in summaries {
            let Some(id) = s.id else { continue };
            match self.inspect(&id).await {
                Ok(Some(c)) => out.push(c),
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        let c = match self
            .docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
        {
            Ok(c) => c,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let labels = c
            .config
            .as_ref()
            .and_then(|cfg| cfg.labels.clone())
            .unwrap_or_default();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
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
        let ip = c
            .network_settings
            .as_ref()
            .and_then(|n| n.networks.as_ref())
            .and_then(|nets| nets.get(&self.network))
            .and_then(|n| n.ip_address.clone())
            .filter(|ip| !ip.is_empty());
        Ok(Some(ContainerInfo {
            id: c.id.unwrap_or_default(),
            pod_uid: label(LABEL_POD_UID),
            pod_name: label(LABEL_POD_NAME),
            pod_namespace: label(LABEL_POD_NAMESPACE),
            name: label(LABEL_CONTAINER),
            hash: label(LABEL_HASH),
            restart_count: label(LABEL_RESTARTS).parse().unwrap_or(0),
            image: c.config.and_then(|cfg| cfg.image).unwrap_or_default(),
            image_id: c.image.unwrap_or_default(),
            state,
            ip,
        }))
    }

    /// Creates and starts a container; returns its id.
    pub async fn run(&self, name: &str, config: Config<String>) -> Result<String, RuntimeError> {
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

    /// SIGTERM, then SIGKILL after `grace_seconds`.
    pub async fn stop(&self, id: &str, grace_seconds: i64) -> Result<(), RuntimeError> {
        match self
            .docker
            .stop_container(
                id,
                Some(StopContainerOptions {
                    t: grace_seconds.max(0),
                }),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            // 304: already stopped.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn remove(&self, id: &str) -> Result<(), RuntimeError> {
        match self
            .docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..Default::default()
                }),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `cmd` inside a running container; returns its exit code.
    pub async fn exec(&self, id: &str, cmd: Vec<String>) -> Result<i64, RuntimeError> {
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
        if let bollard::exec::StartExecResults::Attached { mut output, .. } =
            self.docker.start_exec(&exec.id, None).await?
        {
            while let Some(item) = output.next().await {
                item?;
            }
        }
        Ok(self
            .docker
            .inspect_exec(&exec.id)
            .await?
            .exit_code
            .unwrap_or(-1))
    }

    /// The container's output (stdout and stderr) as a byte stream.
    pub fn logs(
        &self,
        id: &str,
        follow: bool,
        tail: Option<i64>,
        timestamps: bool,
        since: i64,
    ) -> impl Stream<Item = Result<bytes::Bytes, RuntimeError>> + Send + 'static {
        let opts = LogsOptions::<String> {
            follow,
            stdout: true,
            stderr: true,
            timestamps,
            since,
            tail: tail.map(|t| t.to_string()).unwrap_or_else(|| "all".into()),
            ..Default::default()
        };
        self.docker.logs(id, Some(opts)).map(|item| match item {
            Ok(LogOutput::StdOut { message })
            | Ok(LogOutput::StdErr { message })
            | Ok(LogOutput::Console { message }) => Ok(message),
            Ok(LogOutput::StdIn { .. }) => Ok(bytes::Bytes::new()),
            Err(e) => Err(RuntimeError::Docker(e)),
        })
    }
}
