//! The single writer of the embedded store: one thread owns the write
//! connection and commits requests in groups.
//!
//! ```text
//!  create/update/delete ──▶ queue ──▶ writer thread: BEGIN IMMEDIATE
//!  (any task)                          check against `current` + INSERT row, per request
//!                                      COMMIT (one fsync for the group)
//!                                      current + revision updated
//!                                      hand over: events to watchers, answers to requests
//! ```
//!
//! While one group waits for its fsync, the next requests queue up and go
//! into the next group: concurrent writers share an fsync (group commit),
//! a lone writer pays one per write. The events and answers go back
//! through the runtime's I/O driver ([`super::handoff`]).

use super::handoff::Handoff;
use super::sql;
use super::{Shared, Watcher};
use crate::store::{EventKind, KeyValue, StoreError, StoreEvent};
use bytes::Bytes;
use rusqlite::{params, Connection, TransactionBehavior};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The most requests committed in one transaction.
const MAX_GROUP: usize = 512;

pub enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Option<i64>,
    },
    Delete {
        key: String,
        expected: Option<i64>,
    },
    Compact {
        revision: i64,
    },
}

impl Op {
    /// The key a write is for (None for a compaction).
    fn key(&self) -> Option<&str> {
        match self {
            Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => Some(key),
            Op::Compact { .. } => None,
        }
    }
}

/// What a write request hears back.
pub type Outcome = Result<Option<StoreEvent>, StoreError>;

pub struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Outcome>,
}

pub struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
    /// Revisions kept before the writer compacts on its own (None: only on request).
    history_limit: Option<i64>,
    handoff: Handoff,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("sqlite: {e}"))
}

impl Writer {
    /// Call within the runtime whose tasks make the requests (see [`Handoff::new`]).
    pub fn new(conn: Connection, shared: Arc<Shared>, history_limit: Option<i64>) -> Self {
        Writer {
            conn,
            shared,
            history_limit,
            handoff: Handoff::new(),
        }
    }

    /// Runs until every sender of the queue is gone (the store was dropped).
    pub fn run(mut self, mut queue: mpsc::Receiver<Request>) {
        while let Some(first) = queue.blocking_recv() {
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(r) => group.push(r),
                    Err(_) => break,
                }
            }
            let (compactions, writes): (Vec<_>, Vec<_>) = group
                .into_iter()
                .partition(|r| matches!(r.op, Op::Compact { .. }));
            if !writes.is_empty() {
                self.commit_group(writes);
            }
            for req in compactions {
                let Op::Compact { revision } = req.op else {
                    continue;
                };
                let done = self.compact(revision).map(|_| None).map_err(internal);
                self.handoff.run(move || {
                    let _ = req.reply.send(done);
                });
            }
            self.compact_if_over_limit();
        }
    }

    fn commit_group(&mut self, group: Vec<Request>) {
        let base = self.shared.revision.load(Ordering::Acquire);
        let mut revision = base;
        // Keys this group has written, as they will be once it commits: a
        // later request of the group checks against them, not `current`.
        let mut pending: HashMap<&str, Option<KeyValue>> = HashMap::new();
        let shared = &self.shared;
        let outcome = (|| -> rusqlite::Result<Vec<Outcome>> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut results = Vec::with_capacity(group.len());
            for req in &group {
                let Some(key) = req.op.key() else {
                    results.push(Ok(None));
                    continue;
                };
                let prev = match pending.get(key) {
                    Some(p) => p.clone(),
                    None => shared.read_current().get(key).cloned(),
                };
                let result = apply(&tx, &mut revision, &req.op, prev)?;
                if let Ok(Some(ev)) = &result {
                    let now = (ev.kind == EventKind::Put).then(|| ev.kv.clone());
                    pending.insert(key, now);
                }
                results.push(result);
            }
            tx.commit()?;
            Ok(results)
        })();
        let results = match outcome {
            Ok(results) => results,
            Err(e) => {
                // Nothing of the group was stored (the transaction rolled back).
                tracing::error!(error = %e, "embedded store commit failed");
                let e = internal(&e);
                self.handoff.run(move || {
                    for req in group {
                        let _ = req.reply.send(Err(e.clone()));
                    }
                });
                return;
            }
        };
        // Publish under the watchers' lock: a watch registering now either
        // replays these rows from the database or receives them from the
        // handoff (which skips revisions below a watcher's `next`), never
        // both. The current values change with the revision, under one lock.
        {
            let _watchers = self.shared.lock_watchers();
            self.shared
                .write_current()
                .apply(events_of(&results), revision);
            self.shared.revision.store(revision, Ordering::Release);
        }
        // Events before answers: a client that hears its write succeeded
        // and then watches finds the event already with the watchers.
        let shared = self.shared.clone();
        self.handoff.run(move || {
            {
                let mut watchers = shared.lock_watchers();
                for ev in events_of(&results) {
                    dispatch(&mut watchers, ev);
                }
            }
            for (req, result) in group.into_iter().zip(results) {
                let _ = req.reply.send(result);
            }
        });
    }

    fn compact_if_over_limit(&mut self) {
        let Some(limit) = self.history_limit else {
            return;
        };
        let revision = self.shared.revision.load(Ordering::Acquire);
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        // Compact in steps of `limit` so the cost is spread, not paid per write.
        if revision - compacted > 2 * limit {
            if let Err(e) = self.compact(revision - limit) {
                tracing::warn!(error = %e, "embedded store compaction failed");
            }
        }
    }

    /// Deletes the rows no revision >= `to` needs: rows superseded before
    /// `to` and deletions before `to` (kine's compaction).
    fn compact(&mut self, to: i64) -> rusqlite::Result<()> {
        let from = self.shared.compacted.load(Ordering::Acquire);
        let to = to.min(self.shared.revision.load(Ordering::Acquire));
        if to <= from {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(sql::COMPACT_SUPERSEDED, params![from, to])?;
        tx.execute(sql::COMPACT_DELETED, params![from, to])?;
        tx.execute(sql::SET_COMPACTED, params![to])?;
        tx.commit()?;
        self.shared.compacted.store(to, Ordering::Release);
        Ok(())
    }
}

/// The changes a group's outcomes made (its successful writes' events).
fn events_of(results: &[Outcome]) -> impl Iterator<Item = &StoreEvent> {
    results.iter().filter_map(|r| r.as_ref().ok()?.as_ref())
}

/// Checks one request against the key's current value `prev` and inserts
/// its row. The outer error is a database failure (the group rolls back);
/// the inner one is the request's own answer (AlreadyExists, NotFound,
/// Conflict).
fn apply(
    conn: &Connection,
    revision: &mut i64,
    op: &Op,
    prev: Option<KeyValue>,
) -> rusqlite::Result<Outcome> {
    let (key, value, expected) = match op {
        Op::Create { key, value } => (key, Some(value), None),
        Op::Update {
            key,
            value,
            expected,
        } => (key, Some(value), *expected),
        Op::Delete { key, expected } => (key, None, *expected),
        // Compactions run on their own (see `run`).
        Op::Compact { .. } => return Ok(Ok(None)),
    };
    match (op, &prev) {
        (Op::Create { .. }, Some(_)) => return Ok(Err(StoreError::AlreadyExists(key.clone()))),
        (Op::Update { .. } | Op::Delete { .. }, None) => {
            return Ok(Err(StoreError::NotFound(key.clone())))
        }
        (_, Some(p)) if expected.is_some_and(|e| e != p.mod_revision) => {
            return Ok(Err(StoreError::Conflict {
                key: key.clone(),
                current: p.mod_revision,
            }))
        }
        _ => {}
    }
    let rev = *revision + 1;
    let create_revision = match (&value, &prev) {
        (Some(_), Some(p)) => p.create_revision,
        (Some(_), None) => rev,
        (None, _) => 0,
    };
    let prev_revision = prev.as_ref().map_or(0, |p| p.mod_revision);
    conn.prepare_cached(sql::INSERT_ROW)?.execute(params![
        rev,
        key,
        prev.is_none(),
        value.is_none(),
        create_revision,
        prev_revision,
        value.map(|v| v.as_ref()).unwrap_or_default(),
    ])?;
    *revision = rev;
    let kv = KeyValue {
        key: key.clone(),
        value: value.cloned().unwrap_or_default(),
        create_revision,
        mod_revision: rev,
    };
    Ok(Ok(Some(StoreEvent {
        kind: if value.is_some() {
            EventKind::Put
        } else {
            EventKind::Delete
        },
        kv,
        prev,
        revision: rev,
    })))
}

/// Hands `ev` to every watcher of its key. A watcher whose channel is full is
/// cut off: its consumer resumes from its last revision and catches up from
/// the database, instead of this store buffering for it without limit.
pub(super) fn dispatch(watchers: &mut Vec<Watcher>, ev: &StoreEvent) {
    watchers.retain_mut(|w| {
        if ev.revision < w.next || !ev.kv.key.starts_with(&w.prefix) {
            return !w.tx.is_closed();
        }
        match w.tx.try_send(Ok(ev.clone())) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(prefix = %w.prefix, revision = ev.revision,
                    "store watcher fell behind: closing it so that it resumes");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    });
}
