//! A private image registry for one test: Debian's `docker-registry`
//! (distribution v2) on a free loopback port, storing into a temporary
//! directory; stopped when dropped.

use crate::apiserver::free_port;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`, as image names and `--registry-mirror` use it.
    pub address: String,
    pub dir: tempfile::TempDir,
}

impl Registry {
    /// Starts the registry. Panics with a clear message when it is missing.
    pub fn start() -> Registry {
        Self::start_with_auth(None)
    }

    /// A registry that asks for a login (htpasswd, bcrypt): pulls and
    /// pushes without `user`/`password` get 401.
    pub fn start_with_login(user: &str, password: &str) -> Registry {
        // The registry reads bcrypt only; Python's crypt (libxcrypt) makes it.
        let out = Command::new("python3")
            .args([
                "-W",
                "ignore",
                "-c",
                "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))",
                password,
            ])
            .output()
            .expect("python3 is required to make the registry's htpasswd");
        let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success() && hash.starts_with("$2"),
            "making a bcrypt hash with python3's crypt: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self::start_with_auth(Some(format!("{user}:{hash}\n")))
    }

    fn start_with_auth(htpasswd: Option<String>) -> Registry {
        let bin = "/usr/bin/docker-registry";
        assert!(
            std::path::Path::new(bin).exists(),
            "docker-registry is required for this test: apt-get install docker-registry (scripts/test.sh does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("mk-registry")
            .tempdir_in("/tmp")
            .unwrap();
        let address = format!("127.0.0.1:{}", free_port());
        let config = dir.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
            dir.path().join("data").display()
        );
        if let Some(lines) = htpasswd {
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, lines).unwrap();
            text.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: minik8s-test\n    path: {}\n",
                file.display()
            ));
        }
        std::fs::write(&config, text).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting docker-registry");
        let r = Registry {
            child,
            address,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&r.address).is_err() {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not start: {}",
                std::fs::read_to_string(r.dir.path().join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
