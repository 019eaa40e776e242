//! `emptyDir: {medium: Memory}`: the volume's directory is a tmpfs (its
//! `sizeLimit` as the tmpfs size), as the real kubelet mounts it, so its
//! content lives in memory and is gone with the pod. A pod's directory is
//! removed only after what is mounted under it is unmounted.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The mount points at or under `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut found: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Makes `dir` a tmpfs (of `size_bytes` when given) unless it is one already.
pub fn ensure_tmpfs(dir: &Path, size_bytes: Option<i64>) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if mounts_under(dir).iter().any(|m| m == dir) {
        return Ok(());
    }
    let mut options = "mode=0777".to_string();
    if let Some(size) = size_bytes.filter(|s| *s > 0) {
        options.push_str(&format!(",size={size}"));
    }
    let (source, fstype) = (CString::new("tmpfs")?, CString::new("tmpfs")?);
    let (target, data) = (c_path(dir)?, CString::new(options)?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes a pod's directory, unmounting what is mounted under it first.
pub fn remove_pod_dir(dir: &Path) {
    for m in mounts_under(dir) {
        if let Ok(target) = c_path(&m) {
            // SAFETY: a NUL-terminated path that outlives the call.
            let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
            if rc != 0 {
                tracing::warn!(mount = %m.display(), error = %io::Error::last_os_error(), "unmounting a pod volume");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
