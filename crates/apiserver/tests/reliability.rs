//! Defects found by probing the apiserver from outside, each with its
//! regression test, on both stores: media types, fieldValidation, oversized
//! bodies, resource and env validation, paged lists, unconditional patches
//! under contention, and readiness that follows the store.

use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[macro_use]
mod common;
use common::{assert_status, store_snapshot, Http, Kubectl};

both_backends!(
    requests_are_refused_as_kubernetes_refuses_them,
    lists_come_in_consistent_pages,
    a_large_list_arrives_whole,
    unconditional_patches_never_conflict,
    streaming_list_sends_initial_events_then_a_bookmark,
    lists_read_at_the_resource_version_asked_for,
);

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn configmap(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"n": name}}})
        .to_string()
}

async fn requests_are_refused_as_kubernetes_refuses_them(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    let before = store_snapshot(&s).await;

    let got = h.post(CMS, "text/plain", &configmap("plain")).await;
    assert_status(&got, 415, "UnsupportedMediaType");
    assert_eq!(got.1["message"], "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf");

    let got = h
        .post(
            &format!("{CMS}?fieldValidation=Frob"),
            "application/json",
            &configmap("frob"),
        )
        .await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(got.1["message"], "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Frob\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");

    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"x": "a".repeat(4 * 1024 * 1024)}});
    let got = h.post(CMS, "application/json", &big.to_string()).await;
    assert_status(&got, 413, "RequestEntityTooLarge");

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "env": [{"name": "1BAD", "value": "x"}],
            "resources": {"requests": {"memory": "-1Gi", "cpu": "2"}, "limits": {"cpu": "1"}}}]}});
    let got = h
        .post(
            "/api/v1/namespaces/default/pods",
            "application/json",
            &pod.to_string(),
        )
        .await;
    assert_status(&got, 422, "Invalid");
    let fields: Vec<&str> = got.1["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].env[0].name",
            "spec.containers[0].resources.requests[memory]",
            "spec.containers[0].resources.requests[cpu]"
        ]
    );
    assert!(got.1["message"]
        .as_str()
        .unwrap()
        .contains("Invalid value: \"2\": must be less than or equal to cpu limit of 1"));
    assert_eq!(store_snapshot(&s).await, before, "nothing was stored");

    // Unknown fields: a warning by default, an error under Strict, silence under Ignore.
    let unknown = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warned"}, "bogus": 1});
    let resp = reqwest::Client::new()
        .post(format!("{}{CMS}", s.url))
        .header("Content-Type", "application/json")
        .body(unknown.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let warning = resp.headers().get("warning").unwrap().to_str().unwrap();
    assert_eq!(warning, "299 - \"unknown field \\\"bogus\\\"\"");
    let got = h
        .post(
            &format!("{CMS}?fieldValidation=Strict"),
            "application/json",
            &unknown.to_string(),
        )
        .await;
    assert_status(&got, 400, "BadRequest");
    assert!(got.1["message"]
        .as_str()
        .unwrap()
        .contains("strict decoding error: unknown field \"bogus\""));

    // Duplicate fields, as Go's strict decoder reports them: an error under
    // Strict, a warning by default (the last value wins).
    let duplicated = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup", "name": "dup"},
        "data": {"a": "1", "a": "2"}}"#;
    let got = h
        .post(
            &format!("{CMS}?fieldValidation=Strict"),
            "application/json",
            duplicated,
        )
        .await;
    assert_status(&got, 400, "BadRequest");
    assert_eq!(
        got.1["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", duplicate field \"data.a\""
    );
    let resp = reqwest::Client::new()
        .post(format!("{}{CMS}", s.url))
        .header("Content-Type", "application/json")
        .body(duplicated)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|w| w.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"duplicate field \\\"metadata.name\\\"\"",
            "299 - \"duplicate field \\\"data.a\\\"\""
        ]
    );
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["data"]["a"], "2");
}

async fn list_page(h: &Http, query: &str) -> (Vec<String>, Value) {
    let (code, body) = h.get(&format!("{CMS}?{query}")).await;
    assert_eq!(code, 200, "{body}");
    let names = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    (names, body["metadata"].clone())
}

async fn lists_come_in_consistent_pages(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    for i in 0..7 {
        assert_eq!(
            h.post(CMS, "application/json", &configmap(&format!("cm-{i}")))
                .await
                .0,
            201
        );
    }
    let (names, meta) = list_page(&h, "limit=3").await;
    assert_eq!(names, ["cm-0", "cm-1", "cm-2"]);
    assert_eq!(meta["remainingItemCount"], 4);
    let first_rv = meta["resourceVersion"].clone();
    let token = meta["continue"].as_str().unwrap().to_string();

    // Changes after the first page do not show on the next ones: one snapshot.
    assert_eq!(
        h.post(CMS, "application/json", &configmap("cm-new"))
            .await
            .0,
        201
    );
    let deleted = h
        .call(reqwest::Method::DELETE, &format!("{CMS}/cm-4"), "", "")
        .await;
    assert_eq!(deleted.0, 200);
    let (names, meta) = list_page(&h, &format!("limit=3&continue={token}")).await;
    assert_eq!(names, ["cm-3", "cm-4", "cm-5"]);
    assert_eq!(meta["resourceVersion"], first_rv);
    let token = meta["continue"].as_str().unwrap().to_string();
    let (names, meta) = list_page(&h, &format!("limit=3&continue={token}")).await;
    assert_eq!(names, ["cm-6"]);
    assert!(meta.get("continue").is_none(), "the last page: {meta}");

    // With a selector, a next page only when more items match.
    let (names, meta) = list_page(&h, "limit=1&labelSelector=n%20in%20(cm-1,cm-new)").await;
    assert_eq!(names, ["cm-1"]);
    assert!(meta.get("remainingItemCount").is_none());
    let token = meta["continue"].as_str().unwrap().to_string();
    let (names, meta) = list_page(
        &h,
        &format!("limit=1&labelSelector=n%20in%20(cm-1,cm-new)&continue={token}"),
    )
    .await;
    assert_eq!(names, ["cm-new"]);
    assert!(meta.get("continue").is_none());

    // Bad tokens are 400; a token whose revision was compacted is 410 Expired.
    let got = h.get(&format!("{CMS}?limit=1&continue=garbage")).await;
    assert_status(&got, 400, "BadRequest");
    let (_, meta) = list_page(&h, "limit=1").await;
    let token = meta["continue"].as_str().unwrap().to_string();
    for i in 0..5 {
        h.post(CMS, "application/json", &configmap(&format!("later-{i}")))
            .await;
    }
    let now = s.server.store.current_revision().await.unwrap();
    s.server.store.compact(now).await.unwrap();
    let got = h.get(&format!("{CMS}?limit=1&continue={token}")).await;
    assert_status(&got, 410, "Expired");

    // The real kubectl pages with --chunk-size and shows every item.
    let out = Kubectl::new(&s.url)
        .ok(&["get", "configmaps", "--chunk-size=2", "-o", "name"])
        .await;
    assert_eq!(
        out.lines().filter(|l| l.starts_with("configmap/")).count(),
        12,
        "{out}"
    );
}

/// A LIST of more than a MiB is streamed in chunks as it is written; it
/// arrives as one document with every item, each at its resourceVersion,
/// and the same items page by page.
async fn a_large_list_arrives_whole(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    let big = "x".repeat(8 << 10);
    for i in 0..300 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i:03}")}, "data": {"pad": big}});
        assert_eq!(
            h.post(CMS, "application/json", &cm.to_string()).await.0,
            201
        );
    }
    let (names, meta) = list_page(&h, "").await;
    assert_eq!(names.len(), 300);
    assert!(meta.get("continue").is_none(), "{meta}");
    let (code, all) = h.get(CMS).await;
    assert_eq!(code, 200);
    assert_eq!(all["kind"], "ConfigMapList");
    for item in all["items"].as_array().unwrap().iter().step_by(50) {
        let name = item["metadata"]["name"].as_str().unwrap();
        let (_, one) = h.get(&format!("{CMS}/{name}")).await;
        assert_eq!(
            item["metadata"]["resourceVersion"],
            one["metadata"]["resourceVersion"]
        );
        assert_eq!(item["data"], one["data"]);
    }
    let mut paged = Vec::new();
    let mut query = "limit=120".to_string();
    loop {
        let (names, meta) = list_page(&h, &query).await;
        paged.extend(names);
        let Some(token) = meta["continue"].as_str() else {
            break;
        };
        query = format!("limit=120&continue={token}");
    }
    assert_eq!(paged, names);
}

/// `resourceVersion` with `resourceVersionMatch` on a LIST, as Kubernetes
/// serves them: `Exact` reads that revision (410 once compacted), no match
/// or `NotOlderThan` read the latest, a version not yet reached is 504
/// `ResourceVersionTooLarge` after a short wait, a malformed one 400.
async fn lists_read_at_the_resource_version_asked_for(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    assert_eq!(
        h.post(CMS, "application/json", &configmap("cm-a")).await.0,
        201
    );
    let (_, meta) = list_page(&h, "").await;
    let then = meta["resourceVersion"].as_str().unwrap().to_string();
    assert_eq!(
        h.post(CMS, "application/json", &configmap("cm-b")).await.0,
        201
    );

    let (names, meta) = list_page(
        &h,
        &format!("resourceVersion={then}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(names, ["cm-a"], "the list as it was at {then}");
    assert_eq!(meta["resourceVersion"], then.as_str());
    for query in [
        format!("resourceVersion={then}"),
        format!("resourceVersion={then}&resourceVersionMatch=NotOlderThan"),
    ] {
        let (names, _) = list_page(&h, &query).await;
        assert_eq!(names, ["cm-a", "cm-b"], "{query}: not older than {then}");
    }

    let current = s.server.store.current_revision().await.unwrap();
    s.server.store.compact(current).await.unwrap();
    let got = h
        .get(&format!(
            "{CMS}?resourceVersion={then}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_status(&got, 410, "Expired");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {then} (")),
        "{}",
        got.1
    );

    let ahead = current + 1000;
    let started = std::time::Instant::now();
    let got = h.get(&format!("{CMS}?resourceVersion={ahead}")).await;
    assert_status(&got, 504, "Timeout");
    assert_eq!(
        got.1["message"],
        format!("Too large resource version: {ahead}, current: {current}")
    );
    assert_eq!(
        got.1["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "waited for the store first"
    );

    let got = h.get(&format!("{CMS}?resourceVersion=abc")).await;
    assert_status(&got, 400, "BadRequest");
}

async fn unconditional_patches_never_conflict(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    assert_eq!(
        h.post(CMS, "application/json", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hot"}, "data": {}}).to_string()).await.0,
        201
    );
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let h = Http::new(&s.url);
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for i in 0..40 {
                    let (ct, body) = match t % 3 {
                        0 => ("application/merge-patch+json", json!({"data": {format!("k{t}"): i.to_string()}})),
                        1 => ("application/strategic-merge-patch+json", json!({"data": {format!("k{t}"): i.to_string()}})),
                        _ => ("application/json-patch+json", json!([{"op": "add", "path": format!("/data/k{t}"), "value": i.to_string()}])),
                    };
                    let got = h
                        .call(reqwest::Method::PATCH, &format!("{CMS}/hot"), ct, &body.to_string())
                        .await;
                    codes.push(got.0);
                }
                codes
            })
        })
        .collect();
    for t in tasks {
        let codes = t.await.unwrap();
        assert!(
            codes.iter().all(|c| *c == 200),
            "every unconditional patch applies: {codes:?}"
        );
    }
    let (_, cm) = h.get(&format!("{CMS}/hot")).await;
    for t in 0..8 {
        assert_eq!(cm["data"][format!("k{t}")], "39", "{cm}");
    }
}

/// `/readyz` reads the store: a hung etcd makes it fail, with the failing
/// check named under `?verbose`, and it recovers when etcd does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_store() {
    let s = TestServer::start(Backend::Etcd).await;
    let http = reqwest::Client::new();
    let get = |path: &str| {
        let req = http.get(format!("{}{path}", s.url));
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    assert_eq!(get("/readyz").await, (200, "ok".to_string()));
    let (code, text) = get("/readyz?verbose").await;
    assert_eq!(code, 200);
    assert_eq!(text, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]shutdown ok\nreadyz check passed\n");

    let etcd = s.etcd().unwrap();
    etcd.pause();
    let (code, text) = get("/readyz?verbose").await;
    assert_eq!(code, 500, "{text}");
    assert!(text.contains("[-]etcd failed: reason withheld\n"), "{text}");
    assert!(text.ends_with("readyz check failed\n"), "{text}");
    assert_eq!(get("/livez").await.0, 500);
    assert_eq!(get("/readyz/etcd").await.0, 500);
    let (code, text) = get("/readyz?exclude=etcd&exclude=etcd-readiness").await;
    assert_eq!((code, text.as_str()), (200, "ok"));
    assert_eq!(get("/readyz/nosuchcheck").await.0, 404);

    etcd.resume();
    let deadline = Instant::now() + Duration::from_secs(20);
    while get("/readyz").await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "/readyz did not recover with etcd"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Idle connections are closed after `--idle-connection-timeout`, at most
/// `--max-connections` are open at once, and the server keeps answering
/// while clients hoard connections; a quiet watch is not idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_bounded() {
    use std::io::Read;
    let s = TestServer::start_with(Backend::Embedded, |c| {
        c.idle_connection_timeout = 1;
        c.max_connections = 20;
    })
    .await;
    let addr = s.url.trim_start_matches("http://").to_string();
    // 40 clients connect and send nothing.
    let hoarders: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let started = Instant::now();
    let closed = tokio::task::spawn_blocking(move || {
        let mut closed = 0;
        for mut c in hoarders {
            c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let mut buf = [0u8; 16];
            if matches!(c.read(&mut buf), Ok(0)) {
                closed += 1;
            }
        }
        closed
    });
    // Meanwhile the server still answers (once a slot frees up).
    let http = reqwest::Client::new();
    let health = tokio::time::timeout(
        Duration::from_secs(10),
        http.get(format!("{}/healthz", s.url)).send(),
    )
    .await
    .expect("/healthz answers while clients hoard connections")
    .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(
        closed.await.unwrap(),
        40,
        "every idle connection was closed"
    );
    assert!(started.elapsed() < Duration::from_secs(12));

    // A watch in flight is not idle, however quiet.
    let mut watch = http
        .get(format!("{}{CMS}?watch=1&timeoutSeconds=10", s.url))
        .send()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let h = Http::new(&s.url);
    assert_eq!(
        h.post(CMS, "application/json", &configmap("late")).await.0,
        201
    );
    let chunk = tokio::time::timeout(Duration::from_secs(5), watch.chunk())
        .await
        .expect("the quiet watch is still open")
        .unwrap()
        .expect("an event");
    assert!(String::from_utf8_lossy(&chunk).contains("\"late\""));
}

/// `--event-ttl`: Events go away that long after their last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_expire_after_the_event_ttl() {
    let s = TestServer::start_with(Backend::Embedded, |c| {
        c.event_ttl = Duration::from_secs(3);
    })
    .await;
    let h = Http::new(&s.url);
    let events = "/api/v1/namespaces/default/events";
    let event = |name: &str| {
        let now = chrono::Utc::now().to_rfc3339();
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Test", "message": "m", "type": "Normal", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now})
        .to_string()
    };
    assert_eq!(
        h.post(events, "application/json", &event("once")).await.0,
        201
    );
    assert_eq!(
        h.post(events, "application/json", &event("again")).await.0,
        201
    );
    let started = Instant::now();
    let exists = |name: &'static str| {
        let h = Http::new(&s.url);
        async move { h.get(&format!("{events}/{name}")).await.0 == 200 }
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A repeat (the recorder's count bump) is a write: it starts the ttl again.
    let bump = json!({"count": 2}).to_string();
    let patched = h
        .call(
            reqwest::Method::PATCH,
            &format!("{events}/again"),
            "application/merge-patch+json",
            &bump,
        )
        .await;
    assert_eq!(patched.0, 200);
    while exists("once").await {
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "the event was not deleted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "not before its ttl"
    );
    assert!(exists("again").await, "the event written again lives on");
    while exists("again").await {
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "the bumped event never expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Overload: past `--max-requests-inflight` reads a client gets 429 with
/// `Retry-After` at once (administrators never do), and minik8s's client
/// retries after the wait until it gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_answers_429_and_clients_retry() {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), "alice-token,alice,1001,\n").unwrap();
    let token_path = tokens.into_temp_path().keep().unwrap();
    let s = TestServer::start_with(Backend::Embedded, |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", minik8s_testkit::free_port()));
        c.token_auth_file = Some(token_path);
        c.authorization_mode = "AlwaysAllow".into();
        c.max_requests_inflight = 1;
    })
    .await;
    let https = format!(
        "https://127.0.0.1:{}",
        s.server.secure_addr.get().unwrap().port()
    );
    let ca = std::fs::read_to_string(s.config.data_dir.join("pki/ca.crt")).unwrap();
    // Enough objects that a list takes a moment.
    let admin = Http::new(&s.url);
    for i in 0..300 {
        admin
            .post(CMS, "application/json", &configmap(&format!("load-{i}")))
            .await;
    }
    let raw = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let lists: Vec<_> = (0..30)
        .map(|_| {
            let req = raw
                .get(format!("{https}{CMS}"))
                .bearer_auth("alice-token")
                .send();
            tokio::spawn(async move {
                let resp = req.await.unwrap();
                let retry_after = resp.headers().get("retry-after").cloned();
                let code = resp.status().as_u16();
                (code, retry_after, resp.text().await.unwrap())
            })
        })
        .collect();
    let mut refused = 0;
    for l in lists {
        let (code, retry_after, body) = l.await.unwrap();
        match code {
            200 => {}
            429 => {
                refused += 1;
                assert_eq!(retry_after.unwrap(), "1");
                let status: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(status["reason"], "TooManyRequests");
                assert_eq!(
                    status["message"],
                    "Too many requests, please try again later."
                );
                assert_eq!(status["details"]["retryAfterSeconds"], 1);
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(refused > 0, "30 concurrent lists against a limit of 1");

    // The administrator (system:masters, on the loopback port) is never refused.
    let admin_lists: Vec<_> = (0..10)
        .map(|_| {
            let h = Http::new(&s.url);
            tokio::spawn(async move { h.get(CMS).await.0 })
        })
        .collect();
    for l in admin_lists {
        assert_eq!(l.await.unwrap(), 200);
    }

    // minik8s's client waits as told and retries: every list gets through.
    let target = minik8s_client::config::Target {
        server: https.clone(),
        namespace: "default".into(),
        credentials: minik8s_client::config::Credentials {
            ca_pem: Some(ca.clone()),
            token: Some("alice-token".into()),
            ..Default::default()
        },
    };
    let client = minik8s_client::Client::for_target(&target).unwrap();
    let lists: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get_json(CMS).await })
        })
        .collect();
    for l in lists {
        let list = l
            .await
            .unwrap()
            .expect("the client retries until it gets through");
        assert_eq!(list["items"].as_array().unwrap().len(), 300);
    }
}

/// The streaming list (`sendInitialEvents=true`): the current objects as
/// ADDED, a bookmark marking the end of the initial state, then changes.
async fn streaming_list_sends_initial_events_then_a_bookmark(backend: Backend) {
    use futures::StreamExt;
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    for name in ["s-1", "s-2", "s-3"] {
        assert_eq!(
            h.post(CMS, "application/json", &configmap(name)).await.0,
            201
        );
    }
    let got = h
        .get(&format!(
            "{CMS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
        ))
        .await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(got.1["message"], "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
    // On a plain LIST the option is refused, as Kubernetes refuses it.
    let got = h.get(&format!("{CMS}?sendInitialEvents=true")).await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(got.1["message"], "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list");
    let got = h.get(&format!("{CMS}?resourceVersionMatch=Exact")).await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(got.1["message"], "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
    assert_eq!(
        h.get(&format!(
            "{CMS}?resourceVersion=0&resourceVersionMatch=NotOlderThan"
        ))
        .await
        .0,
        200
    );

    let resp = reqwest::Client::new()
        .get(format!("{}{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut events: Vec<Value> = Vec::new();
    let mut next = async || -> Value {
        loop {
            if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                return serde_json::from_slice(&line).unwrap();
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("a watch event in time")
                .expect("the stream is open")
                .unwrap();
            buf.extend_from_slice(&chunk);
        }
    };
    for _ in 0..4 {
        events.push(next().await);
    }
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    let bookmark = &events[3]["object"];
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let (_, list) = h.get(CMS).await;
    assert_eq!(
        bookmark["metadata"]["resourceVersion"],
        list["metadata"]["resourceVersion"]
    );
    assert_eq!(
        h.post(CMS, "application/json", &configmap("s-4")).await.0,
        201
    );
    let added = next().await;
    assert_eq!(
        (
            added["type"].as_str(),
            added["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("s-4"))
    );
}

/// Two apiservers on one etcd (an HA control plane): a client given both
/// keeps working when the one it talks to goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fails_over_to_another_apiserver() {
    let mut first = TestServer::start(Backend::Etcd).await;
    let etcd = first.config.etcd_servers.clone().unwrap();
    let second = TestServer::start_with(Backend::Embedded, |c| {
        c.etcd_servers = Some(etcd);
    })
    .await;
    let client = minik8s_client::Client::new(&format!("{},{}", first.url, second.url));
    let cms = client.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::ConfigMap>(),
        Some("default"),
    );
    cms.create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"}}))
        .await
        .unwrap();
    assert_eq!(client.base_url(), first.url);
    first.stop_http().await;
    // The next requests go to the second apiserver, which sees the same data.
    let got = cms
        .get("before")
        .await
        .expect("served by the second apiserver");
    assert_eq!(got["metadata"]["name"], "before");
    assert_eq!(client.base_url(), second.url);
    cms.create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}}))
        .await
        .unwrap();
    let list = cms
        .list(&minik8s_client::ListParams::default())
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
}

/// Two apiservers on one etcd (as in the HA control plane, each at its own
/// address on the same port): the `kubernetes` Service's Endpoints and
/// EndpointSlice list both; one that shuts down takes itself out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_service_lists_every_live_apiserver() {
    let port = minik8s_testkit::free_port();
    let pki = tempfile::tempdir().unwrap();
    let secure_at = |ip: &'static str| {
        let pki = pki.path().to_path_buf();
        move |c: &mut apiserver::Config| {
            c.secure_listen = Some(format!("{ip}:{port}"));
            c.advertise_address = Some(ip.parse().unwrap());
            c.pki_dir = Some(pki);
        }
    };
    let mut first = TestServer::start_with(Backend::Etcd, secure_at("127.0.0.2")).await;
    let etcd = first.config.etcd_servers.clone().unwrap();
    let second = TestServer::start_with(Backend::Embedded, |c| {
        secure_at("127.0.0.3")(c);
        c.etcd_servers = Some(etcd);
    })
    .await;
    let http = Http::new(&second.url);
    async fn addresses(http: &Http) -> (Vec<String>, Vec<String>, Value) {
        let (_, ep) = http
            .get("/api/v1/namespaces/default/endpoints/kubernetes")
            .await;
        let (_, slice) = http
            .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
            .await;
        let strings = |list: &Value, pick: fn(&Value) -> &Value| -> Vec<String> {
            list.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| pick(x).as_str())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        (
            strings(&ep["subsets"][0]["addresses"], |x| &x["ip"]),
            strings(&slice["endpoints"], |x| &x["addresses"][0]),
            ep["subsets"][0]["ports"][0]["port"].clone(),
        )
    }
    let both = vec!["127.0.0.2".to_string(), "127.0.0.3".to_string()];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ips, slice_ips, p) = addresses(&http).await;
        if ips == both && slice_ips == both && p == json!(port) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "both apiservers in the endpoints: {ips:?} {slice_ips:?} {p}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The first one stops: it removes its Lease and its address at once.
    first.stop_http().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (ips, slice_ips, _) = addresses(&http).await;
        if ips == ["127.0.0.3"] && slice_ips == ["127.0.0.3"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stopped apiserver left the endpoints: {ips:?} {slice_ips:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
