//! Helpers for tests and benchmarks: a real etcd on free ports in a temporary
//! directory, and an in-process apiserver on a free port. Never used by the
//! production binaries.

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
        let dir = std::env::temp_dir().join(format!(
            "minik8s-etcd-{}-{}",
            std::process::id(),
            free_port()
        ));
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("http://127.0.0.1:{client}");
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
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting etcd: {e}"));
        let mut etcd = EtcdProcess {
            child,
            endpoint,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", client)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = etcd.child.try_wait() {
                panic!("etcd exited at start-up with {status}");
            }
            if Instant::now() > deadline {
                panic!("etcd did not listen on {} within 20 s", etcd.endpoint);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
