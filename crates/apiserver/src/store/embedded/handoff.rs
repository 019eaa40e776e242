//! How the writer thread's results reach the runtime: the watchers' events
//! and the answers to the requests are handed to a task inside the runtime,
//! through the runtime's I/O driver, instead of waking worker threads directly.
//!
//! ```text
//!  writer thread ── job (events + answers) ──▶ pending list ──┐
//!                └─ 1 byte (list was empty) ──▶ socket pair ──▶ epoll (runtime)
//!                                                               └▶ handoff task: runs each job:
//!                                                                  events to the watchers, then
//!                                                                  each answer to its request
//! ```
//!
//! A channel send or oneshot completed from a thread outside the runtime
//! wakes the receiving task "remotely": a parked worker is woken for it, and
//! because that worker wakes up searching for work and finds some, it wakes
//! a second one, which finds nothing and parks again. At 5,000 nodes'
//! heartbeats (~200 commits a second) answering this way took the apiserver
//! from 12.0 to 10.7 % of a core (doc/benchmarks.md, 2026-11-28). The watch
//! events (every resource's watch cache follows the store) went the same way
//! until they joined the answers here (a gain within the measurement's noise,
//! but one way out of the writer's thread instead of two). A byte on a
//! socket the runtime polls wakes only the worker that waits on epoll, and
//! the wakes then happen inside the runtime.
//!
//! Outside a runtime, or once the handoff task is gone (its runtime shut
//! down), jobs run on the caller's thread.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Work the writer hands over: it runs on the runtime, in handoff order.
type Job = Box<dyn FnOnce() + Send>;

fn run_all(jobs: impl IntoIterator<Item = Job>) {
    for job in jobs {
        job();
    }
}

/// The writer's side: jobs pass through [`Handoff::run`].
pub struct Handoff {
    pending: Arc<Mutex<Vec<Job>>>,
    /// The writer's end of the socket pair; None: run jobs directly.
    signal: Option<UnixStream>,
    /// Set once the handoff task is gone: from then on, run jobs directly.
    direct: AtomicBool,
}

impl Handoff {
    /// Hands over to the current runtime when there is one.
    pub fn new() -> Self {
        let pending = Arc::new(Mutex::new(Vec::new()));
        let signal = Self::start_task(&pending);
        Handoff {
            direct: AtomicBool::new(signal.is_none()),
            pending,
            signal,
        }
    }

    /// Spawns the handoff task on the current runtime; the writer's end of
    /// its socket, or None (no runtime, no socket).
    fn start_task(pending: &Arc<Mutex<Vec<Job>>>) -> Option<UnixStream> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (ours, theirs) = UnixStream::pair().ok()?;
        ours.set_nonblocking(true).ok()?;
        theirs.set_nonblocking(true).ok()?;
        // Registering with the I/O driver needs the runtime's context.
        let _entered = runtime.enter();
        let theirs = tokio::net::UnixStream::from_std(theirs).ok()?;
        runtime.spawn(run_handed_over(theirs, pending.clone()));
        Some(ours)
    }

    /// Runs `job` on the runtime (after every job handed over before it).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let signal = match &self.signal {
            Some(s) if !self.direct.load(Ordering::Acquire) => s,
            _ => return job(),
        };
        let was_empty = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = pending.is_empty();
            pending.push(Box::new(job));
            was_empty
        };
        // One byte per batch the handoff task has not taken yet; the socket
        // never fills (the task drains it before each take).
        if !was_empty {
            return;
        }
        match (&*signal).write(&[1]) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            // The handoff task is gone: run what it left, and all later jobs, here.
            Err(_) => {
                self.direct.store(true, Ordering::Release);
                let left =
                    std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
                run_all(left);
            }
        }
    }
}

/// The handoff task: on each byte, every pending job, oldest first. The
/// bytes are read before the list is taken, so a job added after the take
/// has its byte still to be read.
async fn run_handed_over(socket: tokio::net::UnixStream, pending: Arc<Mutex<Vec<Job>>>) {
    let mut buf = [0u8; 64];
    loop {
        if socket.readable().await.is_err() {
            return;
        }
        match socket.try_read(&mut buf) {
            // The writer is gone (its store was dropped).
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
        run_all(std::mem::take(
            &mut *pending.lock().unwrap_or_else(|p| p.into_inner()),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// A job that answers each of `answers` to its request, as the writer's do.
    fn answering<T: Send + 'static>(answers: Vec<(oneshot::Sender<T>, T)>) -> impl FnOnce() + Send {
        move || {
            for (tx, answer) in answers {
                let _ = tx.send(answer);
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_from_another_thread_run_on_the_runtime_in_order() {
        let handoff = Arc::new(Handoff::new());
        assert!(handoff.signal.is_some());
        let (senders, waiting): (Vec<_>, Vec<_>) = (0..1000).map(|_| oneshot::channel()).unzip();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (h, o) = (handoff.clone(), order.clone());
        // Answers in batches of 7, as commit groups come.
        std::thread::spawn(move || {
            let mut answers = senders
                .into_iter()
                .enumerate()
                .map(|(i, tx)| (tx, i + 1))
                .peekable();
            let mut batch = 0;
            while answers.peek().is_some() {
                let answer = answering(answers.by_ref().take(7).collect());
                let o = o.clone();
                h.run(move || {
                    // Inside the runtime: a handle is at hand.
                    assert!(tokio::runtime::Handle::try_current().is_ok());
                    o.lock().unwrap().push(batch);
                    answer();
                });
                batch += 1;
            }
        })
        .join()
        .unwrap();
        for (i, rx) in waiting.into_iter().enumerate() {
            assert_eq!(rx.await.unwrap(), i + 1);
        }
        let order = order.lock().unwrap();
        assert_eq!(*order, (0..order.len()).collect::<Vec<_>>());
    }

    #[test]
    fn jobs_run_on_the_callers_thread_once_the_runtime_is_gone() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let handoff = runtime.block_on(async { Handoff::new() });
        drop(runtime);
        let (tx, mut rx) = oneshot::channel();
        // The first job may still find the socket open; it runs either way.
        handoff.run(answering(vec![(tx, 7)]));
        let (tx2, mut rx2) = oneshot::channel();
        handoff.run(answering(vec![(tx2, 8)]));
        assert_eq!(rx.try_recv().unwrap(), 7);
        assert_eq!(rx2.try_recv().unwrap(), 8);
    }

    #[test]
    fn outside_a_runtime_jobs_run_on_the_callers_thread() {
        let handoff = Handoff::new();
        assert!(handoff.signal.is_none());
        let (tx, mut rx) = oneshot::channel();
        handoff.run(answering(vec![(tx, "done")]));
        assert_eq!(rx.try_recv().unwrap(), "done");
    }
}
