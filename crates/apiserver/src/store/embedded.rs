//! The embedded store: etcd's semantics in process, durable on disk.
//!
//! State lives in memory (the live keys plus a bounded history of events, each
//! carrying the previous value so a list at an older revision can be rebuilt
//! by undoing newer events). Every write is appended to `wal.log` (one JSON
//! line) and flushed before the call returns, so a killed process loses
//! nothing it acknowledged. When the log grows large it is folded into
//! `snapshot.json` (written to a temporary file and renamed, so a crash leaves
//! either the old or the new snapshot). A torn last log line is ignored on
//! replay.

use super::{EventKind, KeyValue, Store, StoreError, StoreEvent, WatchReceiver};
use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// How many events of history are kept for watches and old lists.
pub const DEFAULT_HISTORY: usize = 10_000;
/// Log lines after which the log is folded into the snapshot.
const SNAPSHOT_EVERY: usize = 50_000;

#[derive(Debug, Serialize, Deserialize)]
struct LogRecord {
    /// Revision of the write.
    r: i64,
    k: String,
    /// The new value; None for a delete.
    v: Option<String>,
    /// Create revision of the key after the write.
    c: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    revision: i64,
    keys: Vec<(String, String, i64, i64)>,
}

struct Watcher {
    prefix: String,
    tx: mpsc::UnboundedSender<super::WatchItem>,
}

struct State {
    revision: i64,
    compacted: i64,
    live: BTreeMap<String, KeyValue>,
    history: VecDeque<StoreEvent>,
    history_limit: usize,
    watchers: Vec<Watcher>,
    log: Option<File>,
    log_lines: usize,
    dir: Option<PathBuf>,
}

/// See the module documentation.
pub struct EmbeddedStore {
    state: Mutex<State>,
}

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

impl EmbeddedStore {
    /// A store that keeps nothing on disk (tests and hollow benchmarks).
    pub fn in_memory() -> Self {
        Self::with_state(State::empty(None, DEFAULT_HISTORY))
    }

    /// Opens (or creates) a durable store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_history(dir, DEFAULT_HISTORY)
    }

    pub fn open_with_history(dir: &Path, history_limit: usize) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| internal(format!("creating {}: {e}", dir.display())))?;
        let mut state = State::empty(Some(dir.to_path_buf()), history_limit);
        let snap_path = dir.join("snapshot.json");
        if snap_path.exists() {
            let snap: Snapshot =
                serde_json::from_reader(BufReader::new(File::open(&snap_path).map_err(internal)?))
                    .map_err(|e| internal(format!("reading {}: {e}", snap_path.display())))?;
            state.revision = snap.revision;
            state.compacted = snap.revision;
            for (k, v, c, m) in snap.keys {
                state.live.insert(
                    k.clone(),
                    KeyValue {
                        key: k,
                        value: Bytes::from(v),
                        create_revision: c,
                        mod_revision: m,
                    },
                );
            }
        }
        let log_path = dir.join("wal.log");
        let mut valid_len: u64 = 0;
        if log_path.exists() {
            let reader = BufReader::new(File::open(&log_path).map_err(internal)?);
            for line in reader.split(b'\n') {
                let line = line.map_err(internal)?;
                // A line without its newline, or one that does not parse, is a torn write: stop there.
                let Ok(rec) = serde_json::from_slice::<LogRecord>(&line) else {
                    break;
                };
                valid_len += line.len() as u64 + 1;
                if rec.r <= state.revision {
                    continue;
                }
                state.apply_record(rec);
                state.log_lines += 1;
            }
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(internal)?;
        // Drop a torn tail so the next append starts on a clean line.
        if log.metadata().map_err(internal)?.len() > valid_len {
            log.set_len(valid_len).map_err(internal)?;
        }
        state.log = Some(log);
        Ok(Self::with_state(state))
    }

    fn with_state(state: State) -> Self {
        EmbeddedStore {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a panic mid-write; the state itself stays consistent
        // because every mutation is applied after its log append succeeded.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn empty(dir: Option<PathBuf>, history_limit: usize) -> Self {
        State {
            revision: 1,
            compacted: 1,
            live: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit,
            watchers: Vec::new(),
            log: None,
            log_lines: 0,
            dir,
        }
    }

    /// Replays one log record into memory (no logging, no watchers).
    fn apply_record(&mut self, rec: LogRecord) {
        let prev = self.live.get(&rec.k).cloned();
        self.revision = rec.r;
        let event = match rec.v {
            Some(v) => {
                let kv = KeyValue {
                    key: rec.k.clone(),
                    value: Bytes::from(v),
                    create_revision: rec.c,
                    mod_revision: rec.r,
                };
                self.live.insert(rec.k, kv.clone());
                StoreEvent {
                    kind: EventKind::Put,
                    kv,
                    prev,
                    revision: rec.r,
                }
            }
            None => {
                self.live.remove(&rec.k);
                let kv = KeyValue {
                    key: rec.k,
                    value: Bytes::new(),
                    create_revision: 0,
                    mod_revision: rec.r,
                };
                StoreEvent {
                    kind: EventKind::Delete,
                    kv,
                    prev,
                    revision: rec.r,
                }
            }
        };
        self.push_history(event);
    }

    fn push_history(&mut self, event: StoreEvent) {
        self.history.push_back(event);
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.revision + 1;
            }
        }
    }

    /// Logs, applies and publishes one write. The log append comes first: if it
    /// fails, memory is untouched and the caller gets an error.
    fn commit(&mut self, key: &str, value: Option<Bytes>) -> Result<StoreEvent, StoreError> {
        let rev = self.revision + 1;
        let prev = self.live.get(key).cloned();
        let create_rev = match (&value, &prev) {
            (Some(_), Some(p)) => p.create_revision,
            (Some(_), None) => rev,
            (None, _) => 0,
        };
        if let Some(log) = self.log.as_mut() {
            let text = match &value {
                Some(v) => Some(
                    std::str::from_utf8(v)
                        .map_err(|_| internal("values must be UTF-8 JSON"))?
                        .to_string(),
                ),
                None => None,
            };
            let rec = LogRecord {
                r: rev,
                k: key.to_string(),
                v: text,
                c: create_rev,
            };
            let mut line = serde_json::to_vec(&rec).map_err(internal)?;
            line.push(b'\n');
            log.write_all(&line)
                .map_err(|e| internal(format!("writing log: {e}")))?;
            self.log_lines += 1;
        }
        self.revision = rev;
        let event = match value {
            Some(v) => {
                let kv = KeyValue {
                    key: key.to_string(),
                    value: v,
                    create_revision: create_rev,
                    mod_revision: rev,
                };
                self.live.insert(key.to_string(), kv.clone());
                StoreEvent {
                    kind: EventKind::Put,
                    kv,
                    prev,
                    revision: rev,
                }
            }
            None => {
                self.live.remove(key);
                let kv = KeyValue {
                    key: key.to_string(),
                    value: Bytes::new(),
                    create_revision: 0,
                    mod_revision: rev,
                };
                StoreEvent {
                    kind: EventKind::Delete,
                    kv,
                    prev,
                    revision: rev,
                }
            }
        };
        self.watchers
            .retain(|w| !key.starts_with(&w.prefix) || w.tx.send(Ok(event.clone())).is_ok());
        self.push_history(event.clone());
        if self.log_lines >= SNAPSHOT_EVERY {
            self.snapshot()?;
        }
        Ok(event)
    }

    /// Folds the log into a new snapshot.
    fn snapshot(&mut self) -> Result<(), StoreError> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        let snap = Snapshot {
            revision: self.revision,
            keys: self
                .live
                .values()
                .map(|kv| {
                    (
                        kv.key.clone(),
                        String::from_utf8_lossy(&kv.value).into_owned(),
                        kv.create_revision,
                        kv.mod_revision,
                    )
                })
                .collect(),
        };
        let tmp = dir.join("snapshot.json.tmp");
        {
            let mut f = File::create(&tmp).map_err(internal)?;
            serde_json::to_writer(&mut f, &snap).map_err(internal)?;
            f.sync_all().map_err(internal)?;
        }
        std::fs::rename(&tmp, dir.join("snapshot.json")).map_err(internal)?;
        // Everything in the log is now in the snapshot: start an empty log.
        let log = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(dir.join("wal.log"))
            .map_err(internal)?;
        self.log = Some(log);
        self.log_lines = 0;
        Ok(())
    }

    /// The keys under `prefix` as they were at `revision`.
    fn list_at(&self, prefix: &str, revision: i64) -> Vec<KeyValue> {
        let mut view: BTreeMap<String, KeyValue> = self
            .live
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ev in self
            .history
            .iter()
            .rev()
            .take_while(|e| e.revision > revision)
        {
            if !ev.kv.key.starts_with(prefix) {
                continue;
            }
            match &ev.prev {
                Some(p) => {
                    view.insert(p.key.clone(), p.clone());
                }
                None => {
                    view.remove(&ev.kv.key);
                }
            }
        }
        view.into_values().collect()
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<i64, StoreError> {
        let mut s = self.lock();
        if s.live.contains_key(key) {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        Ok(s.commit(key, Some(value))?.revision)
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.lock().live.get(key).cloned())
    }

    async fn list(
        &self,
        prefix: &str,
        revision: Option<i64>,
    ) -> Result<(Vec<KeyValue>, i64), StoreError> {
        let s = self.lock();
        match revision {
            None => Ok((s.list_at(prefix, s.revision), s.revision)),
            Some(r) if r < s.compacted => Err(StoreError::Gone {
                requested: r,
                compacted: s.compacted,
            }),
            Some(r) => {
                let r = r.min(s.revision);
                Ok((s.list_at(prefix, r), r))
            }
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<i64>,
    ) -> Result<i64, StoreError> {
        let mut s = self.lock();
        let current = s
            .live
            .get(key)
            .map(|kv| kv.mod_revision)
            .ok_or_else(|| StoreError::NotFound(key.to_string()))?;
        if expected.is_some_and(|e| e != current) {
            return Err(StoreError::Conflict {
                key: key.to_string(),
                current,
            });
        }
        Ok(s.commit(key, Some(value))?.revision)
    }

    async fn delete(
        &self,
        key: &str,
        expected: Option<i64>,
    ) -> Result<(KeyValue, i64), StoreError> {
        let mut s = self.lock();
        let current = s
            .live
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(key.to_string()))?;
        if expected.is_some_and(|e| e != current.mod_revision) {
            return Err(StoreError::Conflict {
                key: key.to_string(),
                current: current.mod_revision,
            });
        }
        let ev = s.commit(key, None)?;
        Ok((current, ev.revision))
    }

    async fn watch(&self, prefix: &str, start_revision: i64) -> Result<WatchReceiver, StoreError> {
        let mut s = self.lock();
        if start_revision < s.compacted && start_revision <= s.revision {
            return Err(StoreError::Gone {
                requested: start_revision,
                compacted: s.compacted,
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        // Replay and registration happen under one lock: no event is missed or doubled.
        for ev in s
            .history
            .iter()
            .filter(|e| e.revision >= start_revision && e.kv.key.starts_with(prefix))
        {
            let _ = tx.send(Ok(ev.clone()));
        }
        s.watchers.push(Watcher {
            prefix: prefix.to_string(),
            tx,
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, StoreError> {
        Ok(self.lock().revision)
    }

    async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        let mut s = self.lock();
        if revision <= s.compacted {
            return Ok(());
        }
        let revision = revision.min(s.revision);
        while s.history.front().is_some_and(|e| e.revision < revision) {
            s.history.pop_front();
        }
        s.compacted = revision;
        // Watchers that still need history before the new compaction point keep
        // receiving live events: they registered before and miss nothing.
        Ok(())
    }
}
