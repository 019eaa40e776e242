//! The benchmarks (`src/bin/`): each prints its numbers beside the floor it
//! is compared with (raw etcd, bare Docker); `doc/benchmarks.md` records them.
//! Their own crate, so the production binaries link none of it.

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
