//! Watches under compaction, randomized: writers create, patch and delete
//! pods while the store is compacted at random moments and the watch cache
//! keeps only 30 events. Watchers disconnect at random and resume from their
//! last resourceVersion; when that version is gone (410, as the start of a
//! watch or as an ERROR event) they relist, as informers do. Each watcher
//! must never see an event twice or out of order, and its state rebuilt from
//! lists and events must end equal to the store's. A bookmark never names a
//! revision above the events still queued for a slow watcher.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::registry;
use minik8s_client::{DeleteParams, DynamicApi, ListParams, WatchEvent};
use minik8s_testkit::{Backend, TestServer};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[macro_use]
mod common;

both_backends!(watchers_relist_after_compaction_and_lose_nothing);

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn rv_of(o: &Value) -> i64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// name → resourceVersion, as a LIST shows it.
type State = BTreeMap<String, i64>;

async fn list_state(pods: &DynamicApi) -> (State, i64) {
    let list = pods.list(&ListParams::default()).await.unwrap();
    let state = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                rv_of(o),
            )
        })
        .collect();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (state, rv)
}

/// Follows the pods until `done` and the watcher has caught up with the
/// store's final revision; returns its state and how often it relisted.
/// A `laggard` stays away after its first disconnect until the store is
/// [`LAG`] revisions past it, so at least one watcher falls out of the
/// watch cache whatever the machine's speed.
async fn watcher(
    pods: DynamicApi,
    done: Arc<AtomicBool>,
    final_rv: Arc<AtomicUsize>,
    laggard: bool,
) -> (State, usize) {
    let mut rng = rand::rngs::StdRng::from_entropy();
    let (mut state, mut rv) = list_state(&pods).await;
    let mut relists = 0;
    let mut lag = laggard;
    loop {
        if std::mem::take(&mut lag) {
            while !done.load(Ordering::SeqCst) && list_state(&pods).await.1 < rv + LAG {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let stream = pods
            .watch(&ListParams::default(), &rv.to_string(), false)
            .await;
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) if e.is_gone() => {
                (state, rv) = list_state(&pods).await;
                relists += 1;
                continue;
            }
            Err(e) => panic!("watch: {e}"),
        };
        let budget = rng.gen_range(1..20);
        let mut n = 0;
        loop {
            let caught_up =
                done.load(Ordering::SeqCst) && rv as usize >= final_rv.load(Ordering::SeqCst);
            if caught_up {
                return (state, relists);
            }
            let ev = match tokio::time::timeout(Duration::from_millis(200), stream.next()).await {
                Err(_) => continue,
                Ok(None) => break,
                Ok(Some(ev)) => ev.unwrap(),
            };
            let (obj, deleted) = match ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                WatchEvent::Deleted(o) => (o, true),
                WatchEvent::Error(e) if e.is_gone() => {
                    (state, rv) = list_state(&pods).await;
                    relists += 1;
                    break;
                }
                other => panic!("unexpected {other:?}"),
            };
            let at = rv_of(&obj);
            assert!(
                at > rv,
                "an event at {at} after {rv}: duplicated or out of order"
            );
            rv = at;
            let name = obj["metadata"]["name"].as_str().unwrap().to_string();
            if deleted {
                state.remove(&name);
            } else {
                state.insert(name, at);
            }
            n += 1;
            if n >= budget {
                // Disconnect at random, sometimes long enough to fall out of the cache.
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..150))).await;
                break;
            }
        }
    }
}

/// How far the store runs ahead of the laggard: twice the watch cache.
const LAG: i64 = 2 * CACHE as i64;
const CACHE: usize = 30;

async fn watchers_relist_after_compaction_and_lose_nothing(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.watch_cache_size = CACHE).await;
    let client = minik8s_client::Client::new(&s.url);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let done = Arc::new(AtomicBool::new(false));
    let final_rv = Arc::new(AtomicUsize::new(usize::MAX));
    let watchers: Vec<_> = (0..4)
        .map(|i| {
            let laggard = i == 0;
            tokio::spawn(watcher(
                pods.clone(),
                done.clone(),
                final_rv.clone(),
                laggard,
            ))
        })
        .collect();

    let writers: Vec<_> = (0..4)
        .map(|w| {
            let pods = pods.clone();
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::from_entropy();
                for _ in 0..100 {
                    let name = format!("w{w}-{}", rng.gen_range(0..6));
                    match rng.gen_range(0..3) {
                        0 => drop(pods.create(&pod(&name)).await),
                        1 => drop(
                            pods.patch(
                                &name,
                                None,
                                "application/merge-patch+json",
                                &json!({"metadata": {"annotations": {"n": rng.gen::<u32>().to_string()}}}),
                            )
                            .await,
                        ),
                        _ => drop(pods.delete(&name, &DeleteParams::default()).await),
                    }
                }
            })
        })
        .collect();
    // Compaction at random moments, up to a few revisions behind the newest.
    let store = s.server.store.clone();
    let compactor = tokio::spawn(async move {
        let mut rng = rand::rngs::StdRng::from_entropy();
        let mut compactions = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(20..120))).await;
            let now = store.current_revision().await.unwrap();
            if store.compact(now - rng.gen_range(0..10)).await.is_ok() {
                compactions += 1;
            }
            if compactions >= 200 {
                return compactions;
            }
        }
    });
    for w in writers {
        w.await.unwrap();
    }
    compactor.abort();
    let (truth, last_rv) = list_state(&pods).await;
    final_rv.store(last_rv as usize, Ordering::SeqCst);
    done.store(true, Ordering::SeqCst);

    let mut relists = 0;
    for w in watchers {
        let (state, n) = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("watcher caught up")
            .unwrap();
        relists += n;
        assert_eq!(state, truth, "a watcher's state differs from the store's");
    }
    assert!(relists > 0, "watchers hit 410 and relisted");
    eprintln!("{} objects, {relists} relists after 410", truth.len());
}

/// A bookmark tells a client "you have everything up to here": a client
/// that resumes from it must not skip an event. A watcher that reads slowly
/// has events queued for it when the bookmark timer fires (every 10 s); the
/// bookmark must not name a revision above the events still queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookmark_never_runs_ahead_of_a_slow_watcher() {
    const CMS: &str = "/api/v1/namespaces/default/configmaps";
    let s = TestServer::start(Backend::Embedded).await;
    let http = reqwest::Client::new();
    let resp = http
        .get(format!(
            "{}{CMS}?watch=1&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=40",
            s.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // 8 MiB of events: far more than the socket buffers hold, so the
    // server's side of the watch waits on this (not yet reading) client.
    let filler = "x".repeat(10_000);
    let creates = futures::stream::iter(0..800)
        .map(|i| {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("bm-{i}")}, "data": {"d": filler}});
            let (http, url) = (http.clone(), format!("{}{CMS}", s.url));
            async move { http.post(url).json(&body).send().await.unwrap().status() }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    assert!(creates.iter().all(|c| *c == 201), "{creates:?}");
    // Two bookmark periods with the events still queued.
    tokio::time::sleep(Duration::from_secs(21)).await;

    let mut body = resp.bytes_stream();
    let (mut buf, mut newest_event, mut bookmarks, mut events) = (Vec::new(), 0, 0, 0);
    while events < 800 {
        let chunk = tokio::time::timeout(Duration::from_secs(20), body.next())
            .await
            .expect("the watch goes on")
            .expect("the stream is open")
            .unwrap();
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let ev: Value = serde_json::from_slice(&line).unwrap();
            let rv = rv_of(&ev["object"]);
            if ev["type"] == "BOOKMARK" {
                bookmarks += 1;
                assert!(
                    rv <= newest_event,
                    "a bookmark at {rv} after only the events up to {newest_event} ({events} of 800)"
                );
            } else {
                assert_eq!(ev["type"], "ADDED");
                newest_event = rv;
                events += 1;
            }
        }
    }
    assert!(bookmarks > 0, "bookmarks came while the events were queued");
    println!("{events} events, {bookmarks} bookmarks among them");
}
