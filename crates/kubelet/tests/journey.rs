//! The journey of a pod (issue 48): the apiserver's create, the
//! scheduler's decision and the kubelet's sync in one trace, exported over
//! OTLP to a small collector this test runs, and kept by the apiserver's
//! store for the web view's journeys (`/ui/api/journey`). The kubelet is
//! the real binary on a private dockerd, joined over TLS as its node user;
//! the apiserver and scheduler run in this process, traced as the master
//! traces them. Then the bad inputs: the view without credentials, a
//! student's forged trace context, a node's spans for a trace not its own.

mod common;

use common::Cluster;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use minik8s_api::registry;
use minik8s_client::Client;
use minik8s_trace::{SpanRecord, SpanStore};

/// An annotation a client may write, named as a trace context would be:
/// the apiserver keeps contexts itself, so it means nothing.
const ANNOTATION: &str = "trace.minik8s.io/context";
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A small OTLP/HTTP collector: the spans of every POST it gets.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

async fn serve_otlp(stream: tokio::net::TcpStream, spans: Arc<Mutex<Vec<SpanRecord>>>) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // The request line, then headers up to the blank line.
        loop {
            line.clear();
            match stream.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let decoded = minik8s_trace::store::decode_otlp(&body).expect("an OTLP trace export");
        spans.lock().unwrap().extend(decoded);
        let reply =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if stream.get_mut().write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn collector() -> Collector {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let spans: Arc<Mutex<Vec<SpanRecord>>> = Arc::default();
    let kept = spans.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_otlp(stream, kept.clone()));
        }
    });
    Collector { url, spans }
}

fn sleeper(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main",
            "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
            "command": ["sh", "-c", "sleep 3600"]}]}})
}

/// The trace id of the context the apiserver keeps for `obj`.
async fn trace_of(client: &Client, obj: &Value) -> String {
    let uid = obj["metadata"]["uid"].as_str().unwrap();
    let answer = client
        .get_json(&format!("/ui/v1/contexts?uid={uid}"))
        .await
        .unwrap_or_else(|e| panic!("no trace context for {obj}: {e}"));
    minik8s_trace::context::trace_id(answer["traceparent"].as_str().unwrap())
        .expect("a traceparent")
}

/// The components of a journey's steps in the order they first appear.
fn components_in_order(steps: &[Value]) -> Vec<String> {
    let mut seen = Vec::new();
    for s in steps {
        let c = s["component"].as_str().unwrap_or("").to_string();
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen
}

fn step_events(steps: &[Value], component: &str) -> Vec<String> {
    steps
        .iter()
        .filter(|s| s["component"] == component)
        .flat_map(|s| s["events"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect()
}

/// An HTTPS client that trusts the cluster CA, with no credentials of its
/// own (cookies kept, redirects not followed).
/// The journey at `path` (`/ui/api/journey?...`) once `done` finds its
/// steps complete (they keep arriving from every component for a while).
async fn journey_until(
    client: &Client,
    path: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    minik8s_testkit::poll(60, Duration::from_millis(300), what, || async {
        let j = client.get_json(path).await.unwrap();
        let steps = j["steps"].as_array().cloned().unwrap_or_default();
        if done(&steps) {
            return Ok(steps);
        }
        Err(format!("{j:#}"))
    })
    .await
}

fn browser(c: &Cluster) -> reqwest::Client {
    let ca = std::fs::read(c.server.config.data_dir.join("pki/ca.crt")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_journey_crosses_the_apiserver_scheduler_and_kubelet_in_one_trace() {
    let collector = collector().await;
    let store = SpanStore::new(1000, 1000);
    // This process is the master here: its apiserver and scheduler trace
    // as the master's do, into its store and to the collector.
    let _tracing = minik8s_trace::init(minik8s_trace::Options {
        process: "journey-test",
        endpoint: Some(collector.url.clone()),
        store: Some(store.clone()),
        to_apiserver: None,
    });
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        tokens.path(),
        "alice-token,alice,1001,students\nproxy-token,system:kube-proxy,1002,\n",
    )
    .unwrap();
    let kept = store.clone();
    let token_file = tokens.path().to_path_buf();
    let c = Cluster::start_secure_with(
        3600,
        move |cfg| {
            cfg.span_store = Some(kept);
            cfg.token_auth_file = Some(token_file);
        },
        vec!["--tracing-endpoint".into(), collector.url.clone()],
    )
    .await;
    c.spawn_scheduler();
    let https = c.secure.clone().unwrap();

    // The admin's pod, scheduled (no nodeName) and started.
    let created_at = Instant::now();
    let web = c.pods().create(&sleeper("web")).await.unwrap();
    let trace = trace_of(&c.client, &web).await;
    // The object itself reads back as Kubernetes serves it.
    assert!(web["metadata"]["annotations"].is_null(), "{web}");
    let journey = |ns: &'static str, name: &'static str| {
        let client = c.client.clone();
        async move {
            let path = format!("/ui/api/journey?resource=pods&namespace={ns}&name={name}");
            client.get_json(&path).await.unwrap()
        }
    };
    let steps = minik8s_testkit::poll(
        30,
        Duration::from_millis(200),
        "the pod's journey through three components",
        || async {
            let j = journey("default", "web").await;
            let steps = j["steps"].as_array().cloned().unwrap_or_default();
            let started = step_events(&steps, "kubelet")
                .iter()
                .any(|e| e == "container started");
            if components_in_order(&steps) == ["apiserver", "scheduler", "kubelet"] && started {
                return Ok(steps);
            }
            Err(format!(
                "{j:#}\nkubelet log:\n{}",
                common::tail(&c.kubelet_log(), 20)
            ))
        },
    )
    .await;
    eprintln!(
        "the journey showed all three components {:?} after the create",
        created_at.elapsed()
    );
    assert_eq!(
        steps[0]["name"],
        "POST /api/v1/namespaces/{:namespace}/pods"
    );
    assert_eq!(steps[0]["attributes"]["user"], "system:unsecured");
    assert!(
        steps.iter().all(|s| s["traceId"] == trace.as_str()),
        "one trace: {steps:#?}"
    );
    let starts: Vec<u64> = steps
        .iter()
        .map(|s| s["startUnixNano"].as_u64().unwrap())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "in the order they started"
    );
    // What each decided, in the learner's words.
    let scheduler = step_events(&steps, "scheduler");
    assert!(scheduler.contains(&"selected".to_string()), "{scheduler:?}");
    let selected = steps
        .iter()
        .flat_map(|s| s["events"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == "selected")
        .unwrap();
    assert_eq!(selected["attributes"]["node"], c.node.as_str());
    let names: BTreeSet<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    for step in [
        "schedule_one",
        "bind",
        "sync_pod",
        "sandbox",
        "image",
        "container",
        "status",
    ] {
        assert!(names.contains(step), "{step} in {names:?}");
    }
    assert!(step_events(&steps, "kubelet").contains(&"image present".to_string()));
    // The scheduler's binding continued the trace (a trusted caller).
    assert!(
        names.contains("POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding"),
        "{names:?}"
    );

    // The same trace reached the collector over OTLP from all three.
    minik8s_testkit::poll(
        15,
        Duration::from_millis(200),
        "the collector's spans of the pod's trace",
        || async {
            let spans = collector.spans.lock().unwrap().clone();
            let from: BTreeSet<String> = spans
                .iter()
                .filter(|s| s.trace_id == trace)
                .map(|s| s.component.clone())
                .collect();
            let all: BTreeSet<String> = ["apiserver", "scheduler", "kubelet"]
                .map(String::from)
                .into();
            if all.is_subset(&from) {
                return Ok(());
            }
            Err(format!(
                "components with trace {trace}: {from:?} of {} spans",
                spans.len()
            ))
        },
    )
    .await;

    // A Deployment's journey: its controllers' reconciles (in the
    // controller manager, a trusted caller) carry its trace to the
    // ReplicaSet and the pod they create, and on to the scheduler and kubelet.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "journey"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "journey"}},
            "template": {"metadata": {"labels": {"app": "journey"}}, "spec": sleeper("x")["spec"]}}});
    // A Service in front of it: the endpoints its pod becomes are a step
    // of the pod's journey.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "journey"},
        "spec": {"selector": {"app": "journey"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    c.client
        .dynamic(
            registry::of::<k8s_openapi::api::core::v1::Service>(),
            Some("default"),
        )
        .create(&svc)
        .await
        .unwrap();
    let deployments = c.client.dynamic(
        registry::of::<k8s_openapi::api::apps::v1::Deployment>(),
        Some("default"),
    );
    deployments.create(&deploy).await.unwrap();
    let path = "/ui/api/journey?resource=deployments&group=apps&namespace=default&name=journey";
    let what = "the Deployment's journey down to its pod's container";
    let steps = journey_until(&c.client, path, what, |steps| {
        let components: BTreeSet<String> = components_in_order(steps).into_iter().collect();
        let all: BTreeSet<String> = ["apiserver", "controller-manager", "scheduler", "kubelet"]
            .map(String::from)
            .into();
        let endpoints = steps
            .iter()
            .any(|s| s["name"] == "endpoints" && s["component"] == "controller-manager");
        all.is_subset(&components)
            && endpoints
            && step_events(steps, "kubelet")
                .iter()
                .any(|e| e == "container started")
    })
    .await;
    let creates: Vec<&str> = steps
        .iter()
        .filter(|s| s["component"] == "apiserver" && s["attributes"]["verb"] == "create")
        .filter(|s| {
            s["attributes"]["subresource"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        })
        .filter_map(|s| s["attributes"]["resource"].as_str())
        .filter(|r| *r != "events")
        .collect();
    assert_eq!(
        creates,
        ["deployments", "replicasets", "pods"],
        "{steps:#?}"
    );
    let controllers: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s["name"] == "reconcile")
        .filter_map(|s| s["attributes"]["controller"].as_str())
        .collect();
    assert!(
        controllers.contains("deployment") && controllers.contains("replicaset"),
        "{controllers:?}"
    );

    // A Job's journey: its controller follows the Job's context until it
    // finished, so its pod's create, scheduling and start are in it.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "journey"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "minik8s/busybox:latest",
                "imagePullPolicy": "Never", "command": ["true"]}]}}}});
    c.client
        .dynamic(
            registry::of::<k8s_openapi::api::batch::v1::Job>(),
            Some("default"),
        )
        .create(&job)
        .await
        .unwrap();
    let path = "/ui/api/journey?resource=jobs&group=batch&namespace=default&name=journey";
    let what = "the Job's journey down to its pod's container";
    let steps = journey_until(&c.client, path, what, |steps| {
        let started = step_events(steps, "kubelet")
            .iter()
            .any(|e| e == "container started");
        started && components_in_order(steps).contains(&"scheduler".to_string())
    })
    .await;
    assert!(
        steps
            .iter()
            .any(|s| s["name"] == "reconcile" && s["attributes"]["controller"] == "job"),
        "{steps:#?}"
    );
    assert!(
        steps.iter().any(|s| s["component"] == "apiserver"
            && s["attributes"]["verb"] == "create"
            && s["attributes"]["resource"] == "pods"),
        "the Job's pod was created in its journey: {steps:#?}"
    );

    // A DisaggregatedSet's journey: its roles' LeaderWorkerSets, the
    // leaders' StatefulSets and pods, the prefill group's workers'
    // StatefulSet and pod, down to the three containers (each controller
    // follows while it rolls out).
    let ds = json!({"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
        "metadata": {"name": "journey"},
        "spec": {"roles": [
            {"name": "prefill", "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2, "workerTemplate": {"spec": sleeper("x")["spec"]}}}},
            {"name": "decode", "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 1, "workerTemplate": {"spec": sleeper("x")["spec"]}}}}]}});
    c.client
        .dynamic(
            registry::of::<minik8s_api::disaggregatedset::DisaggregatedSet>(),
            Some("default"),
        )
        .create(&ds)
        .await
        .unwrap();
    let path = "/ui/api/journey?resource=disaggregatedsets&group=disaggregatedset.x-k8s.io&namespace=default&name=journey";
    let what = "the DisaggregatedSet's journey down to its three containers";
    let steps = journey_until(&c.client, path, what, |steps| {
        let started = step_events(steps, "kubelet")
            .iter()
            .filter(|e| *e == "container started")
            .count();
        started >= 3
    })
    .await;
    let created: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s["component"] == "apiserver" && s["attributes"]["verb"] == "create")
        .filter_map(|s| s["attributes"]["resource"].as_str())
        .collect();
    for kind in ["leaderworkersets", "statefulsets", "pods"] {
        assert!(
            created.contains(kind),
            "{kind} created in the journey: {created:?}"
        );
    }
    let controllers: BTreeSet<&str> = steps
        .iter()
        .filter(|s| s["name"] == "reconcile")
        .filter_map(|s| s["attributes"]["controller"].as_str())
        .collect();
    for controller in [
        "disaggregatedset",
        "leaderworkerset",
        "lws-group",
        "statefulset",
    ] {
        assert!(
            controllers.contains(controller),
            "{controller}: {controllers:?}"
        );
    }

    // A kind that carries no trace context: its journey by its uid.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "b"}});
    let cm = c
        .client
        .dynamic(
            registry::of::<k8s_openapi::api::core::v1::ConfigMap>(),
            Some("default"),
        )
        .create(&cm)
        .await
        .unwrap();
    assert!(cm["metadata"]["annotations"].is_null(), "{cm}");
    let j = c
        .client
        .get_json("/ui/api/journey?resource=configmaps&namespace=default&name=settings")
        .await
        .unwrap();
    let steps = j["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["name"], "POST /api/v1/namespaces/{:namespace}/configmaps",
        "{j:#}"
    );
    assert_eq!(steps[0]["attributes"]["uid"], cm["metadata"]["uid"]);

    // The view without credentials: 401.
    let anonymous = browser(&c);
    let r = anonymous.get(format!("{https}/ui/")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = anonymous
        .get(format!("{https}/ui/api/overview"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The sign-in page is public; a made-up code signs nobody in.
    let r = anonymous
        .get(format!("{https}/ui/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = anonymous
        .get(format!("{https}/ui/login?code=0123"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // A student with a namespace of her own.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alice"}});
    c.client
        .dynamic(registry::of::<Namespace>(), None)
        .create(&ns)
        .await
        .unwrap();
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-edit", "namespace": "alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]});
    c.client
        .dynamic(registry::of::<RoleBinding>(), Some("alice"))
        .create(&rb)
        .await
        .unwrap();
    let alice = |req: reqwest::RequestBuilder| req.bearer_auth("alice-token");

    // She forges the admin's pod's trace context, in the header and in
    // the annotation: her pod gets a trace of its own, linked at most.
    let forged = c
        .client
        .get_json(&format!(
            "/ui/v1/contexts?uid={}",
            web["metadata"]["uid"].as_str().unwrap()
        ))
        .await
        .unwrap()["traceparent"]
        .as_str()
        .unwrap()
        .to_string();
    let mut mine = sleeper("mine");
    mine["metadata"]["annotations"] = json!({ANNOTATION: forged});
    // (Her RoleBinding reaches the authorizer through its watch: a moment.)
    let mine: Value = minik8s_testkit::poll(
        10,
        Duration::from_millis(100),
        "alice creates her pod",
        || async {
            let r = alice(anonymous.post(format!("{https}/api/v1/namespaces/alice/pods")))
                .header("traceparent", &forged)
                .json(&mine)
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: Value = r.json().await.unwrap();
            if status == 201 {
                return Ok(body);
            }
            Err(format!("{status}: {body}"))
        },
    )
    .await;
    assert_ne!(
        trace_of(&c.client, &mine).await,
        trace,
        "a student's pod joined the admin's trace"
    );
    // Nor can an update point it there.
    let patch = json!({"metadata": {"annotations": {ANNOTATION: forged}}});
    let r = alice(anonymous.patch(format!("{https}/api/v1/namespaces/alice/pods/mine")))
        .header("content-type", "application/merge-patch+json")
        .header("traceparent", &forged)
        .body(patch.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let patched: Value = r.json().await.unwrap();
    assert_eq!(
        trace_of(&c.client, &patched).await,
        trace_of(&c.client, &mine).await
    );
    c.wait_pod_in("alice", "mine", "running", 60, |p| {
        common::phase(p) == "Running"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let admins = store.trace(&trace);
    assert!(
        admins.iter().all(
            |s| s.attributes.get("user").map(String::as_str) != Some("alice")
                && s.attributes.get("pod").map(String::as_str) != Some("alice/mine")
        ),
        "the student's work is in the admin's trace: {admins:#?}"
    );
    // Her pod's own journey is there.
    let her = journey("alice", "mine").await;
    assert_eq!(
        components_in_order(her["steps"].as_array().unwrap())
            .first()
            .map(String::as_str),
        Some("apiserver")
    );

    // She signs the browser in with a login code, and sees her namespace only.
    let r = alice(anonymous.post(format!("{https}/ui/session")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let login: Value = r.json().await.unwrap();
    let r = anonymous
        .get(format!("{https}{}", login["loginPath"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let view = |path: &str| {
        anonymous
            .get(format!("{https}{path}"))
            .header("cookie", &session)
    };
    let r = view("/ui/").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let overview: Value = view("/ui/api/overview")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(overview["user"], "alice");
    assert_eq!(overview["namespace"], "alice");
    assert_eq!(overview["nodesVisible"], false);
    let text = overview.to_string();
    assert!(
        text.contains("\"mine\"") && !text.contains("\"web\""),
        "{overview:#}"
    );
    // The admin's pod's journey is not hers to read.
    let r = view("/ui/api/journey?resource=pods&namespace=default&name=web")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // The cookie reads the view and writes nothing.
    let r = anonymous
        .post(format!("{https}/ui/session"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = anonymous
        .post(format!("{https}/api/v1/namespaces/alice/pods"))
        .header("cookie", &session)
        .json(&sleeper("by-cookie"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Her token posts no spans (nodes and admins do).
    let r = alice(anonymous.post(format!("{https}/ui/v1/traces")))
        .header("content-type", "application/x-protobuf")
        .body(Vec::<u8>::new())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // The node's credentials add spans to its own pods' traces only.
    let node = Client::for_target(
        &minik8s_client::config::from_kubeconfig(
            &c.root.path().join(format!("kubelet-{}.conf", c.node)),
        )
        .unwrap(),
    )
    .unwrap();
    let stranger = "0123456789abcdef0123456789abcdef";
    let body = otlp_body(&[(stranger, "node-forged"), (&trace, "node-own")]);
    node.send(
        reqwest::Method::POST,
        "/ui/v1/traces",
        Some(("application/x-protobuf", body)),
        "application/x-protobuf",
    )
    .await
    .unwrap();
    // kube-proxy's credentials: only traces in which an EndpointSlice was
    // written (the Deployment's, whose pod became the Service's endpoint).
    let deployed = deployments.get("journey").await.unwrap();
    let deployment_trace = trace_of(&c.client, &deployed).await;
    let body = otlp_body(&[(stranger, "proxy-forged"), (&deployment_trace, "proxy-own")]);
    let r = anonymous
        .post(format!("{https}/ui/v1/traces"))
        .bearer_auth("proxy-token")
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(store
        .trace(stranger)
        .iter()
        .all(|s| s.name != "proxy-forged"));
    assert!(store
        .trace(&deployment_trace)
        .iter()
        .any(|s| s.name == "proxy-own"));
    assert!(
        store.trace(stranger).is_empty(),
        "a node wrote into a trace of no pod of its"
    );
    assert!(store.trace(&trace).iter().any(|s| s.name == "node-own"));
    drop(c);
}

/// An OTLP body of one span per (trace id, name), as a kubelet sends it.
fn otlp_body(spans: &[(&str, &str)]) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    let hex = |s: &str| {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let spans = spans
        .iter()
        .enumerate()
        .map(|(i, (trace, name))| Span {
            trace_id: hex(trace),
            span_id: vec![0xab, 0, 0, 0, 0, 0, 0, i as u8 + 1],
            name: name.to_string(),
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue("kubelet".into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}
