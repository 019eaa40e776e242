//! One conformance suite, run against both store backends: the embedded store
//! and a real etcd started by the test.

use apiserver::store::embedded::EmbeddedStore;
use apiserver::store::etcd::EtcdStore;
use apiserver::store::{EventKind, Store, StoreError, StoreEvent};
use bytes::Bytes;
use minik8s_testkit::EtcdProcess;
use std::sync::Arc;
use std::time::Duration;

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

async fn next_event(rx: &mut apiserver::store::WatchReceiver) -> StoreEvent {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("watch event within 5 s")
        .expect("watch channel open")
        .expect("watch event, not error")
}

/// The behaviour every backend must show. Keys are under `p` so runs do not collide.
async fn conformance(store: Arc<dyn Store>, p: &str) {
    let k = |n: &str| format!("{p}/items/{n}");

    // create, AlreadyExists, get
    let r1 = store.create(&k("a"), b("1")).await.unwrap();
    assert!(matches!(
        store.create(&k("a"), b("x")).await,
        Err(StoreError::AlreadyExists(_))
    ));
    let got = store.get(&k("a")).await.unwrap().unwrap();
    assert_eq!(
        (got.value.as_ref(), got.mod_revision, got.create_revision),
        (b"1".as_ref(), r1, r1)
    );
    assert!(store.get(&k("missing")).await.unwrap().is_none());

    // update with precondition: Conflict on a stale revision, success on the right one
    let r2 = store.update(&k("a"), b("2"), Some(r1)).await.unwrap();
    assert!(r2 > r1);
    match store.update(&k("a"), b("3"), Some(r1)).await {
        Err(StoreError::Conflict { current, .. }) => assert_eq!(current, r2),
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(
        store.get(&k("a")).await.unwrap().unwrap().value,
        b("2"),
        "a failed update changes nothing"
    );
    assert!(matches!(
        store.update(&k("missing"), b("1"), None).await,
        Err(StoreError::NotFound(_))
    ));

    // list at a revision sees the past
    let r3 = store.create(&k("b"), b("b1")).await.unwrap();
    let (now, rev_now) = store.list(&format!("{p}/items/"), None).await.unwrap();
    assert_eq!(
        now.iter().map(|kv| kv.key.clone()).collect::<Vec<_>>(),
        vec![k("a"), k("b")]
    );
    assert!(rev_now >= r3);
    let (then, rev_then) = store.list(&format!("{p}/items/"), Some(r1)).await.unwrap();
    assert_eq!(rev_then, r1);
    assert_eq!(then.len(), 1);
    assert_eq!(then[0].value, b("1"));
    // prefixes do not leak into each other
    store
        .create(&format!("{p}/itemsx/c"), b("c"))
        .await
        .unwrap();
    assert_eq!(
        store
            .list(&format!("{p}/items/"), None)
            .await
            .unwrap()
            .0
            .len(),
        2
    );

    // delete with precondition
    assert!(matches!(
        store.delete(&k("b"), Some(r1)).await,
        Err(StoreError::Conflict { .. })
    ));
    let (deleted, r4) = store.delete(&k("b"), Some(r3)).await.unwrap();
    assert_eq!(deleted.value, b("b1"));
    assert!(r4 > r3);
    assert!(matches!(
        store.delete(&k("b"), None).await,
        Err(StoreError::NotFound(_))
    ));

    // watch from a revision: history replayed in order, previous values on delete
    let mut w = store.watch(&format!("{p}/items/"), r1).await.unwrap();
    let evs: Vec<StoreEvent> = [
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ]
    .into();
    assert_eq!(
        evs.iter().map(|e| e.revision).collect::<Vec<_>>(),
        vec![r1, r2, r3, r4]
    );
    assert!(evs[0].is_create() && !evs[1].is_create());
    assert_eq!(evs[1].prev.as_ref().unwrap().value, b("1"));
    assert_eq!(evs[3].kind, EventKind::Delete);
    assert_eq!(evs[3].prev.as_ref().unwrap().value, b("b1"));
    // and live events afterwards
    let r5 = store.create(&k("c"), b("c1")).await.unwrap();
    let live = next_event(&mut w).await;
    assert_eq!((live.revision, live.kv.key.clone()), (r5, k("c")));

    // compaction: old revisions answer Gone for watch and list
    store.compact(r5).await.unwrap();
    match store.watch(&format!("{p}/items/"), r1).await {
        Err(StoreError::Gone { .. }) => {}
        Ok(mut rx) => match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Err(StoreError::Gone { .. }))) => {}
            other => panic!("expected Gone from a compacted watch, got {other:?}"),
        },
        Err(e) => panic!("expected Gone, got {e}"),
    }
    assert!(matches!(
        store.list(&format!("{p}/items/"), Some(r1)).await,
        Err(StoreError::Gone { .. })
    ));
    // the current state is untouched by compaction
    assert_eq!(
        store
            .list(&format!("{p}/items/"), None)
            .await
            .unwrap()
            .0
            .len(),
        2
    );
    assert!(store.current_revision().await.unwrap() >= r5);
}

/// `list_page`: a collection read a page at a time at one revision sees
/// exactly what one list at that revision sees, whatever is written between
/// the pages; keys outside the prefix never show up.
async fn pages(store: Arc<dyn Store>, p: &str) {
    let prefix = format!("{p}/paged/");
    for i in 0..25 {
        store
            .create(&format!("{prefix}{i:02}"), b("v1"))
            .await
            .unwrap();
    }
    store
        .create(&format!("{p}/paged0"), b("outside"))
        .await
        .unwrap();
    let at = store.current_revision().await.unwrap();
    let (expected, _) = store.list(&prefix, Some(at)).await.unwrap();
    let (mut seen, mut start) = (Vec::new(), prefix.clone());
    loop {
        let page = store.list_page(&prefix, &start, at, 10).await.unwrap();
        assert!(page.len() <= 10);
        // Writes between pages are not seen: the pages are read at `at`.
        store
            .update(&format!("{prefix}{:02}", seen.len()), b("v2"), None)
            .await
            .unwrap();
        store
            .create(&format!("{prefix}new-{}", seen.len()), b("v1"))
            .await
            .unwrap();
        let full = page.len() == 10;
        if let Some(last) = page.last() {
            start = format!("{}\0", last.key);
        }
        seen.extend(page);
        if !full {
            break;
        }
    }
    assert_eq!(seen.len(), 25);
    assert_eq!(seen, expected);
    assert!(seen.iter().all(|kv| kv.value == b("v1")));
}

#[tokio::test]
async fn embedded_store_reads_pages_at_one_revision() {
    let dir = tempfile::tempdir().unwrap();
    pages(Arc::new(EmbeddedStore::open(dir.path()).unwrap()), "/t").await;
}

#[tokio::test]
async fn etcd_store_reads_pages_at_one_revision() {
    let etcd = EtcdProcess::start();
    let store = EtcdStore::connect(&etcd.endpoint).await.unwrap();
    pages(Arc::new(store), "/t").await;
}

#[tokio::test]
async fn embedded_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance(Arc::new(EmbeddedStore::open(dir.path()).unwrap()), "/t").await;
}

#[tokio::test]
async fn etcd_store_conforms() {
    let etcd = EtcdProcess::start();
    let store = EtcdStore::connect(&etcd.endpoint).await.unwrap();
    conformance(Arc::new(store), "/t").await;
}

#[tokio::test]
async fn embedded_data_and_history_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (rev, deleted_rev) = {
        let s = EmbeddedStore::open(dir.path()).unwrap();
        s.create("/k/a", b("1")).await.unwrap();
        let rev = s.update("/k/a", b("2"), None).await.unwrap();
        s.create("/k/b", b("x")).await.unwrap();
        let (_, d) = s.delete("/k/b", None).await.unwrap();
        (rev, d)
    };
    let s = EmbeddedStore::open(dir.path()).unwrap();
    let a = s.get("/k/a").await.unwrap().unwrap();
    assert_eq!((a.value, a.mod_revision), (b("2"), rev));
    assert!(s.get("/k/b").await.unwrap().is_none());
    assert_eq!(s.current_revision().await.unwrap(), deleted_rev);
    // Revisions keep increasing after a restart and history is still watchable.
    let next = s.create("/k/c", b("c")).await.unwrap();
    assert_eq!(next, deleted_rev + 1);
    let mut w = s.watch("/k/", rev).await.unwrap();
    let ev = next_event(&mut w).await;
    assert_eq!((ev.revision, ev.prev.unwrap().value), (rev, b("1")));
    let ev = next_event(&mut w).await;
    assert_eq!((ev.kind, ev.kv.key.as_str()), (EventKind::Put, "/k/b"));
    let ev = next_event(&mut w).await;
    assert_eq!(
        (ev.kind, ev.prev.unwrap().value),
        (EventKind::Delete, b("x"))
    );
    assert_eq!(next_event(&mut w).await.revision, next);
}

/// A power loss tears the last commit in the write-ahead log: the store
/// opens at the last complete commit, consistent, and goes on from there.
#[tokio::test]
async fn embedded_store_recovers_from_a_torn_log_tail() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open(dir.path()).unwrap();
    let mut acked = Vec::new();
    for i in 0..50 {
        acked.push(s.create(&format!("/p/{i:03}"), b("v")).await.unwrap());
    }
    // The files as a crash would leave them (the store is still open: no
    // checkpoint on close), with the last few bytes of the log torn off.
    let copy = tempfile::tempdir().unwrap();
    for f in ["state.db", "state.db-wal"] {
        std::fs::copy(dir.path().join(f), copy.path().join(f)).unwrap();
    }
    let wal = copy.path().join("state.db-wal");
    let len = std::fs::metadata(&wal).unwrap().len();
    assert!(len > 0, "the committed writes are in the log");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    drop(s);

    let s = EmbeddedStore::open(copy.path()).unwrap();
    let rev = s.current_revision().await.unwrap();
    let (items, at) = s.list("/p/", None).await.unwrap();
    assert_eq!(at, rev);
    assert!(rev < *acked.last().unwrap(), "the torn commit is gone");
    // Exactly the writes up to the recovered revision, none after it.
    let expected: Vec<i64> = acked.iter().copied().filter(|r| *r <= rev).collect();
    assert_eq!(
        items.iter().map(|kv| kv.mod_revision).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(s.create("/p/next", b("v")).await.unwrap(), rev + 1);
}

/// A data directory of the older log-based store is moved into the database
/// with its revisions.
#[tokio::test]
async fn embedded_store_migrates_the_old_log_format() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("snapshot.json"),
        r#"{"revision":5,"keys":[["/m/a","{}",2,2],["/m/b","{}",3,5]]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("wal.log"),
        "{\"r\":6,\"k\":\"/m/a\",\"v\":\"{\\\"x\\\":1}\",\"c\":2}\n{\"r\":7,\"k\":\"/m/c\",\"v\":null,\"c\":0}\n",
    )
    .unwrap();
    let s = EmbeddedStore::open(dir.path()).unwrap();
    let a = s.get("/m/a").await.unwrap().unwrap();
    assert_eq!(
        (a.value, a.create_revision, a.mod_revision),
        (b(r#"{"x":1}"#), 2, 6)
    );
    assert_eq!(s.get("/m/b").await.unwrap().unwrap().mod_revision, 5);
    assert_eq!(s.current_revision().await.unwrap(), 7);
    assert_eq!(s.create("/m/d", b("{}")).await.unwrap(), 8);
    assert!(dir.path().join("wal.log.migrated").exists());
    assert!(!dir.path().join("wal.log").exists());
    drop(s);
    // Opening again does not migrate twice.
    let s = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(s.list("/m/", None).await.unwrap().0.len(), 3);
}

/// Concurrent writers share commits (group commit): every write gets its own
/// revision, with no gaps, and a watcher sees them all in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_store_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let start = s.current_revision().await.unwrap();
    let mut w = s.watch("/c/", start + 1).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut revs = Vec::new();
                for i in 0..100 {
                    revs.push(s.create(&format!("/c/{t}-{i}"), b("v")).await.unwrap());
                }
                revs
            })
        })
        .collect();
    let mut revs = Vec::new();
    for t in tasks {
        revs.extend(t.await.unwrap());
    }
    revs.sort();
    assert_eq!(revs, ((start + 1)..=(start + 800)).collect::<Vec<_>>());
    for expected in (start + 1)..=(start + 800) {
        assert_eq!(next_event(&mut w).await.revision, expected);
    }
}

/// Writes to one key that land in one commit group see each other: of
/// many updates expecting the same revision exactly one wins, a create after
/// a delete in the same group succeeds, and what reads answer (from memory)
/// is what the database holds once reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_writes_to_one_key_in_one_group_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let mut rounds = Vec::new();
    for k in 0..20 {
        let key = format!("/g/{k}");
        let rev = s.create(&key, b("v0")).await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (s, key) = (s.clone(), key.clone());
                tokio::spawn(async move { s.update(&key, b(&format!("v{i}")), Some(rev)).await })
            })
            .collect();
        let mut won = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => won += 1,
                Err(StoreError::Conflict { current, .. }) => assert!(current > rev),
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(won, 1, "{key}: exactly one update expecting {rev} wins");
        let (delete, create) = tokio::join!(s.delete(&key, None), async {
            tokio::task::yield_now().await;
            s.create(&key, b("again")).await
        });
        rounds.push((key, delete.is_ok(), create.is_ok()));
    }
    let (listed, at) = s.list("/g/", None).await.unwrap();
    for (key, deleted, created) in &rounds {
        let got = s.get(key).await.unwrap();
        // The create ran after the delete (it then succeeds) or before it (409).
        if *created {
            assert!(deleted, "{key}");
            assert_eq!(got.unwrap().value, b("again"));
        } else {
            assert!(got.is_none(), "{key} was deleted");
        }
    }
    drop(s);
    let reopened = EmbeddedStore::open(dir.path()).unwrap();
    let (again, at_again) = reopened.list("/g/", None).await.unwrap();
    assert_eq!((listed, at), (again, at_again));
}

/// A watcher that stops reading is cut off instead of being buffered for
/// without limit; resuming from its last revision loses nothing.
#[tokio::test]
async fn embedded_store_cuts_off_a_watcher_that_falls_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open(dir.path()).unwrap();
    let start = s.current_revision().await.unwrap() + 1;
    let mut slow = s.watch("/s/", start).await.unwrap();
    let total = apiserver::store::WATCH_CHANNEL_CAPACITY + 50;
    for i in 0..total {
        s.create(&format!("/s/{i}"), b("v")).await.unwrap();
    }
    let mut seen = Vec::new();
    while let Some(item) = slow.recv().await {
        seen.push(item.unwrap().revision);
    }
    assert_eq!(
        seen.len(),
        apiserver::store::WATCH_CHANNEL_CAPACITY,
        "cut off when full"
    );
    let mut resumed = s.watch("/s/", seen.last().unwrap() + 1).await.unwrap();
    while seen.len() < total {
        seen.push(next_event(&mut resumed).await.revision);
    }
    assert_eq!(seen, (start..start + total as i64).collect::<Vec<_>>());
}

#[tokio::test]
async fn embedded_history_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = EmbeddedStore::open_with_history(dir.path(), 10).unwrap();
    let first = s.create("/h/0", b("0")).await.unwrap();
    for i in 1..30 {
        s.create(&format!("/h/{i}"), b("x")).await.unwrap();
    }
    assert!(matches!(
        s.watch("/h/", first).await,
        Err(StoreError::Gone { .. })
    ));
    let recent = s.current_revision().await.unwrap() - 5;
    assert!(s.watch("/h/", recent).await.is_ok());
}
