//! The process's heap, kept close to what it holds (glibc's malloc).
//!
//! glibc's allocator keeps what a process frees: in one arena per thread
//! that ever contended (up to 8 per core), and inside each arena as free
//! chunks between live ones, which it gives back only from an arena's top.
//! A control plane's heap has peaks (a burst of pod creations, 50 watchers
//! starting at once, a LIST of every pod) between long flat stretches, so
//! without help its resident memory stays at the highest peak it ever had.
//! Two settings, measured with `soak-bench` (doc/benchmarks.md): few arenas
//! (freed memory is reused across threads instead of piling up per thread),
//! and a periodic `malloc_trim`, which hands every whole free page inside
//! the arenas back to the kernel.
//!
//! ```text
//!  main() ─▶ memory::run(future): limit_arenas()  (before any thread exists)
//!                                 └▶ runtime ─▶ spawn(trim_periodically(10 s)) ─▶ malloc_trim(0) ─▶ madvise(DONTNEED) free pages
//!                                           └▶ future
//! ```

use std::future::Future;
use std::time::Duration;

/// Arenas glibc may create: two for the whole process.
const ARENAS: i32 = 2;

/// How often the heap's free pages go back to the kernel.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Runs a process's `main` future with the heap kept small: few arenas (set
/// before the runtime's threads exist) and a trim every [`TRIM_EVERY`].
pub fn run<T, E: From<std::io::Error>>(main: impl Future<Output = Result<T, E>>) -> Result<T, E> {
    limit_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            tokio::spawn(trim_periodically(TRIM_EVERY));
            main.await
        })
}

/// Caps glibc's arenas; call first thing in `main`, before any thread starts
/// (an arena is created when a thread first contends, and never freed).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before
    // other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Gives the heap's free pages back to the kernel every `period`, forever.
/// A trim of a ~100 MB heap takes a few milliseconds on a blocking thread.
pub async fn trim_periodically(period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

/// One `malloc_trim(0)`: returns whether memory was released.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe (it locks each arena it walks).
    unsafe {
        libc::malloc_trim(0) == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}
