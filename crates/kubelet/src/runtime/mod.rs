//! The container-runtime seam: what the kubelet needs from a runtime, in
//! runtime-neutral terms, and its two implementations.
//!
//! ```text
//!  sync_pod ──SandboxSpec / ContainerSpec──▶ dyn ContainerRuntime ──▶ DockerRuntime (bollard → dockerd)
//!     ▲                                              │               FakeRuntime   (memory; hollow nodes)
//!     └────────────── ContainerInfo (labels, state) ◀┘
//! ```
//!
//! Every container carries labels naming its node, pod and container, so a
//! restarted kubelet rebuilds what it knows from the runtime alone (as the
//! real kubelet does from CRI labels). Kubernetes' CRI draws the same line:
//! the kubelet decides, the runtime only creates, starts, stops, lists.

pub mod docker;
pub mod fake;

pub use docker::DockerRuntime;
pub use fake::FakeRuntime;

use futures::stream::BoxStream;
use std::collections::HashMap;

pub const LABEL_POD_UID: &str = "io.minik8s.pod.uid";
pub const LABEL_POD_NAME: &str = "io.minik8s.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.minik8s.pod.namespace";
pub const LABEL_CONTAINER: &str = "io.minik8s.container.name";
pub const LABEL_HASH: &str = "io.minik8s.container.hash";
pub const LABEL_RESTARTS: &str = "io.minik8s.container.restart-count";
/// The node whose kubelet made the container: a kubelet only ever sees its own.
pub const LABEL_NODE: &str = "io.minik8s.node";
/// On a host-network sandbox: the node's IP, which is the pod's (Docker
/// reports no address for a container on the host's network).
pub const LABEL_HOST_IP: &str = "io.minik8s.pod.host-network-ip";
/// On a sandbox: the RuntimeClass handler its pod runs with, so containers
/// started later (after a kubelet restart too) use the same runtime.
pub const LABEL_RUNTIME_HANDLER: &str = "io.minik8s.pod.runtime-handler";
/// The container name of a pod's sandbox (pause) container.
pub const SANDBOX: &str = "POD";

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("docker: {0}")]
    Docker(#[from] bollard::errors::Error),
    #[error("{0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, RuntimeError>;

/// What the runtime says about one of our containers.
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
    /// The image reference as pod status shows it (`docker-pullable://sha256:...`).
    pub image_id: String,
    pub state: State,
    /// The sandbox's IP on the pod network (sandbox only).
    pub ip: Option<String>,
    /// The RuntimeClass handler the pod runs with (sandbox only; its
    /// containers are started with the same).
    pub runtime_handler: Option<String>,
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

impl ContainerInfo {
    /// Reads the identity labels the kubelet put on a container.
    fn from_labels(id: String, labels: &HashMap<String, String>, state: State) -> ContainerInfo {
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        ContainerInfo {
            id,
            pod_uid: label(LABEL_POD_UID),
            pod_name: label(LABEL_POD_NAME),
            pod_namespace: label(LABEL_POD_NAMESPACE),
            name: label(LABEL_CONTAINER),
            hash: label(LABEL_HASH),
            restart_count: label(LABEL_RESTARTS).parse().unwrap_or(0),
            image: String::new(),
            image_id: String::new(),
            state,
            ip: labels.get(LABEL_HOST_IP).cloned(),
            runtime_handler: labels.get(LABEL_RUNTIME_HANDLER).cloned(),
        }
    }
}

/// The namespaces a pod shares with its node, or among its containers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodNamespaces {
    /// `hostNetwork`: the sandbox (and so every container) on the node's network.
    pub host_network: bool,
    /// `hostPID`: the node's process namespace.
    pub host_pid: bool,
    /// `hostIPC`: the node's IPC namespace.
    pub host_ipc: bool,
    /// `shareProcessNamespace`: one process namespace, the sandbox's, for all containers.
    pub share_process: bool,
}

/// A pod's sandbox: the container that owns its network namespace and hostname.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSpec {
    pub image: String,
    /// None on the host's network (the node's hostname).
    pub hostname: Option<String>,
    pub domainname: Option<String>,
    pub namespaces: PodNamespaces,
    /// Namespaced kernel parameters (`securityContext.sysctls`).
    pub sysctls: Vec<(String, String)>,
    pub labels: HashMap<String, String>,
    /// The pod's own cgroup (pod-level resources), see [`crate::pod_cgroup`].
    pub cgroup_parent: Option<String>,
    /// The runtime (Docker's `--runtime`) of the pod's RuntimeClass handler.
    pub runtime_handler: Option<String>,
}

/// A host path mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host_path: String,
    pub container_path: String,
    pub read_only: bool,
}

/// One app container, joined to its pod's sandbox.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerSpec {
    pub image: String,
    /// Replaces the image's entrypoint (Kubernetes' `command`).
    pub command: Option<Vec<String>>,
    /// Replaces the image's cmd (Kubernetes' `args`).
    pub args: Option<Vec<String>>,
    /// `NAME=value` pairs, already expanded.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub tty: bool,
    pub stdin: bool,
    /// Stdin closes when the first attached client detaches (`kubectl run -i`).
    pub stdin_once: bool,
    pub labels: HashMap<String, String>,
    /// The sandbox whose namespaces (network, IPC) the container joins.
    pub sandbox_id: String,
    /// Which of the node's (or the sandbox's) namespaces it shares.
    pub namespaces: PodNamespaces,
    /// A container whose process namespace this one joins (an ephemeral
    /// container's `targetContainerName`: `ps` there shows the target's processes).
    pub pid_of: Option<String>,
    pub mounts: Vec<Mount>,
    /// CPU limit in billionths of a core.
    pub nano_cpus: Option<i64>,
    pub memory_limit_bytes: Option<i64>,
    /// CPU request as cgroup shares (1024 per core).
    pub cpu_shares: Option<i64>,
    /// The securityContext's user, groups, privileges and capabilities.
    pub security: crate::security::Security,
    /// The signal that stops the container (`lifecycle.stopSignal`; the
    /// image's, else SIGTERM, when unset).
    pub stop_signal: Option<String>,
    /// The pod's own cgroup (pod-level resources), see [`crate::pod_cgroup`].
    pub cgroup_parent: Option<String>,
    /// The runtime (Docker's `--runtime`) of the pod's RuntimeClass handler.
    pub runtime_handler: Option<String>,
    /// Host device nodes given to the container (a DRA driver's edits).
    pub device_nodes: Vec<String>,
}

/// A container's cgroup limits as the runtime sets them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// CPU limit in billionths of a core (the CFS quota over a 100 ms period).
    pub nano_cpus: Option<i64>,
    pub memory_limit_bytes: Option<i64>,
    /// CPU request as cgroup shares (1024 per core).
    pub cpu_shares: Option<i64>,
}

/// How much of a log to read.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    pub follow: bool,
    pub tail: Option<i64>,
    pub timestamps: bool,
    /// Unix seconds; 0 for everything.
    pub since: i64,
}

/// One reading of a running container's use of CPU and memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStats {
    pub usage_nano_cores: u64,
    pub usage_core_nano_seconds: u64,
    pub memory_usage_bytes: u64,
    pub working_set_bytes: u64,
    pub rss_bytes: u64,
}

/// The machine a runtime runs containers on (what cAdvisor tells the real kubelet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineInfo {
    pub cpus: u64,
    pub memory_bytes: u64,
}

/// What `kubectl exec` asks to run and which streams it attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    pub cmd: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Which stream a piece of an exec's output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// A started interactive exec: its output, its stdin, and its id for
/// resizing the terminal and reading the exit code once the output ends.
pub struct ExecSession {
    pub id: String,
    pub output: BoxStream<'static, Result<(OutputStream, bytes::Bytes)>>,
    pub input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
}

/// Everything the kubelet asks of a container runtime.
#[async_trait::async_trait]
pub trait ContainerRuntime: Send + Sync + 'static {
    /// The scheme of container IDs in pod status (`docker://<id>`).
    fn scheme(&self) -> &'static str;
    async fn version(&self) -> Result<String>;
    fn machine(&self) -> MachineInfo;
    /// Creates the pod network on `cidr` unless it exists (`mtu`: flannel's;
    /// `masquerade` false when flannel masquerades pod traffic itself).
    async fn ensure_network(&self, cidr: &str, mtu: Option<u32>, masquerade: bool) -> Result<()>;
    async fn image_present(&self, image: &str) -> Result<bool>;
    /// Pulls an image (only works with a registry in reach), logged in
    /// with `credential` when given.
    async fn pull(
        &self,
        image: &str,
        credential: Option<&crate::credentials::Credential>,
    ) -> Result<()>;
    /// All containers of this node's pods, or those of one pod.
    async fn list(&self, pod_uid: Option<&str>) -> Result<Vec<ContainerInfo>>;
    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>>;
    /// Creates and starts a pod's sandbox on the pod network.
    async fn run_sandbox(&self, name: &str, spec: &SandboxSpec) -> Result<ContainerInfo>;
    /// Creates and starts an app container in its sandbox.
    async fn run_container(&self, name: &str, spec: &ContainerSpec) -> Result<ContainerInfo>;
    /// Changes a running container's CPU and memory in place (in-place
    /// resize): the CPU limit in billionths of a core, the memory limit in
    /// bytes, the CPU shares; None leaves one as it is.
    async fn update_resources(&self, id: &str, limits: ResourceLimits) -> Result<()>;
    /// Creates the pod's own cgroup with its pod-level limits; returns the
    /// parent its sandbox and containers are created under.
    async fn pod_cgroup(&self, pod_uid: &str, limits: &ResourceLimits) -> Result<String>;
    /// Removes a pod's cgroup once its containers are gone.
    async fn remove_pod_cgroup(&self, pod_uid: &str);
    /// SIGTERM, then SIGKILL after `grace_seconds`; a gone or stopped container is fine.
    async fn stop(&self, id: &str, grace_seconds: i64) -> Result<()>;
    /// Removes a container (and its anonymous volumes); a gone one is fine.
    async fn remove(&self, id: &str) -> Result<()>;
    /// Runs `cmd` inside a running container; returns its exit code and
    /// (the start of) its output, stdout and stderr together.
    async fn exec(&self, id: &str, cmd: Vec<String>) -> Result<(i64, String)>;
    /// Starts `spec.cmd` in a running container with its streams attached.
    async fn exec_attached(&self, id: &str, spec: &ExecSpec) -> Result<ExecSession>;
    /// Resizes an exec's terminal (tty sessions).
    async fn exec_resize(&self, exec_id: &str, width: u16, height: u16) -> Result<()>;
    /// The exit code of a finished exec (None while it runs).
    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>>;
    /// Attaches to a running container's own process (`kubectl attach`):
    /// its output from now on and, if it was created with stdin, its stdin.
    /// The session's id is the container's.
    async fn attach(&self, id: &str, spec: &ExecSpec) -> Result<ExecSession>;
    /// Resizes a container's terminal (attach with a tty).
    async fn attach_resize(&self, id: &str, width: u16, height: u16) -> Result<()>;
    /// The network namespace of a running container (a pod's sandbox), as a
    /// path to open and `setns` into (`kubectl port-forward`).
    async fn netns_path(&self, id: &str) -> Result<Option<String>>;
    /// The container's output (stdout and stderr) as a byte stream.
    fn logs(&self, id: &str, opts: LogOptions) -> BoxStream<'static, Result<bytes::Bytes>>;
    /// One stats reading; None when the container is not running.
    async fn stats(&self, id: &str) -> Result<Option<ContainerStats>>;
    /// The local storage a container uses: its writable layer and its log,
    /// in bytes (None when it is gone).
    async fn disk_usage(&self, id: &str) -> Result<Option<u64>>;
    /// The pods (namespace, name) of this node's containers as they exit,
    /// so their pods are synced at once (the real kubelet's PLEG events).
    /// Ends on a runtime error; the caller reconnects. None by default: the
    /// periodic sync still notices exits.
    fn exits(&self) -> BoxStream<'static, Result<(String, String)>> {
        use futures::StreamExt;
        futures::stream::pending().boxed()
    }
}
