//! The benchmarks (`src/bin/`): each prints its numbers beside the floor it
//! is compared with (raw etcd, bare Docker); `doc/benchmarks.md` records them.
//! Their own crate, so the production binaries link none of it.

pub mod burst;
pub mod lifecycle;

/// The benchmarks allocate as the production binaries do (mimalloc): hollow
/// nodes and the in-process scheduler must not be measured on a slower heap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Resident memory of a process in MiB (`/proc/<pid>/status`, VmRSS; `self` for this one).
pub fn rss_mib(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Creates `obj` and waits on a watch until `done` holds for it; the elapsed ms.
pub async fn create_until(
    api: &minik8s_client::DynamicApi,
    obj: serde_json::Value,
    done: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<f64> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let rv = api
        .list(&minik8s_client::ListParams::default().fields("metadata.name=none"))
        .await?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut watch = api
        .watch(
            &minik8s_client::ListParams::default().fields(&format!("metadata.name={name}")),
            &rv,
            false,
        )
        .await?;
    let t = std::time::Instant::now();
    api.create(&obj).await?;
    loop {
        let ev = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            futures::StreamExt::next(&mut watch),
        )
        .await
        .map_err(|_| anyhow::anyhow!("{name} not done after 60 s"))?;
        if let Some(Ok(
            minik8s_client::WatchEvent::Added(o) | minik8s_client::WatchEvent::Modified(o),
        )) = ev
        {
            if done(&o) {
                return Ok(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
}

/// Seconds until `done` holds for the object `name`, polled every `every`;
/// an error after `deadline`.
pub async fn until_object(
    api: &minik8s_client::DynamicApi,
    name: &str,
    every: std::time::Duration,
    deadline: std::time::Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<f64> {
    let t = std::time::Instant::now();
    loop {
        if let Ok(obj) = api.get(name).await {
            if done(&obj) {
                return Ok(t.elapsed().as_secs_f64());
            }
        }
        if t.elapsed() > deadline {
            anyhow::bail!("{name}: not done after {} s", deadline.as_secs());
        }
        tokio::time::sleep(every).await;
    }
}

/// An integer field of a JSON object (0 when absent).
pub fn int(obj: &serde_json::Value, pointer: &str) -> i64 {
    obj.pointer(pointer)
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
}

/// A child process killed (and reaped) when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The benchmark's positional numbers (NODES, PODS, ...) in order; words
/// (flags) are left to the benchmark.
pub fn numeric_args<T: std::str::FromStr>() -> Vec<T> {
    std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// Registers `count` hollow nodes `hollow-0..` (the real kubelet on the fake
/// runtime, [`kubelet::hollow`]) and runs them in the background until the
/// process ends; returns the seconds the registration took.
pub async fn run_hollow_nodes(
    client: &minik8s_client::Client,
    count: usize,
    lease_seconds: u64,
    sync_seconds: u64,
) -> anyhow::Result<f64> {
    run_hollow_nodes_with_gpus(client, count, lease_seconds, sync_seconds, 0).await
}

/// [`run_hollow_nodes`] whose nodes each publish `fake_gpus` GPUs (DRA).
pub async fn run_hollow_nodes_with_gpus(
    client: &minik8s_client::Client,
    count: usize,
    lease_seconds: u64,
    sync_seconds: u64,
    fake_gpus: usize,
) -> anyhow::Result<f64> {
    let t = std::time::Instant::now();
    let config = kubelet::hollow::HollowConfig {
        prefix: "hollow".into(),
        count,
        lease_seconds,
        sync_seconds,
        fake_gpus,
    };
    let nodes = kubelet::hollow::start(client, &config).await?;
    tokio::spawn(nodes.run_forever());
    Ok(t.elapsed().as_secs_f64())
}

/// Starts one of the workspace's binaries from the directory this benchmark
/// runs from (`target/release`), quiet, killed when the [`Proc`] is dropped.
pub fn spawn_release_bin(name: &str, args: &[&str]) -> anyhow::Result<Proc> {
    let bin = std::env::current_exe()?
        .parent()
        .expect("target dir")
        .join(name);
    std::process::Command::new(&bin)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(Proc)
        .map_err(|e| {
            anyhow::anyhow!(
                "starting {} (cargo build --release -p {name} first): {e}",
                bin.display()
            )
        })
}

/// Whether `server` answers /readyz within 30 s.
pub async fn ready(http: &reqwest::Client, server: &str) -> bool {
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{server}/readyz")).send().await {
            if r.status().is_success() {
                return true;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// Runs `total` operations over `concurrency` workers (each takes the next
/// index until all are taken); returns operations per second.
pub async fn ops_per_second<F, Fut>(concurrency: usize, total: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let op = std::sync::Arc::new(op);
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (op, next) = (op.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return;
                }
                op(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("worker");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// Raw store creates/s of `value` under `prefix` (the floor the apiserver's
/// creates are compared with).
pub async fn raw_writes(
    store: std::sync::Arc<dyn apiserver::store::Store>,
    concurrency: usize,
    total: usize,
    prefix: String,
    value: bytes::Bytes,
) -> f64 {
    ops_per_second(concurrency, total, move |i| {
        let (store, v, key) = (store.clone(), value.clone(), format!("{prefix}/{i}"));
        async move {
            store.create(&key, v).await.expect("raw create");
        }
    })
    .await
}

/// The `p` quantile (0..=1) of sorted samples.
/// The floor of pod startup: `pods` pause + busybox pairs created and
/// started straight through the Docker API, one pod at a time, then
/// removed; each pair's time in ms.
pub async fn bare_pods(
    runtime: &kubelet::runtime::DockerRuntime,
    network: &str,
    pods: usize,
) -> anyhow::Result<Vec<f64>> {
    use kubelet::runtime::ContainerRuntime;
    let (mut times, mut ids) = (Vec::new(), Vec::new());
    for i in 0..pods {
        let t = std::time::Instant::now();
        let pause = runtime
            .create_and_start(&format!("bench-bare-pause-{i}"), bare_pause(network))
            .await?;
        let app = runtime
            .create_and_start(
                &format!("bench-bare-app-{i}"),
                bare_busybox(&pause, &["sleep", "3600"]),
            )
            .await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        ids.extend([app, pause]);
    }
    for id in ids {
        runtime.remove(&id).await?;
    }
    Ok(times)
}

/// The floor's sandbox: a pause container on `network`, as the kubelet makes one.
pub fn bare_pause(network: &str) -> bollard::container::Config<String> {
    bollard::container::Config {
        image: Some("minik8s/pause:latest".to_string()),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some(network.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The floor's app: busybox running `cmd` in the network namespace of the
/// container `pause`.
pub fn bare_busybox(pause: &str, cmd: &[&str]) -> bollard::container::Config<String> {
    bollard::container::Config {
        image: Some("minik8s/busybox:latest".to_string()),
        cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some(format!("container:{pause}")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize)
        .saturating_sub(1)
        .min(sorted.len() - 1)]
}

/// The real `master` and `kubelet` binaries (from this target directory) on
/// a running dockerd: one node, `bench-node`, on its own Docker network.
pub struct LocalCluster {
    pub server: String,
    pub client: minik8s_client::Client,
    pub kubelet: Proc,
    pub master: Proc,
    pub dir: tempfile::TempDir,
}

impl LocalCluster {
    pub async fn start(
        socket: &str,
        network: &str,
        pod_cidr: &str,
    ) -> anyhow::Result<LocalCluster> {
        Self::start_with(socket, network, pod_cidr, |_| Vec::new()).await
    }

    /// As [`LocalCluster::start`], with more `master` flags (given the cluster's directory).
    pub async fn start_with(
        socket: &str,
        network: &str,
        pod_cidr: &str,
        master_args: impl FnOnce(&std::path::Path) -> Vec<String>,
    ) -> anyhow::Result<LocalCluster> {
        Self::start_full(socket, network, pod_cidr, master_args, Vec::new()).await
    }

    /// As [`LocalCluster::start_with`], with more `kubelet` flags. With
    /// `BENCH_LOG_DIR` set, the master's and the kubelet's logs (`RUST_LOG`
    /// applies) go to `master.log` and `kubelet.log` there.
    pub async fn start_full(
        socket: &str,
        network: &str,
        pod_cidr: &str,
        master_args: impl FnOnce(&std::path::Path) -> Vec<String>,
        kubelet_args: Vec<String>,
    ) -> anyhow::Result<LocalCluster> {
        use std::process::{Command, Stdio};
        let log = |name: &str| -> anyhow::Result<Stdio> {
            Ok(match std::env::var_os("BENCH_LOG_DIR") {
                Some(dir) => std::fs::File::create(std::path::Path::new(&dir).join(name))?.into(),
                None => Stdio::null(),
            })
        };
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let status = Command::new("bash")
            .arg(repo.join("scripts/images.sh"))
            .env("DOCKER_HOST", socket)
            .status()?;
        anyhow::ensure!(status.success(), "building the local images failed");
        let bin = std::env::current_exe()?
            .parent()
            .expect("target dir")
            .to_path_buf();
        let dir = tempfile::tempdir()?;
        let port = minik8s_testkit::free_port();
        let server = format!("http://127.0.0.1:{port}");
        // Every listener on a free port: the TLS port too (its default,
        // 6443, is the quick start's, which may be running beside us).
        let secure = format!("127.0.0.1:{}", minik8s_testkit::free_port());
        let master = Proc(
            Command::new(bin.join("master"))
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--secure-listen", &secure])
                .args(["--serverless-port", "0"])
                .args(["--data-dir", &dir.path().join("data").display().to_string()])
                .args(master_args(dir.path()))
                .stdout(Stdio::null())
                .stderr(log("master.log")?)
                .spawn()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "starting {}/master (cargo build --release -p master -p kubelet first): {e}",
                        bin.display()
                    )
                })?,
        );
        let client = minik8s_client::Client::new(&server);
        wait_until_ready(&client, port, &secure).await?;
        let kubelet = Proc(
            Command::new(bin.join("kubelet"))
                .args([
                    "--server",
                    &server,
                    "--node-name",
                    "bench-node",
                    "--node-ip",
                    "127.0.0.1",
                ])
                .args(["--port", &minik8s_testkit::free_port().to_string()])
                .args([
                    "--docker-socket",
                    socket,
                    "--network",
                    network,
                    "--pod-cidr",
                    pod_cidr,
                ])
                .args([
                    "--root-dir",
                    &dir.path().join("kubelet").display().to_string(),
                ])
                .args(kubelet_args)
                .stdout(Stdio::null())
                .stderr(log("kubelet.log")?)
                .spawn()?,
        );
        wait_for_node(&client, "bench-node").await;
        Ok(LocalCluster {
            server,
            client,
            kubelet,
            master,
            dir,
        })
    }
}

/// The machine a benchmark ran on, for its report: cores and CPU model.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{cores} cores, {cpu}")
}

/// Waits up to 10 s for the master's `/readyz`.
async fn wait_until_ready(
    client: &minik8s_client::Client,
    port: u16,
    secure: &str,
) -> anyhow::Result<()> {
    for _ in 0..100 {
        // `/readyz` answers text ("ok"), not JSON.
        let ready = client
            .send(reqwest::Method::GET, "/readyz", None, "*/*")
            .await;
        if ready.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "the master did not get ready on 127.0.0.1:{port} (TLS {secure}); a port taken \
         by another program is named in its log (set BENCH_LOG_DIR to keep master.log)"
    )
}

/// Waits up to 10 s for the kubelet to register its Node.
async fn wait_for_node(client: &minik8s_client::Client, name: &str) {
    let nodes = client.dynamic(
        minik8s_api::registry::of::<minik8s_api::k8s::api::core::v1::Node>(),
        None,
    );
    for _ in 0..100 {
        if nodes.get(name).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
