//! A real NFS server for tests: Debian's nfs-ganesha (user space; this
//! machine's kernel has no nfsd) exporting a temporary directory over
//! NFSv3/TCP on 127.0.0.1, registered with rpcbind (started here unless one
//! runs). Stopped when dropped.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct NfsServer {
    pub dir: tempfile::TempDir,
    ganesha: Child,
    rpcbind: Option<Child>,
    /// One server at a time in a test process (the ports are fixed).
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
}

impl NfsServer {
    /// Starts ganesha on 127.0.0.1 exporting [`NfsServer::export`].
    pub fn start() -> NfsServer {
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        for bin in ["/usr/bin/ganesha.nfsd", "/usr/sbin/rpcbind"] {
            assert!(
                Path::new(bin).exists(),
                "{bin} is missing: apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind (scripts/test.sh does)"
            );
        }
        assert!(
            !listening(2049),
            "an NFS server already listens on 127.0.0.1:2049"
        );
        let rpcbind = (!listening(111)).then(|| {
            Command::new("/usr/sbin/rpcbind")
                .args(["-f", "-w"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting rpcbind")
        });
        let dir = tempfile::tempdir().unwrap();
        let export = dir.path().join("export");
        std::fs::create_dir_all(&export).unwrap();
        let config = dir.path().join("ganesha.conf");
        std::fs::write(
            &config,
            format!(
                "NFS_CORE_PARAM {{ Protocols = 3; NFS_Port = 2049; MNT_Port = 20048; Bind_addr = 127.0.0.1; }}\n\
                 NFSV4 {{ Graceless = true; }}\n\
                 EXPORT {{ Export_Id = 1; Path = {}; Pseudo = /export; Access_Type = RW; Squash = No_Root_Squash;\n\
                   Protocols = 3; Transports = TCP; SecType = sys; FSAL {{ Name = VFS; }} }}\n\
                 LOG {{ Default_Log_Level = WARN; }}\n",
                export.display()
            ),
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listening(111) {
            assert!(Instant::now() < deadline, "rpcbind did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let ganesha = Command::new("/usr/bin/ganesha.nfsd")
            .arg("-F")
            .arg("-f")
            .arg(&config)
            .arg("-L")
            .arg(dir.path().join("ganesha.log"))
            .arg("-p")
            .arg(dir.path().join("ganesha.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ganesha.nfsd");
        let mut server = NfsServer {
            dir,
            ganesha,
            rpcbind,
            _one: one,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(listening(2049) && listening(20048)) {
            if let Ok(Some(status)) = server.ganesha.try_wait() {
                panic!("ganesha.nfsd exited ({status}):\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "ganesha did not start:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The exported directory (on this machine).
    pub fn export(&self) -> PathBuf {
        self.dir.path().join("export")
    }

    /// `127.0.0.1:<export>`.
    pub fn source(&self) -> String {
        format!("127.0.0.1:{}", self.export().display())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ganesha.log")).unwrap_or_default()
    }
}

impl Drop for NfsServer {
    fn drop(&mut self) {
        let _ = self.ganesha.kill();
        let _ = self.ganesha.wait();
        // The next server needs the ports.
        let deadline = Instant::now() + Duration::from_secs(10);
        while listening(2049) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(r) = self.rpcbind.as_mut() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}
