//! A container runtime in memory, for hollow nodes (scale benchmarks and
//! controller tests), as kubemark runs the real kubelet on a fake runtime:
//! every image is present, containers start at once and run until stopped,
//! sandboxes get addresses from the node's pod CIDR. Nothing touches the host.

use super::{
    ContainerInfo, ContainerRuntime, ContainerSpec, ContainerStats, ExecSession, ExecSpec,
    LogOptions, MachineInfo, ResourceLimits, Result, RuntimeError, SandboxSpec, State,
    LABEL_POD_UID,
};
use futures::stream::BoxStream;
use futures::StreamExt;
use minik8s_api::meta::now_rfc3339;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// One fake container: what `inspect` reports, and the labels it was made with.
struct Entry {
    info: ContainerInfo,
    labels: HashMap<String, String>,
}

#[derive(Default)]
struct Inner {
    /// By id, in creation order (ids count up).
    containers: BTreeMap<u64, Entry>,
    next_id: u64,
    /// The pod network: its first address and size.
    network: Option<(u32, u32)>,
    next_host: u32,
    /// Sandboxes still to be made broken (see [`FakeRuntime::break_next_sandbox`]).
    to_break: usize,
    /// Broken sandboxes by id: running, but no container can join them.
    broken: HashSet<u64>,
    /// How long each start takes (see [`FakeRuntime::set_start_latency`]).
    start_latency: std::time::Duration,
    /// Starts under way now, and the most there ever were at once.
    starting: usize,
    peak_starting: usize,
}

/// The in-memory runtime of one hollow node.
pub struct FakeRuntime {
    machine: MachineInfo,
    inner: Mutex<Inner>,
}

fn parse_id(id: &str) -> Option<u64> {
    id.strip_prefix("fake-")
        .and_then(|n| u64::from_str_radix(n, 16).ok())
}

/// `a.b.c.d/len` as (first address, number of addresses).
fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
    let (ip, len) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| (8..=30).contains(l))?;
    let size = 1u32 << (32 - len);
    Some((u32::from(ip) & !(size - 1), size))
}

impl FakeRuntime {
    /// A node with `cpus` cores and `memory_bytes` of memory.
    pub fn new(cpus: u64, memory_bytes: u64) -> FakeRuntime {
        FakeRuntime {
            machine: MachineInfo { cpus, memory_bytes },
            inner: Mutex::default(),
        }
    }

    /// The next sandbox this runtime makes is broken as a Docker sandbox is
    /// after its dockerd was killed: it still reports running, but every
    /// container started in it fails with Docker's "cannot join IPC of a non
    /// running container" (the kubelet must replace the sandbox, not retry).
    /// For controller tests of that path.
    pub fn break_next_sandbox(&self) {
        self.lock().to_break += 1;
    }

    /// Each sandbox and container start from now on takes `latency` (as a
    /// real runtime's do), for tests of how many starts the kubelet asks for at once.
    pub fn set_start_latency(&self, latency: std::time::Duration) {
        self.lock().start_latency = latency;
    }

    /// The most sandbox and container starts that were under way at once.
    pub fn peak_concurrent_starts(&self) -> usize {
        self.lock().peak_starting
    }

    /// Counts one start while it takes the start latency.
    async fn starting(&self) {
        let latency = {
            let mut inner = self.lock();
            inner.starting += 1;
            inner.peak_starting = inner.peak_starting.max(inner.starting);
            inner.start_latency
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        self.lock().starting -= 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a running container; `ip` for sandboxes.
    fn start(
        &self,
        labels: &HashMap<String, String>,
        image: &str,
        sandbox: bool,
    ) -> Result<ContainerInfo> {
        let mut inner = self.lock();
        let ip = if sandbox {
            Some(inner.next_address()?)
        } else {
            None
        };
        inner.next_id += 1;
        let id = format!("fake-{:012x}", inner.next_id);
        let state = State::Running {
            started_at: now_rfc3339(),
        };
        let mut info = ContainerInfo::from_labels(id, labels, state);
        info.image = image.to_string();
        info.image_id = format!("fake://{image}");
        info.ip = ip.map(|ip| ip.to_string());
        let key = inner.next_id;
        inner.containers.insert(
            key,
            Entry {
                info: info.clone(),
                labels: labels.clone(),
            },
        );
        Ok(info)
    }
}

impl Inner {
    /// The next free host address of the pod network (round robin, so an
    /// address comes back as late as possible).
    fn next_address(&mut self) -> Result<Ipv4Addr> {
        let (base, size) = self
            .network
            .ok_or_else(|| RuntimeError::Other("the pod network does not exist".into()))?;
        let used: HashSet<String> = self
            .containers
            .values()
            .filter_map(|e| e.info.ip.clone().filter(|_| e.info.state.is_running()))
            .collect();
        // .0 is the network, .1 the gateway, the last the broadcast.
        for _ in 0..size {
            let host = 2 + self.next_host % (size - 3);
            self.next_host += 1;
            let ip = Ipv4Addr::from(base + host);
            if !used.contains(&ip.to_string()) {
                return Ok(ip);
            }
        }
        Err(RuntimeError::Other(
            "no free address on the pod network".into(),
        ))
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for FakeRuntime {
    fn scheme(&self) -> &'static str {
        "fake"
    }

    async fn version(&self) -> Result<String> {
        Ok("0.0.0-fake".into())
    }

    fn machine(&self) -> MachineInfo {
        self.machine.clone()
    }

    async fn ensure_network(&self, cidr: &str, _mtu: Option<u32>, _masquerade: bool) -> Result<()> {
        let net = parse_cidr(cidr).ok_or_else(|| {
            RuntimeError::Other(format!("{cidr:?} is not an IPv4 CIDR of /8 to /30"))
        })?;
        let mut inner = self.lock();
        match inner.network {
            Some(existing) if existing != net => Err(RuntimeError::Other(format!(
                "the pod network exists on another subnet than {cidr}"
            ))),
            _ => {
                inner.network = Some(net);
                Ok(())
            }
        }
    }

    async fn image_present(&self, _image: &str) -> Result<bool> {
        Ok(true)
    }

    async fn pull(
        &self,
        _image: &str,
        _credential: Option<&crate::credentials::Credential>,
    ) -> Result<()> {
        Ok(())
    }

    async fn list(&self, pod_uid: Option<&str>) -> Result<Vec<ContainerInfo>> {
        Ok(self
            .lock()
            .containers
            .values()
            .filter(|e| {
                pod_uid.is_none_or(|uid| e.labels.get(LABEL_POD_UID).is_some_and(|l| l == uid))
            })
            .map(|e| e.info.clone())
            .collect())
    }

    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let inner = self.lock();
        Ok(parse_id(id)
            .and_then(|k| inner.containers.get(&k))
            .map(|e| e.info.clone()))
    }

    async fn run_sandbox(&self, _name: &str, spec: &SandboxSpec) -> Result<ContainerInfo> {
        self.starting().await;
        let info = self.start(&spec.labels, &spec.image, true)?;
        let mut inner = self.lock();
        if inner.to_break > 0 {
            inner.to_break -= 1;
            inner.broken.extend(parse_id(&info.id));
        }
        Ok(info)
    }

    async fn run_container(&self, _name: &str, spec: &ContainerSpec) -> Result<ContainerInfo> {
        self.starting().await;
        let sandbox_running = self
            .lock()
            .containers
            .get(&parse_id(&spec.sandbox_id).unwrap_or(0))
            .is_some_and(|e| e.info.state.is_running());
        if !sandbox_running {
            return Err(RuntimeError::Other(format!(
                "sandbox {} is not running",
                spec.sandbox_id
            )));
        }
        if parse_id(&spec.sandbox_id).is_some_and(|k| self.lock().broken.contains(&k)) {
            return Err(RuntimeError::Other(format!(
                "Error response from daemon: cannot join IPC of a non running container: {}",
                spec.sandbox_id
            )));
        }
        self.start(&spec.labels, &spec.image, false)
    }

    async fn update_resources(&self, id: &str, _limits: ResourceLimits) -> Result<()> {
        let running = parse_id(id).and_then(|k| {
            self.lock()
                .containers
                .get(&k)
                .map(|e| e.info.state.is_running())
        });
        match running {
            Some(true) => Ok(()),
            _ => Err(RuntimeError::Other(format!(
                "container {id} is not running"
            ))),
        }
    }

    async fn pod_cgroup(&self, pod_uid: &str, _limits: &ResourceLimits) -> Result<String> {
        Ok(crate::pod_cgroup::parent(pod_uid))
    }

    async fn remove_pod_cgroup(&self, _pod_uid: &str) {}

    async fn stop(&self, id: &str, grace_seconds: i64) -> Result<()> {
        let mut inner = self.lock();
        if let Some(e) = parse_id(id).and_then(|k| inner.containers.get_mut(&k)) {
            if let State::Running { started_at } = &e.info.state {
                e.info.state = State::Exited {
                    // SIGTERM honoured, or SIGKILL.
                    exit_code: if grace_seconds > 0 { 143 } else { 137 },
                    started_at: started_at.clone(),
                    finished_at: now_rfc3339(),
                    oom_killed: false,
                };
            }
        }
        Ok(())
    }

    async fn remove(&self, id: &str) -> Result<()> {
        if let Some(k) = parse_id(id) {
            self.lock().containers.remove(&k);
        }
        Ok(())
    }

    async fn exec_attached(&self, id: &str, _spec: &ExecSpec) -> Result<ExecSession> {
        // Hollow nodes run no processes: there is nothing to talk to.
        Err(RuntimeError::Other(format!(
            "the fake runtime cannot exec into container {id}"
        )))
    }

    async fn attach(&self, id: &str, _spec: &ExecSpec) -> Result<ExecSession> {
        Err(RuntimeError::Other(format!(
            "the fake runtime cannot attach to container {id}"
        )))
    }

    async fn attach_resize(&self, _id: &str, _width: u16, _height: u16) -> Result<()> {
        Ok(())
    }

    async fn netns_path(&self, _id: &str) -> Result<Option<String>> {
        Ok(None)
    }

    async fn exec_resize(&self, _exec_id: &str, _width: u16, _height: u16) -> Result<()> {
        Ok(())
    }

    async fn exec_exit_code(&self, _exec_id: &str) -> Result<Option<i64>> {
        Ok(None)
    }

    async fn exec(&self, id: &str, _cmd: Vec<String>) -> Result<(i64, String)> {
        match self.inspect(id).await? {
            Some(c) if c.state.is_running() => Ok((0, String::new())),
            _ => Err(RuntimeError::Other(format!(
                "container {id} is not running"
            ))),
        }
    }

    fn logs(&self, _id: &str, _opts: LogOptions) -> BoxStream<'static, Result<bytes::Bytes>> {
        futures::stream::empty().boxed()
    }

    async fn disk_usage(&self, id: &str) -> Result<Option<u64>> {
        let known = parse_id(id).is_some_and(|k| self.lock().containers.contains_key(&k));
        Ok(known.then_some(0))
    }

    async fn stats(&self, id: &str) -> Result<Option<ContainerStats>> {
        Ok(self
            .inspect(id)
            .await?
            .filter(|c| c.state.is_running())
            .map(|_| ContainerStats::default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::LABEL_CONTAINER;

    fn labels(uid: &str, name: &str) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_POD_UID.to_string(), uid.to_string()),
            (LABEL_CONTAINER.to_string(), name.to_string()),
        ])
    }

    #[tokio::test]
    async fn sandboxes_get_distinct_addresses_and_apps_need_a_running_sandbox() {
        let rt = FakeRuntime::new(4, 16 << 30);
        let sandbox = SandboxSpec {
            labels: labels("u1", "POD"),
            ..Default::default()
        };
        assert!(
            rt.run_sandbox("s", &sandbox).await.is_err(),
            "no network yet"
        );
        rt.ensure_network("10.9.0.0/24", None, true).await.unwrap();
        let a = rt.run_sandbox("a", &sandbox).await.unwrap();
        let b = rt.run_sandbox("b", &sandbox).await.unwrap();
        assert_eq!(a.ip.as_deref(), Some("10.9.0.2"));
        assert_eq!(b.ip.as_deref(), Some("10.9.0.3"));
        let app = ContainerSpec {
            labels: labels("u1", "c"),
            sandbox_id: a.id.clone(),
            pid_of: None,
            image: "busybox".into(),
            ..Default::default()
        };
        let c = rt.run_container("c", &app).await.unwrap();
        assert!(c.state.is_running());
        assert_eq!(rt.list(Some("u1")).await.unwrap().len(), 3);
        assert!(rt.list(Some("u2")).await.unwrap().is_empty());
        rt.stop(&a.id, 0).await.unwrap();
        assert!(matches!(
            rt.inspect(&a.id).await.unwrap().unwrap().state,
            State::Exited { exit_code: 137, .. }
        ));
        assert!(
            rt.run_container("c", &app).await.is_err(),
            "the sandbox is stopped"
        );
        rt.remove(&c.id).await.unwrap();
        assert_eq!(rt.inspect(&c.id).await.unwrap(), None);
    }

    #[test]
    fn addresses_come_back_last() {
        let mut inner = Inner {
            network: parse_cidr("10.0.0.0/29"),
            ..Default::default()
        };
        let got: Vec<String> = (0..7)
            .map(|_| inner.next_address().unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.2", "10.0.0.3"]
        );
    }
}
