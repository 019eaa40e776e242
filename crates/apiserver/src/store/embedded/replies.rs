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

/// Something to hand to a waiting request: an answer and where it goes.
pub trait Answer: Send + 'static {
    fn deliver(self);
}

impl<T: Send + 'static> Answer for (tokio::sync::oneshot::Sender<T>, T) {
    fn deliver(self) {
        let _ = self.0.send(self.1);
    }
}

/// The writer's side: answers pass through [`Replies::send`].
pub struct Replies<A: Answer> {
    pending: Arc<Mutex<Vec<A>>>,
    /// The writer's end of the socket pair; None: answer directly.
    signal: Option<UnixStream>,
    /// Set once the delivery task is gone: from then on, answer directly.
    direct: AtomicBool,
}

impl<A: Answer> Replies<A> {
    /// Delivery through the current runtime when there is one.
    pub fn new() -> Self {
        let direct = Replies {
            pending: Arc::new(Mutex::new(Vec::new())),
            signal: None,
            direct: AtomicBool::new(true),
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return direct;
        };
        let Ok((ours, theirs)) = UnixStream::pair() else {
            return direct;
        };
        if ours.set_nonblocking(true).is_err() || theirs.set_nonblocking(true).is_err() {
            return direct;
        }
        // Registering with the I/O driver needs the runtime's context.
        let _entered = runtime.enter();
        let Ok(theirs) = tokio::net::UnixStream::from_std(theirs) else {
            return direct;
        };
        let pending = direct.pending.clone();
        runtime.spawn(deliver(theirs, pending.clone()));
        Replies {
            pending,
            signal: Some(ours),
            direct: AtomicBool::new(false),
        }
    }

    /// Hands `answers` to their requests.
    pub fn send(&self, answers: impl IntoIterator<Item = A>) {
        let signal = match &self.signal {
            Some(s) if !self.direct.load(Ordering::Acquire) => s,
            _ => return answers.into_iter().for_each(Answer::deliver),
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
                left.into_iter().for_each(Answer::deliver);
            }
        }
    }
}

/// The delivery task: on each byte, every pending answer to its request.
/// The bytes are read before the list is taken, so an answer added after the
/// take has its byte still to be read.
async fn deliver<A: Answer>(socket: tokio::net::UnixStream, pending: Arc<Mutex<Vec<A>>>) {
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
        let answers = std::mem::take(&mut *pending.lock().unwrap_or_else(|p| p.into_inner()));
        answers.into_iter().for_each(Answer::deliver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

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
