//! How the writer thread's answers reach the requests waiting for them:
//! through the runtime's I/O driver, not by waking a worker thread directly.
//!
//! ```text
//!  writer thread ── answers ──▶ pending list ──┐
//!                └─ 1 byte (list was empty) ──▶ socket pair ──▶ epoll (runtime)
//!                                                               └▶ delivery task: each answer
//!                                                                  to its request (same worker)
//! ```
//!
//! A oneshot sent from a thread outside the runtime wakes the request's task
//! "remotely": a parked worker is woken for it, and because that worker wakes
//! up searching for work and finds some, it wakes a second one, which finds
//! nothing and parks again. At 5,000 nodes' heartbeats (~200 commits a
//! second) delivering this way took the apiserver from 12.0 to 10.7 % of a
//! core (doc/benchmarks.md, 2026-11-28). A byte on a
//! socket the runtime polls wakes only the worker that waits on epoll, and
//! the answers then go out from inside the runtime.
//!
//! Outside a runtime, or once the delivery task is gone (its runtime shut
//! down), answers go straight to their requests.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// An answer and the request waiting for it.
type Answer<T> = (oneshot::Sender<T>, T);

fn deliver_all<T>(answers: impl IntoIterator<Item = Answer<T>>) {
    for (request, answer) in answers {
        let _ = request.send(answer);
    }
}

/// The writer's side: answers pass through [`Replies::send`].
pub struct Replies<T> {
    pending: Arc<Mutex<Vec<Answer<T>>>>,
    /// The writer's end of the socket pair; None: answer directly.
    signal: Option<UnixStream>,
    /// Set once the delivery task is gone: from then on, answer directly.
    direct: AtomicBool,
}

impl<T: Send + 'static> Replies<T> {
    /// Delivery through the current runtime when there is one.
    pub fn new() -> Self {
        let pending = Arc::new(Mutex::new(Vec::new()));
        let signal = Self::start_delivery(&pending);
        Replies {
            direct: AtomicBool::new(signal.is_none()),
            pending,
            signal,
        }
    }

    /// Spawns the delivery task on the current runtime; the writer's end of
    /// its socket, or None (no runtime, no socket).
    fn start_delivery(pending: &Arc<Mutex<Vec<Answer<T>>>>) -> Option<UnixStream> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (ours, theirs) = UnixStream::pair().ok()?;
        ours.set_nonblocking(true).ok()?;
        theirs.set_nonblocking(true).ok()?;
        // Registering with the I/O driver needs the runtime's context.
        let _entered = runtime.enter();
        let theirs = tokio::net::UnixStream::from_std(theirs).ok()?;
        runtime.spawn(deliver(theirs, pending.clone()));
        Some(ours)
    }

    /// Hands `answers` to their requests.
    pub fn send(&self, answers: impl IntoIterator<Item = Answer<T>>) {
        let signal = match &self.signal {
            Some(s) if !self.direct.load(Ordering::Acquire) => s,
            _ => return deliver_all(answers),
        };
        let was_empty = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = pending.is_empty();
            pending.extend(answers);
            was_empty
        };
        // One byte per batch the delivery task has not taken yet; the socket
        // never fills (the task drains it before each take).
        if !was_empty {
            return;
        }
        match (&*signal).write(&[1]) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            // The delivery task is gone: answer what it left, and all later ones, here.
            Err(_) => {
                self.direct.store(true, Ordering::Release);
                let left =
                    std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
                deliver_all(left);
            }
        }
    }
}

/// The delivery task: on each byte, every pending answer to its request.
/// The bytes are read before the list is taken, so an answer added after the
/// take has its byte still to be read.
async fn deliver<T>(socket: tokio::net::UnixStream, pending: Arc<Mutex<Vec<Answer<T>>>>) {
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
        deliver_all(std::mem::take(
            &mut *pending.lock().unwrap_or_else(|p| p.into_inner()),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_from_another_thread_reach_their_requests() {
        let replies = Arc::new(Replies::new());
        assert!(replies.signal.is_some());
        let (senders, waiting): (Vec<_>, Vec<_>) = (0..1000).map(|_| oneshot::channel()).unzip();
        let r = replies.clone();
        // Answers in batches of 7, as commit groups come.
        std::thread::spawn(move || {
            let mut answers = senders
                .into_iter()
                .enumerate()
                .map(|(i, tx)| (tx, i + 1))
                .peekable();
            while answers.peek().is_some() {
                r.send(answers.by_ref().take(7).collect::<Vec<_>>());
            }
        })
        .join()
        .unwrap();
        for (i, rx) in waiting.into_iter().enumerate() {
            assert_eq!(rx.await.unwrap(), i + 1);
        }
    }

    #[test]
    fn answers_go_straight_once_the_runtime_is_gone() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let replies = runtime.block_on(async { Replies::new() });
        drop(runtime);
        let (tx, mut rx) = oneshot::channel();
        // The first send may still find the socket open; the answer arrives either way.
        replies.send([(tx, 7)]);
        let (tx2, mut rx2) = oneshot::channel();
        replies.send([(tx2, 8)]);
        assert_eq!(rx.try_recv().unwrap(), 7);
        assert_eq!(rx2.try_recv().unwrap(), 8);
    }

    #[test]
    fn outside_a_runtime_answers_go_straight() {
        let replies = Replies::new();
        assert!(replies.signal.is_none());
        let (tx, mut rx) = oneshot::channel();
        replies.send([(tx, "done")]);
        assert_eq!(rx.try_recv().unwrap(), "done");
    }
}
