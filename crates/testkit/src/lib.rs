//! Test harnesses, for tests and benchmarks only (a dev-dependency of the
//! component crates, never linked into a production binary): an in-process
//! apiserver on a real store ([`apiserver`]: `TestServer`, etcd on free
//! ports), a private dockerd with the local images ([`docker`]), and one
//! polling helper ([`eventually`]).

pub mod apiserver;
pub mod docker;

pub use crate::apiserver::{free_port, Backend, EtcdProcess, TestServer};

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every 100 ms until it returns Some, and returns that; panics
/// naming `what` after `secs` seconds. For the observable outcome of
/// something asynchronous (a controller converging, a watch delivering).
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
