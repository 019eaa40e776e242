//! The embedded store under a crash: the apiserver process is killed
//! (SIGKILL) in the middle of 1,000 creates from 8 clients; after a restart
//! on the same data directory every create that was acknowledged is there,
//! and nothing that was never sent.

use minik8s_testkit::free_port;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn start(dir: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--secure-listen",
            "",
        ])
        .args(["--data-dir", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the apiserver binary")
}

/// A client whose requests give up after a while: a request that never gets
/// an answer (seen once under a loaded CI machine, with no socket left open)
/// must fail the step, not stall the whole suite.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn wait_ready(http: &reqwest::Client, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http.get(format!("{url}/readyz")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the apiserver did not get ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An object's (or a list's) resourceVersion as the revision it is.
fn resource_version(o: &Value) -> i64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_apiserver_loses_no_acknowledged_create() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let http = client();
    let mut server = start(dir.path(), port);
    wait_ready(&http, &url).await;

    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let sent = Arc::new(Mutex::new(BTreeSet::new()));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (http, url, acked, sent) = (http.clone(), url.clone(), acked.clone(), sent.clone());
            tokio::spawn(async move {
                for i in 0..125 {
                    let name = format!("crash-{c}-{i}");
                    sent.lock().unwrap().insert(name.clone());
                    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name}, "data": {"i": i.to_string()}});
                    match http
                        .post(format!("{url}/api/v1/namespaces/default/configmaps"))
                        .json(&body)
                        .send()
                        .await
                    {
                        Ok(r) if r.status() == 201 => {
                            acked.lock().unwrap().insert(name);
                        }
                        // The server is gone: this client stops.
                        _ => return,
                    }
                }
            })
        })
        .collect();
    // Kill in the middle: once half of the creates were acknowledged.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < 500 {
        assert!(Instant::now() < deadline, "creates too slow");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    assert!(
        acked.len() < 1000,
        "the kill came in the middle of the creates"
    );

    let mut server = start(dir.path(), port);
    wait_ready(&http, &url).await;
    let list = get_json(
        &http,
        &format!("{url}/api/v1/namespaces/default/configmaps"),
    )
    .await;
    let stored: BTreeSet<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("crash-"))
        .map(str::to_string)
        .collect();
    let lost: Vec<_> = acked.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
    assert!(stored.is_subset(&sent), "only what was sent is stored");
    println!(
        "acknowledged {}, stored {} (in flight at the kill: {})",
        acked.len(),
        stored.len(),
        stored.len() - acked.len()
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A power loss in the middle of writing the database's last page: after a
/// SIGKILL, the tail of SQLite's write-ahead log (where the newest pages
/// are, in WAL mode) is cut in the middle of its last page. The store opens
/// again at a consistent revision: what one client created in order is there
/// as an unbroken prefix, the torn transaction is gone as a whole, and new
/// writes get revisions above everything listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_last_page_recovers_to_a_consistent_revision() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let http = client();
    let mut server = start(dir.path(), port);
    wait_ready(&http, &url).await;
    let create = |name: String| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"k": "v"}});
            // A request lost on the way (a timeout) is sent again; if the
            // first one was stored after all, the second finds it there.
            for attempt in 0..3 {
                match http
                    .post(format!("{url}/api/v1/namespaces/default/configmaps"))
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(r) if attempt > 0 && r.status() == 409 => return 201,
                    Ok(r) => return r.status().as_u16(),
                    Err(e) => eprintln!("create {name}, attempt {attempt}: {e}"),
                }
            }
            panic!("create {name}: no answer in three attempts")
        }
    };
    // Few enough writes that SQLite does not checkpoint (1,000 pages): they
    // all live in the write-ahead log.
    const CREATES: usize = 60;
    for i in 0..CREATES {
        assert_eq!(create(format!("torn-{i:03}")).await, 201);
    }
    server.kill().unwrap();
    server.wait().unwrap();

    let wal = dir.path().join("state.db-wal");
    let len = std::fs::metadata(&wal)
        .unwrap_or_else(|e| panic!("{}: {e}", wal.display()))
        .len();
    // A WAL frame is a 24-byte header and one 4,096-byte page: keep half of the last one.
    assert!(len > 4096 * 4, "the creates are in the WAL ({len} bytes)");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 2048)
        .unwrap();

    let mut server = start(dir.path(), port);
    wait_ready(&http, &url).await;
    let list = get_json(
        &http,
        &format!("{url}/api/v1/namespaces/default/configmaps"),
    )
    .await;
    let list_rv = resource_version(&list);
    let mut names = Vec::new();
    for item in list["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        let rv = resource_version(item);
        assert!(
            rv <= list_rv,
            "{name} at {rv} is above the list's {list_rv}"
        );
        if name.starts_with("torn-") {
            names.push(name.to_string());
        }
    }
    names.sort();
    let prefix: Vec<String> = (0..names.len()).map(|i| format!("torn-{i:03}")).collect();
    assert_eq!(names, prefix, "an unbroken prefix of the creates");
    assert!(
        names.len() < CREATES,
        "the torn transaction is gone ({} of {CREATES} kept)",
        names.len()
    );
    // The store goes on above the recovered revision.
    assert_eq!(create("after-recovery".into()).await, 201);
    let after = get_json(
        &http,
        &format!("{url}/api/v1/namespaces/default/configmaps/after-recovery"),
    )
    .await;
    let after_rv = resource_version(&after);
    assert!(after_rv > list_rv, "new revision {after_rv} > {list_rv}");
    println!(
        "kept {} of {CREATES} creates after tearing the WAL's last page; revision {list_rv}",
        names.len()
    );
    server.kill().unwrap();
    server.wait().unwrap();
}
