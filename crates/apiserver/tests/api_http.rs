//! The apiserver over HTTP, on both stores: bad input, subresources, deletion,
//! watch semantics, 410 and the informer's re-list, and a randomized watch test.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::Service;
use minik8s_api::lws::LeaderWorkerSet;
use minik8s_api::registry;
use minik8s_client::informer::Informer;
use minik8s_client::{Api, Client, DeleteParams, ListParams, WatchEvent};
use minik8s_testkit::{Backend, TestServer};
use rand::Rng;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

#[macro_use]
mod common;
use common::{assert_status, store_snapshot, Http};

both_backends!(
    bad_input_is_refused_and_changes_nothing,
    status_scale_and_generation,
    deletion_graceful_and_finalizers,
    services_get_unique_cluster_ips,
    watch_sees_changes_with_selectors_and_bookmarks,
    watch_too_old_is_gone_and_informer_relists,
    randomized_watchers_see_every_event_once_in_order,
    concurrent_writers_see_only_the_conflicts_they_asked_for,
);

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

async fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let s = TestServer::start(backend).await;
    let h = Http::new(&s.url);
    let pods = "/api/v1/namespaces/default/pods";
    let created = h
        .post(pods, "application/json", &pod("keep").to_string())
        .await;
    assert_eq!(created.0, 201);
    let before = store_snapshot(&s).await;

    assert_status(
        &h.post(pods, "application/yaml", "metadata: {name: [x")
            .await,
        400,
        "BadRequest",
    );
    assert_status(
        &h.post(pods, "application/json", "{\"metadata\": ").await,
        400,
        "BadRequest",
    );
    assert_status(
        &h.post("/api/v1/namespaces/default/frobs", "application/json", "{}")
            .await,
        404,
        "NotFound",
    );
    // A protobuf body without its typeMeta, and one that is not protobuf.
    assert_status(
        &h.post(pods, "application/vnd.kubernetes.protobuf", "k8s\0")
            .await,
        400,
        "BadRequest",
    );
    assert_status(
        &h.post(
            pods,
            "application/vnd.kubernetes.protobuf",
            "{\"kind\": \"Pod\"}",
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &h.post(pods, "application/cbor", "\u{a0}").await,
        415,
        "UnsupportedMediaType",
    );

    let no_containers =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": {}});
    let r = h
        .post(pods, "application/json", &no_containers.to_string())
        .await;
    assert_status(&r, 422, "Invalid");
    assert_eq!(
        r.1["message"],
        "Pod \"bad\" is invalid: spec.containers: Required value"
    );
    assert_eq!(
        r.1["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"})
    );

    let wrong_kind = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}});
    assert_status(
        &h.post(pods, "application/json", &wrong_kind.to_string())
            .await,
        400,
        "BadRequest",
    );

    let dup = h
        .post(pods, "application/json", &pod("keep").to_string())
        .await;
    assert_status(&dup, 409, "AlreadyExists");
    assert_eq!(dup.1["message"], "pods \"keep\" already exists");

    let mut stale = created.1.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"]["changed"] = json!("yes");
    let r = h
        .call(
            reqwest::Method::PUT,
            &format!("{pods}/keep"),
            "application/json",
            &stale.to_string(),
        )
        .await;
    assert_status(&r, 409, "Conflict");
    assert!(r.1["message"]
        .as_str()
        .unwrap()
        .contains("the object has been modified"));

    let r = h
        .call(
            reqwest::Method::PATCH,
            &format!("{pods}/missing"),
            "application/merge-patch+json",
            "{}",
        )
        .await;
    assert_status(&r, 404, "NotFound");
    let r = h
        .post(
            "/api/v1/namespaces/nope/pods",
            "application/json",
            &pod("x").to_string(),
        )
        .await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.1["message"], "namespaces \"nope\" not found");
    let r = h
        .get("/api/v1/namespaces/default/pods?labelSelector=a%20in%20(")
        .await;
    assert_status(&r, 400, "BadRequest");
    let r = h.get("/api/v1/pods?fieldSelector=spec.bogus%3Dx").await;
    assert_status(&r, 400, "BadRequest");
    let strict = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo"}, "spec": {"contaners": [], "containers": [{"name": "c", "image": "i"}]}});
    let r = h
        .post(
            &format!("{pods}?fieldValidation=Strict"),
            "application/json",
            &strict.to_string(),
        )
        .await;
    assert_status(&r, 400, "BadRequest");
    assert!(
        r.1["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.contaners\""),
        "{}",
        r.1
    );
    let r = h
        .call(
            reqwest::Method::DELETE,
            "/api/v1/namespaces/default",
            "application/json",
            "{}",
        )
        .await;
    assert_status(&r, 403, "Forbidden");

    assert_eq!(
        store_snapshot(&s).await,
        before,
        "refused requests must not change the store"
    );
    let (code, obj) = h.get(&format!("{pods}/keep")).await;
    assert_eq!((code, obj), (200, created.1));
}

async fn status_scale_and_generation(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let rs = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let manifest = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"replicas": 99}});
    let created = rs.create(&manifest).await.unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    // Status is not settable on create: it starts empty, with the fields Go
    // always writes as zeros.
    assert_eq!(created["status"], json!({"replicas": 0}));

    // Status subresource: only status changes, generation stays.
    let mut st = created.clone();
    st["status"] = json!({"replicas": 1, "readyReplicas": 1});
    st["spec"]["replicas"] = json!(7);
    let after = rs.replace_sub("web", "status", &st).await.unwrap();
    assert_eq!(after["status"]["readyReplicas"], 1);
    assert_eq!(after["spec"]["replicas"], 1);
    assert_eq!(after["metadata"]["generation"], 1);

    // Main resource: status ignored, spec change bumps generation; label change does not.
    let mut main = after.clone();
    main["status"] = json!({"replicas": 42});
    main["metadata"]["labels"] = json!({"x": "y"});
    let after2 = rs.replace("web", &main).await.unwrap();
    assert_eq!(after2["status"]["replicas"], 1);
    assert_eq!(after2["metadata"]["generation"], 1);
    let after3 = rs
        .patch(
            "web",
            None,
            "application/strategic-merge-patch+json",
            &json!({"spec": {"replicas": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(after3["metadata"]["generation"], 2);

    // Scale subresource.
    let scale = rs.get_sub("web", "scale").await.unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(
        scale["status"],
        json!({"replicas": 1, "selector": "app=web"})
    );
    let scaled = rs
        .patch(
            "web",
            Some("scale"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": 5}}),
        )
        .await
        .unwrap();
    assert_eq!(scaled["spec"]["replicas"], 5);
    assert_eq!(rs.get("web").await.unwrap()["spec"]["replicas"], 5);
    let mut stale = scale.clone();
    stale["spec"]["replicas"] = json!(9);
    let err = rs.replace_sub("web", "scale", &stale).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let err = rs
        .patch(
            "web",
            Some("scale"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": -1}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.api().unwrap().code, 422);

    // A no-op update writes nothing.
    let current = rs.get("web").await.unwrap();
    let same = rs.replace("web", &current).await.unwrap();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        current["metadata"]["resourceVersion"]
    );

    // LWS scale reports the hpaPodSelector.
    let lws = client.dynamic(registry::of::<LeaderWorkerSet>(), Some("default"));
    let l = lws
        .create(&json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}}))
        .await
        .unwrap();
    assert_eq!(
        l["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxUnavailable"],
        1
    );
    lws.patch("lws", Some("status"), "application/merge-patch+json", &json!({"status": {"replicas": 2, "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=lws,leaderworkerset.sigs.k8s.io/worker-index=0"}})).await.unwrap();
    let sc = lws
        .patch(
            "lws",
            Some("scale"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": 3}}),
        )
        .await
        .unwrap();
    assert_eq!(
        sc["status"]["selector"],
        "leaderworkerset.sigs.k8s.io/name=lws,leaderworkerset.sigs.k8s.io/worker-index=0"
    );
    assert_eq!(lws.get("lws").await.unwrap()["spec"]["replicas"], 3);
}

async fn deletion_graceful_and_finalizers(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));

    // Finalizers hold the object until they are removed.
    let mut p = pod("fin");
    p["metadata"]["finalizers"] = json!(["example.com/hold"]);
    pods.create(&p).await.unwrap();
    let deleting = pods.delete("fin", &DeleteParams::default()).await.unwrap();
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    assert!(pods.get("fin").await.is_ok());
    let err = pods
        .patch(
            "fin",
            None,
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": ["example.com/hold", "more"]}}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.api().unwrap().code,
        422,
        "no new finalizers while deleting"
    );
    pods.patch(
        "fin",
        None,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await
    .unwrap();
    assert!(pods.get("fin").await.unwrap_err().is_not_found());

    // A bound pod is deleted gracefully: the kubelet confirms with grace 0.
    let mut bound = pod("bound");
    bound["spec"]["nodeName"] = json!("n1");
    pods.create(&bound).await.unwrap();
    let d = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(d["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(pods.get("bound").await.is_ok());
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(pods.get("bound").await.unwrap_err().is_not_found());

    // Preconditions.
    pods.create(&pod("pre")).await.unwrap();
    let err = pods
        .delete(
            "pre",
            &DeleteParams {
                precondition_uid: Some("other".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict());

    // Binding sets the node once.
    pods.create(&pod("tobind")).await.unwrap();
    let h = Http::new(&s.url);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "tobind"}, "target": {"kind": "Node", "name": "n2"}});
    assert_eq!(
        h.post(
            "/api/v1/namespaces/default/pods/tobind/binding",
            "application/json",
            &binding.to_string()
        )
        .await
        .0,
        201
    );
    let bound = pods.get("tobind").await.unwrap();
    assert_eq!(bound["spec"]["nodeName"], "n2");
    assert_eq!(bound["status"]["conditions"][0]["type"], "PodScheduled");
    assert_status(
        &h.post(
            "/api/v1/namespaces/default/pods/tobind/binding",
            "application/json",
            &binding.to_string(),
        )
        .await,
        409,
        "Conflict",
    );

    // A deleted namespace is Terminating and takes no new content (the
    // controller manager's namespace controller empties and removes it).
    let nss = client.dynamic(registry::of::<Namespace>(), None);
    nss.create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await
        .unwrap();
    let team = client.dynamic(registry::of::<Pod>(), Some("team"));
    team.create(&pod("a")).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let err = team.create(&pod("b")).await.unwrap_err();
    assert_eq!(
        err.api().map(|e| e.code),
        Some(403),
        "no new content in a terminating namespace"
    );
    assert_eq!(
        nss.get("team").await.unwrap()["status"]["phase"],
        "Terminating"
    );
}

async fn services_get_unique_cluster_ips(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let svcs = client.dynamic(registry::of::<Service>(), Some("default"));
    let svc = |name: &str, ip: Option<&str>| {
        let mut v = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
        if let Some(ip) = ip {
            v["spec"]["clusterIP"] = json!(ip);
        }
        v
    };
    let a = svcs.create(&svc("a", None)).await.unwrap();
    let b = svcs.create(&svc("b", None)).await.unwrap();
    let (ia, ib) = (
        a["spec"]["clusterIP"].as_str().unwrap(),
        b["spec"]["clusterIP"].as_str().unwrap(),
    );
    assert_ne!(ia, ib);
    assert!(ia.starts_with("10.9") && ib.starts_with("10.9"));
    assert_eq!(a["spec"]["ports"][0]["targetPort"], 80);
    let err = svcs.create(&svc("c", Some(ia))).await.unwrap_err();
    assert_eq!(err.api().unwrap().code, 422);
    assert!(
        err.to_string().contains("provided IP is already allocated"),
        "{err}"
    );
    let err = svcs
        .create(&svc("d", Some("192.168.0.1")))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not in the valid range"), "{err}");
    let mut change = a.clone();
    change["spec"]["clusterIP"] = json!("10.96.0.200");
    assert_eq!(
        svcs.replace("a", &change)
            .await
            .unwrap_err()
            .api()
            .unwrap()
            .code,
        422
    );
    svcs.delete("a", &DeleteParams::default()).await.unwrap();
    let again = svcs.create(&svc("e", Some(ia))).await.unwrap();
    assert_eq!(
        again["spec"]["clusterIP"], ia,
        "a released IP can be taken again"
    );
    let headless = svcs.create(&svc("h", Some("None"))).await.unwrap();
    assert_eq!(headless["spec"]["clusterIP"], "None");
    let mut np = svc("np", None);
    np["spec"]["type"] = json!("NodePort");
    let np = svcs.create(&np).await.unwrap();
    let port = np["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&port));

    // Type changes take and give back what each type needs, as Kubernetes does.
    let mut to_cluster_ip = np.clone();
    to_cluster_ip["spec"]["type"] = json!("ClusterIP");
    let now = svcs.replace("np", &to_cluster_ip).await.unwrap();
    assert!(now["spec"]["ports"][0].get("nodePort").is_none(), "{now}");
    assert!(now["spec"].get("externalTrafficPolicy").is_none(), "{now}");
    let mut reuse = svc("np2", None);
    reuse["spec"]["type"] = json!("NodePort");
    reuse["spec"]["ports"][0]["nodePort"] = json!(port);
    svcs.create(&reuse)
        .await
        .expect("the node port was given back");
    let ip = now["spec"]["clusterIP"].as_str().unwrap().to_string();
    let mut external = now.clone();
    external["spec"]["type"] = json!("ExternalName");
    external["spec"]["externalName"] = json!("db.example.org");
    let external = svcs.replace("np", &external).await.unwrap();
    assert!(external["spec"].get("clusterIP").is_none(), "{external}");
    svcs.create(&svc("ip-again", Some(&ip)))
        .await
        .expect("the ClusterIP was given back");
    let mut back = external.clone();
    back["spec"]["type"] = json!("ClusterIP");
    back["spec"].as_object_mut().unwrap().remove("externalName");
    let back = svcs.replace("np", &back).await.unwrap();
    let new_ip = back["spec"]["clusterIP"].as_str().unwrap();
    assert!(new_ip.starts_with("10.9") && new_ip != ip, "{back}");
    assert_eq!(back["spec"]["clusterIPs"], json!([new_ip]));
}

async fn next_event(stream: &mut minik8s_client::rest::WatchStream<Value>) -> WatchEvent<Value> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("event within 10 s")
        .expect("stream open")
        .expect("event")
}

fn describe(ev: &WatchEvent<Value>) -> (String, String) {
    match ev {
        WatchEvent::Added(o) => (
            "ADDED".into(),
            o["metadata"]["name"].as_str().unwrap().into(),
        ),
        WatchEvent::Modified(o) => (
            "MODIFIED".into(),
            o["metadata"]["name"].as_str().unwrap().into(),
        ),
        WatchEvent::Deleted(o) => (
            "DELETED".into(),
            o["metadata"]["name"].as_str().unwrap().into(),
        ),
        WatchEvent::Bookmark(rv) => ("BOOKMARK".into(), rv.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.code.to_string()),
    }
}

async fn watch_sees_changes_with_selectors_and_bookmarks(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    pods.create(&pod("existing")).await.unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let mut all = pods
        .watch(&ListParams::default(), &rv, false)
        .await
        .unwrap();
    let mut web = pods
        .watch(&ListParams::default().labels("app=web"), &rv, false)
        .await
        .unwrap();
    let mut from_now = pods.watch(&ListParams::default(), "", false).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut from_now).await),
        ("ADDED".into(), "existing".into()),
        "synthetic ADDED for current state"
    );

    pods.create(&pod("p")).await.unwrap();
    pods.patch(
        "p",
        None,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await
    .unwrap();
    pods.patch(
        "p",
        None,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "web"}}}),
    )
    .await
    .unwrap();
    let deleted = pods.delete("p", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(describe(&next_event(&mut all).await));
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED".into(), "p".into()),
            ("MODIFIED".into(), "p".into()),
            ("MODIFIED".into(), "p".into()),
            ("DELETED".into(), "p".into())
        ]
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(describe(&next_event(&mut web).await));
    }
    // Leaving the selector looks like a deletion, coming back like a creation.
    assert_eq!(
        seen,
        vec![
            ("ADDED".into(), "p".into()),
            ("DELETED".into(), "p".into()),
            ("ADDED".into(), "p".into()),
            ("DELETED".into(), "p".into())
        ]
    );
    if let WatchEvent::Deleted(last) = next_event(&mut from_now).await {
        panic!("out of order: {last}");
    }
    let _ = deleted;

    // Field selector on one name, bookmarks, and timeoutSeconds ends the stream.
    let lp = ListParams {
        field_selector: Some("metadata.name=q".into()),
        timeout_seconds: Some(12),
        allow_bookmarks: true,
        ..Default::default()
    };
    let mut q = pods.watch(&lp, &rv, false).await.unwrap();
    pods.create(&pod("other")).await.unwrap();
    pods.create(&pod("q")).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut q).await),
        ("ADDED".into(), "q".into())
    );
    // Bookmarks come every 10 s from the watch's start: wait longer than that.
    let bm = tokio::time::timeout(Duration::from_secs(15), q.next())
        .await
        .expect("a bookmark within 15 s")
        .expect("stream open")
        .expect("event");
    assert!(
        matches!(bm, WatchEvent::Bookmark(ref rv) if !rv.is_empty()),
        "{bm:?}"
    );
    let end = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(ev) = q.next().await {
            ev.unwrap();
        }
    })
    .await;
    assert!(
        end.is_ok(),
        "the server ends the watch after timeoutSeconds"
    );

    // Table watch events carry rows.
    let mut t = pods.watch(&ListParams::default(), &rv, true).await.unwrap();
    match next_event(&mut t).await {
        WatchEvent::Added(table) => {
            assert_eq!(table["kind"], "Table");
            assert_eq!(table["rows"][0]["cells"][0], "p");
            assert_eq!(table["columnDefinitions"][1]["name"], "Ready");
        }
        other => panic!("{other:?}"),
    }
}

async fn watch_too_old_is_gone_and_informer_relists(backend: Backend) {
    let mut s = TestServer::start_with(backend, |c| c.watch_cache_size = 5).await;
    let client = Client::new(&s.url);
    let pods: Api<Pod> = Api::namespaced(&client, "default");
    let dynamic = client.dynamic(registry::of::<Pod>(), Some("default"));
    let first = dynamic.create(&pod("p0")).await.unwrap();
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 1..12 {
        dynamic.create(&pod(&format!("p{i}"))).await.unwrap();
    }
    let mut w = dynamic
        .watch(&ListParams::default(), &old_rv, false)
        .await
        .unwrap();
    match next_event(&mut w).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }

    let mut informer = Informer::new(pods.clone(), ListParams::default());
    informer.watch_timeout = Duration::from_secs(60);
    let cache = informer.cache();
    let stats = informer.stats.clone();
    let task = tokio::spawn(informer.run());
    cache.wait_synced().await;
    assert_eq!(cache.len(), 12);

    // The apiserver goes away; meanwhile the store changes more than the new watch cache can replay.
    s.stop_http().await;
    let info = registry::of::<Pod>();
    for i in 0..6 {
        s.server
            .delete(info, Some("default"), &format!("p{i}"), &Default::default())
            .await
            .unwrap();
    }
    s.server
        .create(
            info,
            Some("default"),
            pod("late"),
            apiserver::rest::WriteOpts::default(),
        )
        .await
        .unwrap();
    s.restart_http().await;

    minik8s_testkit::until(30, "the informer converges", || async {
        let names: std::collections::BTreeSet<String> = cache
            .list()
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        let done = names.len() == 7 && names.contains("late") && !names.contains("p0");
        done.then_some(()).ok_or_else(|| format!("{names:?}"))
    })
    .await;
    assert!(
        stats.gone.load(std::sync::atomic::Ordering::Relaxed) >= 1,
        "the informer saw 410"
    );
    assert!(
        stats.lists.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "and re-listed"
    );
    task.abort();
}

/// Several writers; several watchers that disconnect at random and resume from
/// their last resourceVersion. Each must see exactly the store's event sequence.
async fn randomized_watchers_see_every_event_once_in_order(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let pods = client.dynamic(registry::of::<Pod>(), Some("default"));
    let start_rv = pods.list(&ListParams::default()).await.unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let start: i64 = start_rv.parse().unwrap();
    // Ground truth: the store's own watch.
    let mut truth_rx = s
        .server
        .store
        .watch("/registry/core/pods/", start + 1)
        .await
        .unwrap();

    let final_rv = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(i64::MAX));
    let mut watchers = Vec::new();
    for _ in 0..4 {
        let pods = pods.clone();
        let (start_rv, final_rv) = (start_rv.clone(), final_rv.clone());
        watchers.push(tokio::spawn(async move {
            let mut seen: Vec<(i64, String, String)> = Vec::new();
            let mut rv = start_rv;
            let mut reconnects = 0;
            loop {
                let mut stream = pods
                    .watch(&ListParams::default(), &rv, false)
                    .await
                    .unwrap();
                let budget = rand::thread_rng().gen_range(1..15);
                let mut n = 0;
                let mut idle = Duration::ZERO;
                loop {
                    // The final event may arrive before the test publishes its version: re-check while idle.
                    let reached = |rv: &str| {
                        rv.parse::<i64>().unwrap_or(0)
                            >= final_rv.load(std::sync::atomic::Ordering::SeqCst)
                    };
                    let ev = match tokio::time::timeout(Duration::from_millis(200), stream.next())
                        .await
                    {
                        Err(_) => {
                            if reached(&rv) {
                                return (seen, reconnects);
                            }
                            idle += Duration::from_millis(200);
                            assert!(idle < Duration::from_secs(20), "watch stalled at {rv}");
                            continue;
                        }
                        Ok(None) => break,
                        Ok(Some(ev)) => ev,
                    };
                    idle = Duration::ZERO;
                    let (t, o) = match ev.unwrap() {
                        WatchEvent::Added(o) => ("ADDED", o),
                        WatchEvent::Modified(o) => ("MODIFIED", o),
                        WatchEvent::Deleted(o) => ("DELETED", o),
                        other => panic!("unexpected {other:?}"),
                    };
                    rv = o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string();
                    seen.push((
                        rv.parse().unwrap(),
                        t.to_string(),
                        o["metadata"]["name"].as_str().unwrap().to_string(),
                    ));
                    n += 1;
                    if reached(&rv) {
                        return (seen, reconnects);
                    }
                    if n >= budget {
                        break; // disconnect at random
                    }
                }
                reconnects += 1;
            }
        }));
    }

    let mut writers = Vec::new();
    for w in 0..4 {
        let pods = pods.clone();
        writers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::from_entropy();
            for _ in 0..40 {
                let name = format!("w{w}-{}", rng.gen_range(0..5));
                match rng.gen_range(0..3) {
                    0 => {
                        let _ = pods.create(&pod(&name)).await;
                    }
                    1 => {
                        let _ = pods.patch(&name, None, "application/merge-patch+json", &json!({"metadata": {"annotations": {"n": rng.gen::<u32>().to_string()}}})).await;
                    }
                    _ => {
                        let _ = pods.delete(&name, &DeleteParams::default()).await;
                    }
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    // A last write marks the end for every watcher.
    let last = pods.create(&pod("the-end")).await.unwrap();
    let last_rv: i64 = last["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    final_rv.store(last_rv, std::sync::atomic::Ordering::SeqCst);

    let mut truth = Vec::new();
    while truth
        .last()
        .is_none_or(|(rv, _, _): &(i64, String, String)| *rv < last_rv)
    {
        let ev = tokio::time::timeout(Duration::from_secs(10), truth_rx.recv())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let name = ev.kv.key.rsplit('/').next().unwrap().to_string();
        let t = match (ev.kind, ev.prev.is_some()) {
            (apiserver::store::EventKind::Delete, _) => "DELETED",
            (_, false) => "ADDED",
            (_, true) => "MODIFIED",
        };
        truth.push((ev.revision, t.to_string(), name));
    }
    assert!(truth.len() > 40, "the writers produced events");
    let mut total_reconnects = 0;
    for w in watchers {
        let (seen, reconnects) = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("watcher finished")
            .unwrap();
        total_reconnects += reconnects;
        assert_eq!(seen, truth, "a watcher's events differ from the store's");
    }
    assert!(total_reconnects > 4, "watchers did disconnect and resume");
    let counts: HashMap<&str, usize> = truth.iter().fold(HashMap::new(), |mut m, (_, t, _)| {
        *m.entry(t.as_str()).or_default() += 1;
        m
    });
    assert!(
        counts.len() == 3,
        "creates, updates and deletes all happened: {counts:?}"
    );
}

use rand::SeedableRng;

#[tokio::test]
async fn discovery_version_and_openapi() {
    let s = TestServer::start(Backend::Embedded).await;
    let h = Http::new(&s.url);
    let (_, v) = h.get("/version").await;
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("37"))
    );
    for f in [
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ] {
        assert!(v[f].is_string(), "{f}");
    }
    let (_, apis) = h.get("/apis").await;
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "autoscaling",
        "leaderworkerset.x-k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
    ] {
        assert!(groups.contains(&g), "{g}");
    }
    // Namespaces have no deletecollection, in discovery and on the wire.
    let (_, core) = h.get("/api/v1").await;
    let verbs_of = |name: &str| -> Vec<String> {
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| serde_json::from_value(r["verbs"].clone()).unwrap())
            .unwrap_or_default()
    };
    assert!(!verbs_of("namespaces").contains(&"deletecollection".to_string()));
    assert!(verbs_of("pods").contains(&"deletecollection".to_string()));
    let refused = h
        .call(reqwest::Method::DELETE, "/api/v1/namespaces", "", "")
        .await;
    assert_status(&refused, 405, "MethodNotAllowed");
    let (_, apps) = h.get("/apis/apps/v1").await;
    let scale = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "replicasets/scale")
        .unwrap();
    assert_eq!(
        (
            scale["group"].as_str(),
            scale["version"].as_str(),
            scale["kind"].as_str()
        ),
        (Some("autoscaling"), Some("v1"), Some("Scale"))
    );
    let (_, core) = h.get("/api/v1").await;
    let pods = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(pods["shortNames"], json!(["po"]));
    let (_, root) = h.get("/openapi/v3").await;
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, doc) = h.get(&url).await;
    let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/replicasets/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ReplicaSet");
    assert!(op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    assert_eq!(h.get("/healthz").await.0, 200);
    assert_eq!(
        h.get("/api/v1/namespaces/default/nosuchresources").await.0,
        404
    );
    let (code, ns) = h.get("/api/v1/namespaces/kube-system").await;
    assert_eq!(
        (code, ns["status"]["phase"].as_str()),
        (200, Some("Active"))
    );
}

/// A controller writing status while a user patches must not make the user's
/// patches fail: a patch or a PUT without resourceVersion is re-applied to the
/// fresh object on a conflict (Kubernetes' GuaranteedUpdate). A PUT that names
/// an outdated resourceVersion still gets 409.
async fn concurrent_writers_see_only_the_conflicts_they_asked_for(backend: Backend) {
    let s = TestServer::start(backend).await;
    let client = Client::new(&s.url);
    let rs = client.dynamic(registry::of::<ReplicaSet>(), Some("default"));
    let created = rs
        .create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "race"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "race"}},
                     "template": {"metadata": {"labels": {"app": "race"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
        .await
        .unwrap();

    // The "controller": status writes as fast as it can, each without a
    // precondition. It patches the status alone: a status PUT keeps the
    // labels it carries (as Kubernetes' status strategies do), so a stale
    // body would take the concurrent label changes back.
    let writer = {
        let rs = rs.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                let status = json!({"status": {"replicas": i % 7, "observedGeneration": 1}});
                rs.patch(
                    "race",
                    Some("status"),
                    "application/merge-patch+json",
                    &status,
                )
                .await?;
            }
            Ok::<_, minik8s_client::ClientError>(())
        })
    };
    let mut failures = Vec::new();
    for i in 0..40 {
        let patches = [
            ("scale", json!({"spec": {"replicas": i}})),
            (
                "",
                json!({"metadata": {"labels": {"round": i.to_string()}}}),
            ),
        ];
        for (sub, patch) in patches {
            let sub = (!sub.is_empty()).then_some(sub);
            if let Err(e) = rs
                .patch("race", sub, "application/merge-patch+json", &patch)
                .await
            {
                failures.push(format!("{sub:?} patch {i}: {e}"));
            }
        }
    }
    writer
        .await
        .unwrap()
        .expect("status writes without a precondition never conflict");
    assert!(failures.is_empty(), "patches failed: {failures:?}");
    let last = rs.get("race").await.unwrap();
    assert_eq!(last["spec"]["replicas"], 39);
    assert_eq!(last["metadata"]["labels"]["round"], "39");

    // A client precondition is still honoured.
    let stale = rs
        .replace("race", &created)
        .await
        .expect_err("an outdated resourceVersion conflicts");
    assert!(stale.is_conflict(), "{stale}");

    // So is a uid: a write meant for an object deleted and recreated under
    // the same name (the kubelet's status patches carry one) is refused.
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let other = json!({"metadata": {"uid": "0000-not-this-one"}, "status": {"replicas": 5}});
    let refused = rs
        .patch(
            "race",
            Some("status"),
            "application/merge-patch+json",
            &other,
        )
        .await
        .expect_err("a different uid conflicts");
    assert!(refused.is_conflict(), "{refused}");
    assert!(
        refused.to_string().contains(&format!(
            "Precondition failed: UID in precondition: 0000-not-this-one, UID in object meta: {uid}"
        )),
        "{refused}"
    );
    let same = json!({"metadata": {"uid": uid}, "status": {"replicas": 5}});
    rs.patch(
        "race",
        Some("status"),
        "application/merge-patch+json",
        &same,
    )
    .await
    .expect("the object's own uid is fine");
}
