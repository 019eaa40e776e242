//! Backup and restore of the embedded store (`<data-dir>/state.db`), what
//! `minik8s-backup` runs.
//!
//! ```text
//!  save:    running master's state.db ──VACUUM INTO──▶ FILE.partial ──checked, fsync'd──▶ FILE
//!  restore: FILE ──checked──▶ state.db.restoring ──compaction point raised──▶ state.db
//!           (refused while a process has state.db open; the old state.db,
//!           its WAL folded in, is kept as state.db.before-restore)
//! ```
//!
//! `VACUUM INTO` writes a consistent snapshot from one read transaction, so
//! a master keeps serving (WAL lets the writer go on) while it runs. A
//! restore needs the master stopped. It raises the restored store's
//! compaction point a billion revisions past the snapshot's and the
//! replaced store's, so past every revision handed out even when the data
//! directory was lost (as `etcdutl snapshot restore --bump-revision
//! 1000000000 --mark-compacted` does), so
//! every client's watch or list from an older resourceVersion gets 410 Gone
//! and relists: kubelets then see the pods that are not in the backup go
//! away (and remove their containers), controllers recreate what is missing.

use super::{current_revision, internal, list_rows, prefix_end, sql, DB_FILE};
use crate::store::{KeyValue, StoreError};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// How far a restore moves the revision past the snapshot's and the
/// replaced store's (etcd's documented `--bump-revision` for a restore).
pub const REVISION_BUMP: i64 = 1_000_000_000;

/// What a snapshot holds: its newest revision and its live keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub revision: i64,
    pub keys: i64,
}

/// What a restore did: the snapshot, and the revision the store now starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub snapshot: SnapshotInfo,
    pub revision: i64,
    /// Where the replaced database was kept, if there was one.
    pub previous: Option<PathBuf>,
}

fn sync_file(path: &Path) -> Result<(), StoreError> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| internal(format!("syncing {}: {e}", path.display())))
}

fn sync_dir(dir: &Path) {
    // Makes the rename durable; a failure only weakens that, so it is not fatal.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// A process that has `file` open (from `/proc/<pid>/fd`), if any: a
/// running master's store must not be replaced under it.
fn process_using(file: &Path) -> Option<u32> {
    let target = file.canonicalize().ok()?;
    let procs = std::fs::read_dir("/proc").ok()?;
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l == target) {
                return Some(pid);
            }
        }
    }
    None
}

/// Checks a written snapshot, makes it durable and moves it into place
/// (a reader of `to` never sees half a file).
fn publish(partial: &Path, to: &Path) -> Result<SnapshotInfo, StoreError> {
    let info = inspect(partial)?;
    sync_file(partial)?;
    std::fs::rename(partial, to)
        .map_err(|e| internal(format!("renaming to {}: {e}", to.display())))?;
    if let Some(dir) = to.parent() {
        sync_dir(dir);
    }
    Ok(info)
}

/// Checks that `file` is a whole snapshot of the embedded store.
pub fn inspect(file: &Path) -> Result<SnapshotInfo, StoreError> {
    let bad = |why: String| {
        StoreError::Internal(format!(
            "{} is not a usable minik8s store snapshot: {why}",
            file.display()
        ))
    };
    if !file.is_file() {
        return Err(bad("no such file".into()));
    }
    let conn = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| bad(e.to_string()))?;
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| bad(e.to_string()))?;
    if check != "ok" {
        return Err(bad(format!("integrity check: {check}")));
    }
    let (revision, _) = current_revision(&conn).map_err(|e| bad(e.to_string()))?;
    let keys: i64 = conn
        .query_row(
            "SELECT count(*) FROM kine k JOIN (SELECT max(id) AS id FROM kine GROUP BY name) n
             ON k.id = n.id WHERE k.deleted = 0",
            [],
            |r| r.get(0),
        )
        .map_err(|e| bad(e.to_string()))?;
    Ok(SnapshotInfo { revision, keys })
}

/// Writes a consistent snapshot of the store in `data_dir` to `to`
/// (atomically: a reader never sees half a file), while the master runs.
pub fn save(data_dir: &Path, to: &Path) -> Result<SnapshotInfo, StoreError> {
    let db = data_dir.join(DB_FILE);
    if !db.is_file() {
        return Err(internal(format!(
            "no embedded store at {} (is --data-dir the master's?)",
            db.display()
        )));
    }
    let partial = to.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|e| internal(format!("opening {}: {e}", db.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(internal)?;
    conn.execute("VACUUM INTO ?1", [partial.display().to_string()])
        .map_err(|e| internal(format!("writing {}: {e}", partial.display())))?;
    drop(conn);
    publish(&partial, to)
}

/// Writes the live keys `kvs` of another store (etcd's, read at `revision`)
/// as a snapshot in the format [`save`] writes, so one file restores into
/// either store.
pub fn write_snapshot(
    kvs: &[KeyValue],
    revision: i64,
    to: &Path,
) -> Result<SnapshotInfo, StoreError> {
    let partial = to.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    {
        let mut conn = Connection::open(&partial)
            .map_err(|e| internal(format!("creating {}: {e}", partial.display())))?;
        conn.execute_batch(sql::SCHEMA).map_err(internal)?;
        let tx = conn.transaction().map_err(internal)?;
        {
            let mut insert = tx.prepare(sql::INSERT_ROW).map_err(internal)?;
            // One row per key, numbered in key order: the history stays behind.
            for (i, kv) in kvs.iter().enumerate() {
                let id = i as i64 + 1;
                insert
                    .execute(rusqlite::params![
                        id,
                        kv.key,
                        1,
                        0,
                        id,
                        0,
                        kv.value.as_ref()
                    ])
                    .map_err(internal)?;
            }
        }
        tx.execute(sql::SET_COMPACTED, [revision.max(kvs.len() as i64)])
            .map_err(internal)?;
        tx.commit().map_err(internal)?;
    }
    publish(&partial, to)
}

/// The live keys of a snapshot file (checked first), to restore into etcd.
pub fn read_snapshot(file: &Path) -> Result<(Vec<KeyValue>, SnapshotInfo), StoreError> {
    let info = inspect(file)?;
    let conn = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| internal(format!("opening {}: {e}", file.display())))?;
    let kvs = list_rows(&conn, String::new(), prefix_end(""), info.revision, -1)?;
    Ok((kvs, info))
}

/// Replaces the store in `data_dir` with the snapshot `from`. The master
/// must be stopped; a snapshot that fails its checks changes nothing.
pub fn restore(from: &Path, data_dir: &Path) -> Result<Restored, StoreError> {
    let snapshot = inspect(from)?;
    let db = data_dir.join(DB_FILE);
    if let Some(pid) = process_using(&db) {
        return Err(internal(format!(
            "process {pid} (the master?) has {} open: stop it before restoring",
            db.display()
        )));
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|e| internal(format!("creating {}: {e}", data_dir.display())))?;
    let before = match db.is_file() {
        true => {
            // Opening recovers what a killed master left in its WAL; the
            // checkpoint folds it in, so the kept copy is one whole file.
            let conn = Connection::open(&db)
                .map_err(|e| internal(format!("opening {}: {e}", db.display())))?;
            let revision = current_revision(&conn)?.0;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(internal)?;
            conn.pragma_update(None, "journal_mode", "DELETE")
                .map_err(internal)?;
            revision
        }
        false => 0,
    };
    // Above every revision a client may hold, even when the data directory
    // was lost before the restore (`before` is then 0): as etcd's own
    // restore is told to with `--bump-revision 1000000000`.
    let revision = before.max(snapshot.revision) + REVISION_BUMP;
    let restoring = data_dir.join(format!("{DB_FILE}.restoring"));
    std::fs::copy(from, &restoring)
        .map_err(|e| internal(format!("copying {}: {e}", from.display())))?;
    {
        let conn = Connection::open(&restoring).map_err(internal)?;
        conn.execute(sql::SET_COMPACTED, [revision])
            .map_err(internal)?;
        // Back to a plain rollback journal file: the master switches it to WAL.
        conn.pragma_update(None, "journal_mode", "DELETE")
            .map_err(internal)?;
    }
    sync_file(&restoring)?;
    let previous = match db.is_file() {
        true => {
            let keep = data_dir.join(format!("{DB_FILE}.before-restore"));
            std::fs::rename(&db, &keep)
                .map_err(|e| internal(format!("keeping {}: {e}", db.display())))?;
            Some(keep)
        }
        false => None,
    };
    std::fs::rename(&restoring, &db)
        .map_err(|e| internal(format!("renaming to {}: {e}", db.display())))?;
    sync_dir(data_dir);
    Ok(Restored {
        snapshot,
        revision,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::Store;

    fn put(store: &EmbeddedStore, key: &str) -> i64 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(store.create(key, bytes::Bytes::from_static(b"{}")))
            .unwrap()
    }

    #[test]
    fn a_snapshot_restores_what_it_held_above_every_revision_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let file = dir.path().join("backup.db");
        let store = EmbeddedStore::open(&data).unwrap();
        put(&store, "/registry/configmaps/default/a");
        let saved = save(&data, &file).unwrap();
        assert_eq!(saved.keys, 1);
        let later = put(&store, "/registry/configmaps/default/b");
        assert!(later > saved.revision);
        // The master is running (here: this process has the store open):
        // refused, nothing changed.
        let err = restore(&file, &data).unwrap_err().to_string();
        assert!(err.contains("stop it before restoring"), "{err}");
        drop(store);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let restored = restore(&file, &data).unwrap();
        assert_eq!(restored.revision, later + REVISION_BUMP);
        assert!(restored.previous.is_some());
        let store = EmbeddedStore::open(&data).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (keys, revision) = rt
            .block_on(store.list("/registry/configmaps/", None))
            .unwrap();
        let names: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(names, ["/registry/configmaps/default/a"]);
        assert_eq!(revision, later + REVISION_BUMP);
    }

    #[test]
    fn a_truncated_or_foreign_file_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let file = dir.path().join("backup.db");
        let store = EmbeddedStore::open(&data).unwrap();
        put(&store, "/registry/configmaps/default/a");
        save(&data, &file).unwrap();
        drop(store);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let db = data.join(DB_FILE);
        let before = std::fs::read(&db).unwrap();
        let bytes = std::fs::read(&file).unwrap();
        let truncated = dir.path().join("truncated.db");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        let err = restore(&truncated, &data).unwrap_err().to_string();
        assert!(
            err.contains("is not a usable minik8s store snapshot"),
            "{err}"
        );
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a database").unwrap();
        assert!(restore(&text, &data).is_err());
        assert!(restore(&dir.path().join("missing.db"), &data).is_err());
        assert_eq!(
            std::fs::read(&db).unwrap(),
            before,
            "the store is untouched"
        );
        assert!(!data.join(format!("{DB_FILE}.restoring")).exists());
    }

    #[test]
    fn another_store_s_keys_make_the_same_kind_of_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("etcd.db");
        let kv = |k: &str, v: &'static [u8]| KeyValue {
            key: k.into(),
            value: bytes::Bytes::from_static(v),
            create_revision: 7,
            mod_revision: 9,
        };
        let kvs = [
            kv("/registry/configmaps/default/a", b"{\"a\":1}"),
            kv("/registry/pods/default/p", b"{}"),
        ];
        let info = write_snapshot(&kvs, 4242, &file).unwrap();
        assert_eq!(
            info,
            SnapshotInfo {
                revision: 4242,
                keys: 2
            }
        );
        let (read, again) = read_snapshot(&file).unwrap();
        assert_eq!(again, info);
        let keys: Vec<(&str, &[u8])> = read
            .iter()
            .map(|k| (k.key.as_str(), k.value.as_ref()))
            .collect();
        assert_eq!(
            keys,
            [
                ("/registry/configmaps/default/a", &b"{\"a\":1}"[..]),
                ("/registry/pods/default/p", &b"{}"[..])
            ]
        );
        // ... and it restores into an embedded store above its revision.
        let restored = restore(&file, &dir.path().join("data")).unwrap();
        assert_eq!(restored.revision, 4242 + REVISION_BUMP);
    }
}
