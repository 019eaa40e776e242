//! The embedded store: etcd's semantics in one SQLite database, in the kine
//! style k3s uses, so a single machine needs no etcd.
//!
//! ```text
//!  <data-dir>/state.db   table kine: one row per revision
//!    id (= revision) │ name (key) │ created │ deleted │ create_revision │ prev_revision │ value
//!        4812        │ /registry/pods/default/web-1 │ 0 │ 0 │ 4790 │ 4801 │ {"kind":"Pod",...}
//! ```
//!
//! - A write appends a row; the newest row of a name is the key's value (or
//!   its deletion). A list at revision R takes, per name, the newest row with
//!   id <= R. The newest value of each live key is also kept in memory
//!   ([`current`]): reads at the latest revision never touch the database.
//! - Writes go through one writer thread ([`writer`]) that commits them in
//!   groups; the database is in WAL mode with `synchronous=FULL`, so every
//!   acknowledged write is on disk (fsync'd) before its caller hears back.
//! - Watches replay committed rows from the database, then receive new ones
//!   from the writer, in revision order, on a bounded channel.
//! - Compaction deletes rows no revision >= the compaction point needs.
//!   Reads (`get`, `list`, watch replay) use their own connections, which
//!   WAL lets run beside the writer.
//!
//! A learner can look inside with the `sqlite3` shell (doc/apiserver.md).
//! A data directory of the older log-based store (`wal.log`,
//! `snapshot.json`) is migrated on first open ([`legacy`]).

pub mod backup;
mod current;
mod handoff;
mod legacy;
mod sql;
mod writer;

use super::{KeyValue, Store, StoreError, StoreEvent, WatchItem, WatchReceiver};
use crate::store::{EventKind, WATCH_CHANNEL_CAPACITY};
use async_trait::async_trait;
use bytes::Bytes;
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::{mpsc, oneshot};
use writer::{Op, Request};

/// Revisions of history kept for watches and lists at older revisions; the
/// writer compacts once twice as many have accumulated.
pub const DEFAULT_HISTORY: usize = 10_000;
/// WAL pages (4 KiB each) between automatic checkpoints.
const WAL_CHECKPOINT_PAGES: i64 = 10_000;
/// The database file in the data directory.
pub const DB_FILE: &str = "state.db";
/// Read connections: at most this many reads run at once, each on a
/// pooled connection.
const READ_POOL: usize = 4;

/// One store watch, registered with the writer.
pub(crate) struct Watcher {
    prefix: String,
    tx: mpsc::Sender<WatchItem>,
    /// The first revision this watcher has not been sent yet.
    next: i64,
}

/// What the store handle and the writer thread share.
pub(crate) struct Shared {
    path: PathBuf,
    /// The newest committed revision.
    revision: AtomicI64,
    /// The live keys' newest values, at the newest committed revision.
    current: RwLock<current::Current>,
    /// Lists and watches before this revision answer `Gone`.
    compacted: AtomicI64,
    watchers: Mutex<Vec<Watcher>>,
    readers: Mutex<Vec<Connection>>,
}

impl Shared {
    fn read_current(&self) -> RwLockReadGuard<'_, current::Current> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_current(&self) -> RwLockWriteGuard<'_, current::Current> {
        self.current.write().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_watchers(&self) -> MutexGuard<'_, Vec<Watcher>> {
        self.watchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on a pooled read connection.
    fn read<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.path)?,
        };
        let result = f(&mut conn);
        let mut pool = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < READ_POOL {
            pool.push(conn);
        }
        result
    }
}

/// See the module documentation.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Request>,
    /// Reads running at once: each holds a connection with its own page
    /// cache, so 50 watchers starting together wait their turn instead of
    /// opening 50 connections (and 50 page caches).
    readers: Arc<tokio::sync::Semaphore>,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("sqlite: {e}"))
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn =
        Connection::open(path).map_err(|e| internal(format!("opening {}: {e}", path.display())))?;
    // WAL: readers never block the writer. synchronous=FULL: each commit is
    // fsync'd before it returns, so an acknowledged write survives power loss.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(internal)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(internal)?;
    // Checkpoint (copy the WAL into the database) every ~40 MB of WAL, not
    // SQLite's default 4 MB: a page written many times in between (the
    // table's last page, an index page of busy keys) is copied once. At
    // 5,000 nodes' heartbeats this took the checkpoints from 2 % of the
    // apiserver's CPU to a few tenths.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)
        .map_err(internal)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(internal)?;
    // A LIST sorts the newest row of each key by name: in memory, not in a
    // temporary file (a LIST of 3,000 pods spent half its time writing one).
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(internal)?;
    Ok(conn)
}

/// The smallest string greater than every string starting with `prefix`.
fn prefix_end(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        if let Some(next) = char::from_u32(c as u32 + 1) {
            chars.push(next);
            return chars.into_iter().collect();
        }
    }
    char::MAX.to_string()
}

fn current_revision(conn: &Connection) -> Result<(i64, i64), StoreError> {
    conn.query_row(sql::REVISIONS, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(internal)
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir`, migrating an old-format directory.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_history(dir, DEFAULT_HISTORY)
    }

    /// As [`EmbeddedStore::open`], keeping about `history` revisions of history.
    pub fn open_with_history(dir: &Path, history: usize) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| internal(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(DB_FILE);
        let mut conn = open_connection(&path)?;
        conn.execute_batch(sql::SCHEMA).map_err(internal)?;
        migrate_legacy(&mut conn, dir)?;
        let (revision, compacted) = current_revision(&conn)?;
        let live = list_rows(&conn, String::new(), prefix_end(""), revision, -1)?;
        let shared = Arc::new(Shared {
            path,
            revision: AtomicI64::new(revision),
            current: RwLock::new(current::Current::load(live, revision)),
            compacted: AtomicI64::new(compacted),
            watchers: Mutex::new(Vec::new()),
            readers: Mutex::new(Vec::new()),
        });
        let (queue, requests) = mpsc::channel(4 * 1024);
        let writer = writer::Writer::new(conn, shared.clone(), Some(history.max(1) as i64));
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(requests))
            .map_err(|e| internal(format!("starting the writer thread: {e}")))?;
        Ok(EmbeddedStore {
            shared,
            queue,
            readers: Arc::new(tokio::sync::Semaphore::new(READ_POOL)),
        })
    }

    async fn submit(&self, op: Op) -> Result<Option<StoreEvent>, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Request { op, reply })
            .await
            .map_err(|_| internal("the writer thread has stopped"))?;
        answer
            .await
            .map_err(|_| internal("the writer thread has stopped"))?
    }

    /// Runs a read on a blocking thread (SQLite calls block).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shared, &mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.shared.clone();
        let permit = self
            .readers
            .clone()
            .acquire_owned()
            .await
            .map_err(internal)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            shared.read(|conn| f(&shared, conn))
        })
        .await
        .map_err(internal)?
    }
}

/// Moves the data of the older log-based store into an empty database, with
/// its revisions, then renames the old files to `*.migrated`.
fn migrate_legacy(conn: &mut Connection, dir: &Path) -> Result<(), StoreError> {
    let Some(old) = legacy::read(dir)? else {
        return Ok(());
    };
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM kine", [], |r| r.get(0))
        .map_err(internal)?;
    if rows > 0 {
        return Err(internal(format!(
            "{} holds both {DB_FILE} and the old store's files; move one away",
            dir.display()
        )));
    }
    let tx = conn.transaction().map_err(internal)?;
    for kv in old.keys.values() {
        tx.execute(
            sql::INSERT_ROW,
            params![
                kv.mod_revision,
                kv.key,
                kv.create_revision == kv.mod_revision,
                false,
                kv.create_revision,
                0,
                kv.value.as_ref()
            ],
        )
        .map_err(internal)?;
    }
    // History is not carried over: watches resume with 410 Gone and relist.
    tx.execute(sql::SET_COMPACTED, params![old.revision])
        .map_err(internal)?;
    tx.commit().map_err(internal)?;
    for f in &old.files {
        let mut to = f.clone().into_os_string();
        to.push(".migrated");
        std::fs::rename(f, &to).map_err(|e| internal(format!("renaming {}: {e}", f.display())))?;
    }
    tracing::info!(dir = %dir.display(), keys = old.keys.len(), revision = old.revision,
        "migrated the old store's data into {DB_FILE}");
    Ok(())
}

/// A row of the replay query as a store event.
fn replayed_event(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoreEvent> {
    let revision: i64 = row.get(0)?;
    let key: String = row.get(1)?;
    let deleted: bool = row.get(2)?;
    let prev_revision: Option<i64> = row.get(5)?;
    let prev = match prev_revision {
        Some(p) => Some(KeyValue {
            key: key.clone(),
            value: Bytes::from(row.get::<_, Vec<u8>>(7)?),
            create_revision: row.get(6)?,
            mod_revision: p,
        }),
        None => None,
    };
    Ok(StoreEvent {
        kind: if deleted {
            EventKind::Delete
        } else {
            EventKind::Put
        },
        kv: KeyValue {
            key,
            value: Bytes::from(row.get::<_, Vec<u8>>(4)?),
            create_revision: row.get(3)?,
            mod_revision: revision,
        },
        prev,
        revision,
    })
}

impl EmbeddedStore {
    /// The live keys under `prefix` from `start` on at `revision` (None:
    /// the latest), at most `limit`; with the revision read at.
    async fn list_range(
        &self,
        prefix: &str,
        start: String,
        revision: Option<i64>,
        limit: Option<usize>,
    ) -> Result<(Vec<KeyValue>, i64), StoreError> {
        let end = prefix_end(prefix);
        {
            // At the newest revision (or past it, as SQL would clamp): from memory.
            let current = self.shared.read_current();
            if revision.is_none_or(|r| r >= current.revision) {
                return Ok((current.range(&start, &end, limit), current.revision));
            }
        }
        let limit = limit.map_or(-1, |l| l.min(i64::MAX as usize) as i64);
        self.read(move |_, conn| {
            // One read transaction: the revision and the rows come from one snapshot.
            let tx = conn.transaction().map_err(internal)?;
            let (current, compacted) = current_revision(&tx)?;
            let at = match revision {
                Some(r) if r < compacted => {
                    return Err(StoreError::Gone {
                        requested: r,
                        compacted,
                    })
                }
                Some(r) => r.min(current),
                None => current,
            };
            Ok((list_rows(&tx, start, end, at, limit)?, at))
        })
        .await
    }
}

/// The live keys in [`start`, `end`) at revision `at`, at most `limit` (-1: all).
fn list_rows(
    conn: &Connection,
    start: String,
    end: String,
    at: i64,
    limit: i64,
) -> Result<Vec<KeyValue>, StoreError> {
    let mut st = conn.prepare_cached(sql::LIST).map_err(internal)?;
    st.query_map(params![start, end, at, limit], |r| {
        Ok(KeyValue {
            key: r.get(0)?,
            value: Bytes::from(r.get::<_, Vec<u8>>(1)?),
            create_revision: r.get(2)?,
            mod_revision: r.get(3)?,
        })
    })
    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    .map_err(internal)
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<i64, StoreError> {
        let op = Op::Create {
            key: key.to_string(),
            value,
        };
        Ok(self.submit(op).await?.map_or(0, |ev| ev.revision))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.shared.read_current().get(key).cloned())
    }

    async fn list(
        &self,
        prefix: &str,
        revision: Option<i64>,
    ) -> Result<(Vec<KeyValue>, i64), StoreError> {
        self.list_range(prefix, prefix.to_string(), revision, None)
            .await
    }

    async fn list_page(
        &self,
        prefix: &str,
        start: &str,
        revision: i64,
        limit: usize,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let start = start.max(prefix).to_string();
        let (items, _) = self
            .list_range(prefix, start, Some(revision), Some(limit))
            .await?;
        Ok(items)
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<i64>,
    ) -> Result<i64, StoreError> {
        let op = Op::Update {
            key: key.to_string(),
            value,
            expected,
        };
        Ok(self.submit(op).await?.map_or(0, |ev| ev.revision))
    }

    async fn delete(
        &self,
        key: &str,
        expected: Option<i64>,
    ) -> Result<(KeyValue, i64), StoreError> {
        let op = Op::Delete {
            key: key.to_string(),
            expected,
        };
        let ev = self
            .submit(op)
            .await?
            .ok_or_else(|| internal("delete without an event"))?;
        let prev = ev.prev.ok_or_else(|| internal("delete without a value"))?;
        Ok((prev, ev.revision))
    }

    async fn watch(&self, prefix: &str, start_revision: i64) -> Result<WatchReceiver, StoreError> {
        let (prefix, end) = (prefix.to_string(), prefix_end(prefix));
        self.read(move |shared, conn| {
            // Under the watchers' lock the writer cannot publish: every row up to
            // `committed` is replayed here, every later one is dispatched to us.
            let mut watchers = shared.lock_watchers();
            let committed = shared.revision.load(Ordering::Acquire);
            let compacted = shared.compacted.load(Ordering::Acquire);
            if start_revision < compacted && start_revision <= committed {
                return Err(StoreError::Gone {
                    requested: start_revision,
                    compacted,
                });
            }
            let mut st = conn.prepare_cached(sql::REPLAY).map_err(internal)?;
            let backlog = st
                .query_map(
                    params![start_revision, committed, prefix, end],
                    replayed_event,
                )
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(internal)?;
            let (tx, rx) = mpsc::channel(WATCH_CHANNEL_CAPACITY + backlog.len());
            for ev in backlog {
                let _ = tx.try_send(Ok(ev));
            }
            watchers.push(Watcher {
                prefix,
                tx,
                next: (committed + 1).max(start_revision),
            });
            Ok(rx)
        })
        .await
    }

    async fn current_revision(&self) -> Result<i64, StoreError> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        self.submit(Op::Compact { revision }).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_first_string_past_the_prefix() {
        assert_eq!(prefix_end("/registry/pods/"), "/registry/pods0");
        assert_eq!(prefix_end("a"), "b");
        assert!("/registry/pods/x" < prefix_end("/registry/pods/").as_str());
        assert!("/registry/podsx" > prefix_end("/registry/pods/").as_str());
    }
}
