//! NFS exports mounted on this node for the pods' NFS volumes. The node's
//! kernel may have no NFS client, so each export is mounted in user space:
//! an `nfs-fuse` process (next to the kubelet's binary) per export, at
//! `<root-dir>/nfs/<server>_<path>`, shared by every pod that uses it; the
//! containers get it as a bind mount. An export no pod uses any more is
//! unmounted (which ends its `nfs-fuse`).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The exports this kubelet mounted, with the pods (uids) using each.
#[derive(Default)]
pub struct NfsMounts(Mutex<HashMap<PathBuf, HashSet<String>>>);

/// Where `server:/path` is mounted under the kubelet's root.
pub fn mountpoint(root: &Path, source: &str) -> PathBuf {
    let name: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join("nfs").join(name)
}

/// Is something mounted exactly at `path` (this process's mount table)?
pub fn is_mounted(path: &Path) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m.replace("\\040", " ") == want)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NfsMounts {
    /// Mounts `source` unless it is mounted, notes that `pod` uses it, and
    /// returns the mountpoint. Waits (at most 10 s) for the mount to appear.
    pub fn ensure(&self, root: &Path, source: &str, pod: &str) -> io::Result<PathBuf> {
        let at = mountpoint(root, source);
        if !is_mounted(&at) {
            std::fs::create_dir_all(&at)?;
            let helper = std::env::current_exe()?
                .parent()
                .map(|d| d.join("nfs-fuse"))
                .filter(|p| p.exists())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "nfs-fuse is not installed next to the kubelet",
                    )
                })?;
            let log_path = at.with_extension("log");
            let log = std::fs::File::create(&log_path)?;
            let mut child = std::process::Command::new(helper)
                .arg(source)
                .arg(&at)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !is_mounted(&at) {
                if let Some(status) = child.try_wait()? {
                    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                    return Err(io::Error::other(format!(
                        "mounting {source} failed ({status}): {}",
                        log.lines().last().unwrap_or("")
                    )));
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    return Err(io::Error::other(format!("mounting {source}: timed out")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Reaped when the mount goes.
            std::thread::spawn(move || child.wait());
            tracing::info!(%source, mountpoint = %at.display(), "NFS export mounted");
        }
        lock(&self.0)
            .entry(at.clone())
            .or_default()
            .insert(pod.to_string());
        Ok(at)
    }

    /// Whether no export is mounted (nothing to release).
    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    /// Unmounts the exports mounted here that no live pod (by uid) uses.
    pub fn release(&self, live: &HashSet<String>) {
        let mut mounts = lock(&self.0);
        for (at, pods) in mounts.iter_mut() {
            pods.retain(|p| live.contains(p));
            if pods.is_empty() && is_mounted(at) {
                let path = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).ok();
                // SAFETY: umount2 reads a NUL-terminated path.
                let done = path
                    .is_some_and(|p| unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) } == 0);
                tracing::info!(mountpoint = %at.display(), done, "unused NFS export unmounted");
            }
        }
        mounts.retain(|_, pods| !pods.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_export_has_its_own_mountpoint() {
        let root = Path::new("/var/lib/kubelet");
        assert_eq!(
            mountpoint(root, "10.0.0.9:/exports/data"),
            Path::new("/var/lib/kubelet/nfs/10.0.0.9__exports_data")
        );
        assert!(!is_mounted(Path::new("/definitely/not/mounted")));
        assert!(is_mounted(Path::new("/")));
    }
}
