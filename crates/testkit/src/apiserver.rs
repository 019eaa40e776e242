//! A real etcd on free ports in a temporary directory, and an in-process
//! apiserver on a free port with its own store.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// An etcd server started for one test; killed and its data removed on drop.
pub struct EtcdProcess {
    child: Child,
    pub endpoint: String,
    dir: PathBuf,
}

impl EtcdProcess {
    /// Starts `etcd` (from PATH or `$ETCD_BIN`). Panics with a clear message when
    /// etcd is missing: a test that needs etcd must never pass without it.
    pub fn start() -> EtcdProcess {
        let bin = std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".into());
        if Command::new(&bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            panic!("etcd is required for this test but `{bin}` was not found: install it (apt-get install etcd-server) or run scripts/test.sh, which does");
        }
        // Ports are picked free, then released for etcd to bind: another test
        // may take one in between, so a start-up exit is retried on new ports.
        let mut last_error = String::new();
        for _attempt in 0..5 {
            let (client, peer) = two_free_ports();
            let dir =
                std::env::temp_dir().join(format!("minik8s-etcd-{}-{client}", std::process::id()));
            let log = dir.with_extension("log");
            let endpoint = format!("http://127.0.0.1:{client}");
            let stderr = std::fs::File::create(&log)
                .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
            let child = Command::new(&bin)
                .args(["--data-dir", dir.to_str().expect("utf-8 temp dir")])
                .args(["--name", "test"])
                .args([
                    "--listen-client-urls",
                    &endpoint,
                    "--advertise-client-urls",
                    &endpoint,
                ])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                ])
                .args([
                    "--initial-cluster",
                    &format!("test=http://127.0.0.1:{peer}"),
                ])
                .args(["--log-level", "error"])
                .env("ETCD_UNSUPPORTED_ARCH", "arm64")
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .unwrap_or_else(|e| panic!("starting etcd: {e}"));
            let mut etcd = EtcdProcess {
                child,
                endpoint,
                dir,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            let exited = loop {
                if std::net::TcpStream::connect(("127.0.0.1", client)).is_ok() {
                    break None;
                }
                if let Ok(Some(status)) = etcd.child.try_wait() {
                    break Some(status);
                }
                if Instant::now() > deadline {
                    panic!("etcd did not listen on {} within 20 s", etcd.endpoint);
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            let _ = std::fs::remove_file(&log);
            match exited {
                None => return etcd,
                Some(status) => last_error = format!("{status}: {}", output.trim()),
            }
        }
        panic!("etcd exited at start-up five times; last: {last_error}");
    }
}

/// Two different free ports (both held while the second is picked).
fn two_free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("no free port on 127.0.0.1");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("bound address").port();
    (port(&a), port(&b))
}

impl EtcdProcess {
    /// Freezes etcd (SIGSTOP): it holds its connections but answers nothing,
    /// as a hung or partitioned etcd does.
    pub fn pause(&self) {
        self.signal("-STOP");
        // kill(2) returns once the signal is queued; each of etcd's threads
        // stops when it next runs, so a request sent right away could still
        // be answered. Wait until every thread shows state T.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !self.all_threads_stopped() {
            assert!(
                std::time::Instant::now() < deadline,
                "etcd's threads did not all stop within 5 s of SIGSTOP"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Whether every thread of etcd is stopped (`T` in /proc/PID/task/*/stat).
    fn all_threads_stopped(&self) -> bool {
        let tasks = format!("/proc/{}/task", self.child.id());
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return false;
        };
        entries.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    // "pid (comm) S ...": the state follows the last ')'.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace()
                        .next()
                        .map(|st| st == "T" || st == "t")
                })
                .unwrap_or(true)
        })
    }

    /// Lets a paused etcd run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {sig} etcd failed");
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A configuration for tests: the apiserver's defaults, the embedded store in
/// `data_dir`, a free port on 127.0.0.1.
pub fn test_config(data_dir: PathBuf) -> apiserver::Config {
    /// The apiserver's flags with nothing given: its own defaults.
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        config: apiserver::Config,
    }
    let mut config = <Flags as clap::Parser>::parse_from(["apiserver"]).config;
    config.listen = format!("127.0.0.1:{}", free_port());
    // Tests that want the secure port give it a free one.
    config.secure_listen = None;
    config.data_dir = data_dir;
    config
}

/// Which store a test server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Etcd,
}

/// An in-process apiserver for one test, on a free port, with its own store.
pub struct TestServer {
    pub url: String,
    pub server: std::sync::Arc<apiserver::ApiServer>,
    pub config: apiserver::Config,
    task: tokio::task::JoinHandle<()>,
    _etcd: Option<EtcdProcess>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, |_| {}).await
    }

    /// Starts a server after letting `tweak` adjust its configuration.
    pub async fn start_with(
        backend: Backend,
        tweak: impl FnOnce(&mut apiserver::Config),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path().join("data"));
        let etcd = match backend {
            Backend::Etcd => {
                let e = EtcdProcess::start();
                config.etcd_servers = Some(e.endpoint.clone());
                Some(e)
            }
            Backend::Embedded => None,
        };
        tweak(&mut config);
        let store = apiserver::open_store(&config)
            .await
            .expect("opening the store");
        let (url, server, task) = apiserver::spawn(store, &config)
            .await
            .expect("starting the apiserver");
        TestServer {
            url,
            server,
            config,
            task,
            _etcd: etcd,
            _dir: Some(dir),
        }
    }

    /// The etcd this server stores in (None on the embedded store).
    pub fn etcd(&self) -> Option<&EtcdProcess> {
        self._etcd.as_ref()
    }

    /// Stops serving HTTP (the store stays), as an apiserver shutdown would:
    /// watches end and every connection is closed.
    pub async fn stop_http(&mut self) {
        self.server.shutdown();
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            panic!("the apiserver did not shut down within 10 s");
        }
    }

    /// Serves again on the same address over the same store, with a fresh watch cache.
    pub async fn restart_http(&mut self) {
        if !self.task.is_finished() {
            self.stop_http().await;
        }
        let store = self.server.store.clone();
        for _ in 0..50 {
            match apiserver::spawn(store.clone(), &self.config).await {
                Ok((url, server, task)) => {
                    self.url = url;
                    self.server = server;
                    self.task = task;
                    return;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        panic!("could not restart the apiserver on {}", self.config.listen);
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
