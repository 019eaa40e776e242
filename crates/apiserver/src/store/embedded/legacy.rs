//! Reads the data directory of the store minik8s had before SQLite: a
//! `snapshot.json` plus an append-only `wal.log` of JSON lines. Used once, to
//! migrate such a directory into the database (see [`super::EmbeddedStore::open`]).

use crate::store::{KeyValue, StoreError};
use bytes::Bytes;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

pub const SNAPSHOT: &str = "snapshot.json";
pub const LOG: &str = "wal.log";

/// One line of `wal.log`.
#[derive(Deserialize)]
struct LogRecord {
    /// Revision of the write.
    r: i64,
    k: String,
    /// The new value; None for a delete.
    v: Option<String>,
    /// Create revision of the key after the write.
    c: i64,
}

#[derive(Deserialize)]
struct Snapshot {
    revision: i64,
    /// (key, value, create revision, mod revision)
    keys: Vec<(String, String, i64, i64)>,
}

/// The live keys of an old data directory and its last revision.
#[derive(Debug, Default)]
pub struct LegacyData {
    pub revision: i64,
    pub keys: BTreeMap<String, KeyValue>,
    /// The files read, to be renamed once the data is in the database.
    pub files: Vec<PathBuf>,
}

fn internal(what: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("reading {}: {e}", what.display()))
}

/// `None` when `dir` holds no old-format data.
pub fn read(dir: &Path) -> Result<Option<LegacyData>, StoreError> {
    let snap_path = dir.join(SNAPSHOT);
    let log_path = dir.join(LOG);
    if !snap_path.exists() && !log_path.exists() {
        return Ok(None);
    }
    let mut data = LegacyData {
        revision: 1,
        ..Default::default()
    };
    if snap_path.exists() {
        let file = File::open(&snap_path).map_err(|e| internal(&snap_path, e))?;
        let snap: Snapshot =
            serde_json::from_reader(BufReader::new(file)).map_err(|e| internal(&snap_path, e))?;
        data.revision = snap.revision;
        for (key, value, create_revision, mod_revision) in snap.keys {
            let kv = KeyValue {
                key: key.clone(),
                value: Bytes::from(value),
                create_revision,
                mod_revision,
            };
            data.keys.insert(key, kv);
        }
        data.files.push(snap_path);
    }
    if log_path.exists() {
        let file = File::open(&log_path).map_err(|e| internal(&log_path, e))?;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| internal(&log_path, e))?;
            // A line that does not parse is a torn last write: the old store stopped there too.
            let Ok(rec) = serde_json::from_slice::<LogRecord>(&line) else {
                break;
            };
            if rec.r <= data.revision {
                continue;
            }
            data.revision = rec.r;
            match rec.v {
                Some(v) => {
                    let kv = KeyValue {
                        key: rec.k.clone(),
                        value: Bytes::from(v),
                        create_revision: rec.c,
                        mod_revision: rec.r,
                    };
                    data.keys.insert(rec.k, kv);
                }
                None => {
                    data.keys.remove(&rec.k);
                }
            }
        }
        data.files.push(log_path);
    }
    Ok(Some(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_the_log_over_the_snapshot_and_stops_at_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(SNAPSHOT),
            r#"{"revision":5,"keys":[["/a","A",2,2],["/b","B",3,5]]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(LOG),
            concat!(
                r#"{"r":4,"k":"/old","v":"x","c":4}"#,
                "\n",
                r#"{"r":6,"k":"/a","v":"A2","c":2}"#,
                "\n",
                r#"{"r":7,"k":"/b","v":null,"c":0}"#,
                "\n",
                r#"{"r":8,"k":"/torn","v":"#
            ),
        )
        .unwrap();
        let data = read(dir.path()).unwrap().unwrap();
        assert_eq!(data.revision, 7);
        let keys: Vec<_> = data
            .keys
            .values()
            .map(|kv| (kv.key.as_str(), kv.create_revision, kv.mod_revision))
            .collect();
        assert_eq!(keys, [("/a", 2, 6)]);
        assert_eq!(data.files.len(), 2);
        assert!(read(tempfile::tempdir().unwrap().path()).unwrap().is_none());
    }
}
