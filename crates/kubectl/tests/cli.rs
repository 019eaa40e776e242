//! Our kubectl, run as a user would, against an in-process apiserver.

use minik8s_api::k8s::api::core::v1::Pod;
use minik8s_testkit::{Backend, TestServer};
use std::path::Path;
use std::process::Command;

struct Run {
    ok: bool,
    out: String,
    err: String,
}

fn kubectl(server: &str, dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl"))
        .arg("--server")
        .arg(server)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("running kubectl");
    Run {
        ok: out.status.success(),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const MANIFESTS: &str = "apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: busybox}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_and_errors() {
    let s = TestServer::start(Backend::Embedded).await;
    let url = s.url.clone();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let k = |args: &[&str]| kubectl(&url, d, args);
        std::fs::create_dir(d.join("app")).unwrap();
        std::fs::write(d.join("app/web.yaml"), MANIFESTS).unwrap();
        std::fs::write(d.join("app/pod.json"), r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"solo","labels":{"app":"solo"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#).unwrap();

        // create from a directory with multi-document YAML and JSON
        let r = k(&["create", "-f", "app"]);
        assert!(r.ok, "{}", r.err);
        assert_eq!(r.out, "pod/solo created\nservice/web created\nreplicaset.apps/web created\n");

        // apply: created, unchanged, configured
        let r = k(&["apply", "-f", "app/web.yaml"]);
        assert!(r.ok, "{}", r.err);
        assert_eq!(r.out, "service/web configured\nreplicaset.apps/web configured\n", "first apply on created objects records the annotation");
        assert_eq!(k(&["apply", "-f", "app/web.yaml"]).out, "service/web unchanged\nreplicaset.apps/web unchanged\n");
        std::fs::write(d.join("app/web.yaml"), MANIFESTS.replace("replicas: 2", "replicas: 4")).unwrap();
        assert_eq!(k(&["apply", "-f", "app/web.yaml"]).out, "service/web unchanged\nreplicaset.apps/web configured\n");

        // get: table, wide, name, json, yaml, selectors, all namespaces
        let r = k(&["get", "rs"]);
        assert!(r.out.starts_with("NAME   DESIRED   CURRENT   READY   AGE\nweb    4         0         0"), "{}", r.out);
        assert!(k(&["get", "rs", "-o", "wide"]).out.contains("SELECTOR"));
        let svc = k(&["get", "svc", "web"]).out;
        assert!(svc.contains("ClusterIP") && svc.contains("80/TCP"), "{svc}");
        assert_eq!(k(&["get", "po", "-o", "name"]).out, "pod/solo\n");
        let j: serde_json::Value = serde_json::from_str(&k(&["get", "pod", "solo", "-o", "json"]).out).unwrap();
        assert_eq!(j["metadata"]["name"], "solo");
        let y: serde_json::Value = serde_yaml::from_str(&k(&["get", "pods", "-o", "yaml"]).out).unwrap();
        assert_eq!(y["kind"], "List");
        assert_eq!(y["items"][0]["metadata"]["name"], "solo");
        assert!(k(&["get", "pods", "-l", "app=none"]).err.contains("No resources found in default namespace."));
        assert!(k(&["get", "pods", "-A"]).out.starts_with("NAMESPACE   NAME"));
        let all = k(&["get", "all"]).out;
        assert!(all.contains("pod/solo") && all.contains("service/web") && all.contains("replicaset.apps/web"), "{all}");
        let ns = k(&["get", "ns"]).out;
        assert!(ns.lines().any(|l| l.starts_with("kube-system ") && l.contains(" Active ")), "{ns}");

        // scale and describe
        assert_eq!(k(&["scale", "rs", "web", "--replicas", "1"]).out, "replicaset.apps/web scaled\n");
        let r = k(&["scale", "rs/web", "--replicas", "2", "--current-replicas", "5"]);
        assert!(!r.ok && r.err.contains("Expected replicas to be 5, was 1"), "{}", r.err);
        let desc = k(&["describe", "rs", "web"]).out;
        assert!(desc.contains("Name:         web") && desc.contains("replicas: 1"), "{desc}");
        let resources = k(&["api-resources"]).out;
        assert!(
            resources.lines().any(|l| l.split_whitespace().take(2).eq(["leaderworkersets", "lws"])),
            "{resources}"
        );

        // errors: one line, with the file and line or the server's message
        std::fs::write(d.join("bad.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n").unwrap();
        let r = k(&["create", "-f", "bad.yaml"]);
        assert!(!r.ok && r.err.starts_with("error: error parsing bad.yaml: error converting YAML to JSON: yaml: line"), "{}", r.err);
        std::fs::write(d.join("frob.yaml"), "apiVersion: v1\nkind: Frob\nmetadata: {name: x}\n").unwrap();
        let r = k(&["create", "-f", "frob.yaml"]);
        assert!(!r.ok && r.err.contains("no matches for kind \"Frob\" in version \"v1\""), "{}", r.err);
        std::fs::write(d.join("empty.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: e}\nspec: {containers: []}\n").unwrap();
        let r = k(&["create", "-f", "empty.yaml"]);
        assert_eq!(r.err, "The Pod \"e\" is invalid: spec.containers: Required value\n");
        let r = k(&["create", "-f", "app/pod.json"]);
        assert_eq!(r.err, "Error from server (AlreadyExists): error when creating \"app/pod.json\": pods \"solo\" already exists\n");
        let r = k(&["get", "frobs"]);
        assert_eq!(r.err, "error: the server doesn't have a resource type \"frobs\"\n");
        let r = k(&["get", "pod", "nope"]);
        assert_eq!(r.err, "Error from server (NotFound): pods \"nope\" not found\n");
        let r = kubectl("http://127.0.0.1:1", d, &["get", "pods"]);
        assert!(!r.ok && r.err.contains("The connection to the server 127.0.0.1:1 was refused"), "{}", r.err);
        let r = k(&["create", "-f", "missing.yaml"]);
        assert_eq!(r.err, "error: the path \"missing.yaml\" does not exist\n");

        // delete by name, by file, by label
        assert_eq!(k(&["delete", "pod", "solo"]).out, "pod \"solo\" deleted\n");
        assert_eq!(k(&["delete", "-f", "app/web.yaml"]).out, "service \"web\" deleted\nreplicaset.apps \"web\" deleted\n");
        std::fs::write(d.join("two.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {x: y}}\nspec: {containers: [{name: c, image: i}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, labels: {x: y}}\nspec: {containers: [{name: c, image: i}]}\n").unwrap();
        k(&["create", "-f", "two.yaml"]);
        assert_eq!(k(&["delete", "pods", "-l", "x=y"]).out, "pod \"a\" deleted\npod \"b\" deleted\n");
        assert!(k(&["get", "pods"]).err.contains("No resources found"));

        // stdin and namespaces
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl"))
            .args(["--server", &url, "-n", "kube-system", "create", "-f", "-"])
            .current_dir(d)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"apiVersion: v1\nkind: Pod\nmetadata: {name: sys}\nspec: {containers: [{name: c, image: i}]}\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "pod/sys created\n");
        assert!(k(&["get", "pods", "-n", "kube-system"]).out.contains("sys"));
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_rows_as_changes_happen() {
    let s = TestServer::start(Backend::Embedded).await;
    let dir = tempfile::tempdir().unwrap();
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl"))
        .args(["--server", &s.url, "get", "pods", "-w"])
        .env("HOME", dir.path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let client = minik8s_client::Client::new(&s.url);
    let pods = client.dynamic(minik8s_api::registry::of::<Pod>(), Some("default"));
    pods.create(&serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).await.unwrap();
    pods.delete("w1", &Default::default()).await.unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut got = Vec::new();
    while got.len() < 3 {
        let l = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push(l);
    }
    assert!(got[0].starts_with("NAME"), "{got:?}");
    assert!(
        got[1].starts_with("w1 ") && got[2].starts_with("w1 "),
        "{got:?}"
    );
}

/// Every manifest in examples/ is accepted by the server, and re-applying changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_applies() {
    let s = TestServer::start(Backend::Embedded).await;
    let url = s.url.clone();
    tokio::task::spawn_blocking(move || {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let dir = tempfile::tempdir().unwrap();
        let first = kubectl(
            &url,
            dir.path(),
            &["apply", "-f", examples.to_str().unwrap()],
        );
        assert!(first.ok, "{}", first.err);
        let created = first
            .out
            .lines()
            .filter(|l| l.ends_with(" created"))
            .count();
        // Files only: examples/operator/ is a Rust crate with its own test.
        let files = std::fs::read_dir(&examples)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_file())
            .count();
        assert!(
            created >= files,
            "every example created something:\n{}",
            first.out
        );
        let second = kubectl(
            &url,
            dir.path(),
            &["apply", "-f", examples.to_str().unwrap()],
        );
        // A Secret written with stringData always reads back as data, so its
        // three-way patch is never empty: kubectl says "configured" for it
        // (the real kubectl too), and the server writes nothing.
        assert!(
            second.ok
                && second
                    .out
                    .lines()
                    .all(|l| l.ends_with(" unchanged") || l == "secret/app-secret configured"),
            "{}",
            second.out
        );
    })
    .await
    .unwrap();
}

/// An extension apiserver that is down (its Service is missing) leaves one
/// group undiscoverable: our kubectl warns about it and goes on, as the
/// real kubectl does, instead of failing every command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_apiservice_is_warned_about_not_fatal() {
    let s = TestServer::start(Backend::Embedded).await;
    let url = s.url.clone();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let k = |args: &[&str]| kubectl(&url, d, args);
        std::fs::write(
            d.join("apiservice.yaml"),
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1alpha1.wardle.example.com}\n\
             spec:\n  group: wardle.example.com\n  version: v1alpha1\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n\
             \x20 insecureSkipTLSVerify: true\n  service: {name: api, namespace: wardle}\n",
        )
        .unwrap();
        let created = k(&["apply", "-f", "apiservice.yaml"]);
        assert!(created.ok, "{}", created.err);
        let got = k(&["get", "namespaces"]);
        assert!(got.ok, "{}", got.err);
        assert!(got.out.contains("default"), "{}", got.out);
        assert!(
            got.err.contains("wardle.example.com/v1alpha1"),
            "the unavailable group is named: {}",
            got.err
        );
    })
    .await
    .unwrap();
}

/// `cordon`, `uncordon` and `drain` as the real kubectl words them: a drain
/// stops on a pod nothing would recreate (until --force), evicts the rest,
/// and keeps asking while a disruption budget says no.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_drain_and_uncordon() {
    let s = TestServer::start(Backend::Embedded).await;
    let client = minik8s_client::Client::new(&s.url);
    let nodes = client.dynamic(
        minik8s_api::registry::of::<minik8s_api::k8s::api::core::v1::Node>(),
        None,
    );
    nodes
        .create(
            &serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
        )
        .await
        .unwrap();
    let pods = client.dynamic(minik8s_api::registry::of::<Pod>(), Some("default"));
    let pod = |name: &str, owned: bool| {
        let mut p = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}});
        if owned {
            p["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "apps/v1",
                "kind": "ReplicaSet", "name": "web", "uid": "6d1e0c1a-0000-4000-8000-000000000001",
                "controller": true}]);
        }
        p
    };
    pods.create(&pod("bare", false)).await.unwrap();
    pods.create(&pod("web-1", true)).await.unwrap();
    // Running and ready, as its kubelet would say: the budget protects it.
    pods.patch(
        "web-1",
        Some("status"),
        minik8s_client::rest::content::MERGE_PATCH,
        &serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await
    .unwrap();
    let url = s.url.clone();
    let pods_left = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let k = |args: &[&str]| kubectl(&url, dir.path(), args);
        let r = k(&["cordon", "n1"]);
        assert!(r.ok && r.out == "node/n1 cordoned\n", "{}{}", r.out, r.err);
        let r = k(&["cordon", "n1"]);
        assert_eq!(r.out, "node/n1 already cordoned\n");
        let r = k(&["get", "nodes", "--no-headers"]);
        assert!(r.out.contains("SchedulingDisabled"), "{}", r.out);

        // A pod without a controller stops the drain; nothing is evicted.
        let r = k(&["drain", "n1", "--grace-period", "0"]);
        assert!(!r.ok);
        assert!(
            r.err.contains("unable to drain node \"n1\" due to error: [cannot delete Pods that declare no controller (use --force to override): default/bare]"),
            "{}",
            r.err
        );
        assert!(k(&["get", "pod", "web-1"]).ok, "nothing was evicted");

        // A budget that allows no disruption: asked again every 5 s until the timeout.
        std::fs::write(
            dir.path().join("pdb.yaml"),
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 5\n  selector: {matchLabels: {app: web-1}}\n",
        )
        .unwrap();
        assert!(k(&["apply", "-f", "pdb.yaml"]).ok);
        let r = k(&["drain", "n1", "--force", "--grace-period", "0", "--timeout", "2s"]);
        assert!(!r.ok);
        assert!(
            r.err.contains("Warning: deleting Pods that declare no controller: default/bare")
                && r.out.contains("pod/bare evicted")
                && r.err.contains("error when evicting pods/\"web-1\" -n \"default\" (will retry after 5s)")
                && r.err.contains("drain did not complete within the timeout"),
            "{}",
            r.err
        );
        assert!(k(&["get", "pod", "web-1"]).ok, "the budget kept web-1");

        assert!(k(&["delete", "pdb", "web"]).ok);
        let r = k(&["drain", "n1", "--force", "--grace-period", "0"]);
        assert!(r.ok, "{}{}", r.out, r.err);
        for line in [
            "node/n1 already cordoned",
            "evicting pod default/web-1",
            "pod/web-1 evicted",
            "node/n1 drained",
        ] {
            assert!(r.out.contains(line), "no {line:?} in:\n{}", r.out);
        }
        let r = k(&["uncordon", "n1"]);
        assert_eq!(r.out, "node/n1 uncordoned\n");
        k(&["get", "pods", "--no-headers"]).out
    })
    .await
    .unwrap();
    assert_eq!(pods_left, "", "every pod of n1 was evicted");
}
