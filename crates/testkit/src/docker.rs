//! A private dockerd for one test (its own socket, data and exec roots,
//! containerd namespace, no bridge and no iptables of its own), with the
//! local images built into it (`scripts/images.sh`); and a pod subnet no
//! route on this host uses yet.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Dockerd {
    child: Child,
    pub socket: String,
    pub dir: tempfile::TempDir,
}

impl Dockerd {
    /// Starts a dockerd of our own. Panics with a clear message when Docker is missing.
    pub fn start() -> Dockerd {
        Self::start_with(&[])
    }

    /// A dockerd of our own with more flags (e.g. `--registry-mirror`).
    pub fn start_with(extra: &[String]) -> Dockerd {
        let ok = Command::new("dockerd")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "dockerd is required for this test: apt-get install docker.io (scripts/test.sh does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("mk-dockerd")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = format!("unix://{}/docker.sock", dir.path().display());
        let ns = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .args(["--host", &socket])
            .args([
                "--data-root",
                &dir.path().join("data").display().to_string(),
            ])
            .args([
                "--exec-root",
                &dir.path().join("exec").display().to_string(),
            ])
            .args([
                "--pidfile",
                &dir.path().join("docker.pid").display().to_string(),
            ])
            .args(["--bridge", "none", "--iptables=false", "--ip-masq=false"])
            .args(extra)
            .args([
                "--containerd-namespace",
                &ns,
                "--containerd-plugins-namespace",
                &format!("{ns}-p"),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting dockerd");
        let d = Dockerd { child, socket, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Command::new("docker")
            .args(["-H", &d.socket, "version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            assert!(
                Instant::now() < deadline,
                "dockerd did not start: {}",
                std::fs::read_to_string(d.dir.path().join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/images.sh");
        let out = Command::new("bash")
            .arg(script)
            .env("DOCKER_HOST", &d.socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "building images: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        d
    }

    pub fn docker(&self, args: &[&str]) -> String {
        let out = Command::new("docker")
            .arg("-H")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Container ids of one pod (by our labels).
    pub fn pod_containers(&self, uid: &str) -> Vec<String> {
        let out = self.docker(&[
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("label=io.minik8s.pod.uid={uid}"),
        ]);
        out.lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// The id of the running container `container` of the pod with `uid`.
    pub fn container_of(&self, uid: &str, container: &str) -> String {
        self.docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=io.minik8s.pod.uid={uid}"),
            "--filter",
            &format!("label=io.minik8s.container.name={container}"),
        ])
        .lines()
        .next()
        .unwrap_or_else(|| panic!("pod {uid} has no running container {container}"))
        .to_string()
    }
}

impl Dockerd {
    /// `docker args` against this daemon for at most `secs` seconds: its
    /// output, or None when the daemon did not answer in time.
    fn docker_within(&self, secs: u32, args: &[&str]) -> Option<String> {
        let out = Command::new("timeout")
            .args(["--kill-after=5", &secs.to_string(), "docker", "-H"])
            .arg(&self.socket)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        // timeout(1) exits 124 when it stopped the command (137 if killed).
        (!matches!(out.status.code(), Some(124) | Some(137)))
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Removes the containers and the networks; false when the daemon hung
    /// (docker 20.10's libnetwork can deadlock removing many containers at
    /// once: a test that passed must not then wait for ever).
    fn clean_up(&self) -> bool {
        let Some(ids) = self.docker_within(60, &["ps", "-aq"]) else {
            return false;
        };
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f"];
            args.extend(ids.lines());
            if self.docker_within(120, &args).is_none() {
                return false;
            }
        }
        // dockerd leaves its bridges behind when it stops; a stale bridge on the
        // same subnet would take the route of a later test's pod network.
        self.docker_within(60, &["network", "prune", "-f"])
            .is_some()
    }

    /// Kills a hung daemon, its containerd and the shims of its containerd
    /// namespace with what runs under them.
    fn kill_hung(&self) {
        let ns = self
            .dir
            .path()
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let shims = processes()
            .into_iter()
            .filter(|(_, _, cmdline)| {
                cmdline.contains("containerd-shim") && cmdline.contains(&format!(" {ns} "))
            })
            .map(|(pid, _, _)| pid);
        let mut doomed: Vec<u32> = std::iter::once(self.child.id()).chain(shims).collect();
        doomed = descendants(&doomed);
        eprintln!(
            "dockerd {} hung removing its containers: killing it and {} processes under it",
            self.socket,
            doomed.len() - 1
        );
        for pid in doomed {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// Every process: (pid, parent pid, command line with spaces between its
/// arguments and at both ends).
fn processes() -> Vec<(u32, u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The parent follows the command name, which may hold spaces: after ')'.
        let ppid = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cmdline = format!(" {} ", cmdline.trim_end());
        Some((pid, ppid, cmdline))
    })
    .collect()
}

/// `roots` and every process under them.
fn descendants(roots: &[u32]) -> Vec<u32> {
    let all = processes();
    let mut found = roots.to_vec();
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for (pid, ppid, _) in &all {
            if *ppid == parent && !found.contains(pid) {
                found.push(*pid);
            }
        }
        i += 1;
    }
    found
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        if !self.clean_up() {
            self.kill_hung();
        }
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static TAKEN_CIDRS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// A /24 in 10.200.0.0-10.254.255.0 that no route on this host uses yet (a
/// bridge left by another dockerd would otherwise capture the pod network's
/// traffic) and no other test of this process has taken.
pub fn free_pod_cidr() -> String {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    // Destination and mask are little-endian hex in /proc/net/route.
    let routed: Vec<(u32, u32)> = routes
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = u32::from_str_radix(f.get(1)?, 16).ok()?.swap_bytes();
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?.swap_bytes();
            Some((dest, mask))
        })
        .filter(|(_, mask)| *mask != 0)
        .collect();
    let mut taken = TAKEN_CIDRS.lock().unwrap();
    let start = std::process::id() % (55 * 256);
    for i in 0..55 * 256 {
        let n = (start + i) % (55 * 256);
        let net = (10 << 24) | ((200 + n / 256) << 16) | ((n % 256) << 8);
        let overlaps = routed
            .iter()
            .any(|(dest, mask)| net & mask == *dest || dest & 0xffff_ff00 == net);
        if !overlaps && !taken.contains(&net) {
            taken.push(net);
            return format!("10.{}.{}.0/24", 200 + n / 256, n % 256);
        }
    }
    panic!("no free /24 left in 10.200.0.0-10.254.255.0 on this host");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_daemons_processes_are_found_down_to_its_grandchildren() {
        let mut shell = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 31 & wait"])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let found = loop {
            let found = descendants(&[shell.id()]);
            if found.len() == 3 || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let all = processes();
        let line = |pid: &u32| all.iter().find(|(p, _, _)| p == pid).unwrap().2.clone();
        let mut lines: Vec<String> = found[1..].iter().map(line).collect();
        lines.sort();
        let _ = shell.kill();
        let _ = shell.wait();
        for pid in &found[1..] {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        assert_eq!(found[0], shell.id());
        assert_eq!(lines, [" sleep 30 ", " sleep 31 "]);
    }
}
