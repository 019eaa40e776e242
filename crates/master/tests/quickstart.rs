//! README command one, as a new user runs it: `scripts/quickstart.sh` (the
//! release build, dockerd, the image registry, master, kubelet, kube-proxy
//! and the examples), again on the running cluster, then `down` and up once
//! more on the kept store (the Completed-pod case of issue 24), then `down`.
//! On the running cluster it also runs a kube-rs operator, kr8s' own test
//! suite (`quickstart/kr8s_suite.rs`), kopf's end-to-end suite
//! (`quickstart/kopf_suite.rs`), Helm (`quickstart/helm_check.rs`) and
//! Prometheus (`quickstart/monitoring_check.rs`), doc/dra.md's devices
//! (`quickstart/dra_check.rs`) and the web view in a real browser
//! (`quickstart/ui_check.rs`).
//!
//! Needs root, like the quick start. When a quick start is already running on
//! this machine (a developer's), the test runs the script again on it and
//! leaves it running: the suite must pass beside a running quick start.

use std::path::Path;
use std::process::Command;

#[path = "quickstart/doc_command.rs"]
mod doc_command;
#[path = "quickstart/dra_check.rs"]
mod dra_check;
#[path = "quickstart/helm_check.rs"]
mod helm_check;
#[path = "quickstart/kopf_suite.rs"]
mod kopf_suite;
#[path = "quickstart/kr8s_suite.rs"]
mod kr8s_suite;
#[path = "quickstart/monitoring_check.rs"]
mod monitoring_check;
#[path = "quickstart/pytest_suite.rs"]
mod pytest_suite;
#[path = "quickstart/ui_check.rs"]
mod ui_check;

/// The loopback port, to see whether a quick start already runs.
const SERVER: &str = "http://127.0.0.1:8080";
/// The admin's kubeconfig the quick start's master writes (TLS, a client certificate).
const ADMIN: &str = "/var/lib/minik8s/pki/admin.conf";

fn quickstart(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/quickstart.sh");
    let out = Command::new("timeout")
        .arg("1200")
        .arg("bash")
        .arg(&script)
        .args(args)
        .output()
        .expect("running scripts/quickstart.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "quickstart.sh {args:?} failed:\n{text}"
    );
    text
}

fn kubectl(args: &[&str]) -> String {
    let out = Command::new(minik8s_testkit::real_kubectl())
        .args(["--kubeconfig", ADMIN])
        .args(args)
        .output()
        .expect("running the real kubectl (1.37)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// What a working quick start prints and serves.
fn check_up(out: &str) {
    assert!(out.contains("minik8s is up"), "{out}");
    assert!(
        out.contains("hello from hello"),
        "the hello pod's log: {out}"
    );
    assert!(
        out.contains("<h1>hello from minik8s</h1>"),
        "the web Service by name from a pod: {out}"
    );
    assert!(
        out.contains("http://127.0.0.1:8080/ui/"),
        "the quick start names the web view: {out}"
    );
    // examples/ingress.yaml: by host and path from a pod (the cluster DNS
    // answers the host) and from this machine on port 80.
    assert!(
        out.contains("world from world-page-"),
        "the Ingress host from a pod: {out}"
    );
    assert!(
        out.contains("hello from hello-page-"),
        "the Ingress from this machine: {out}"
    );
    // examples/function.yaml through the serverless gateway.
    assert!(
        out.contains(r#"{"hello":"minik8s"}"#),
        "the Function through the gateway: {out}"
    );
    assert!(
        out.contains(r#"{"hello":"kubectl"}"#),
        "kubectl invoke: {out}"
    );
    // The gateway from a pod: its Service VIP by name, and the Ingress host functions.minik8s.
    assert!(
        out.contains(r#"{"hello":"a pod"}"#),
        "the gateway's Service from a pod: {out}"
    );
    assert!(
        out.contains(r#"{"hello":"world"}"#),
        "the Ingress host functions.minik8s from a pod: {out}"
    );
    // examples/workflow.yaml: the left branch for a score of 90.
    assert!(
        out.contains(r#"output: {"message": "90: well done"}"#),
        "the WorkflowRun grade-90: {out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("grade-90 ")
            && l.contains(" Succeeded ")
            && l.contains(" 2/2 ")),
        "kubectl get workflowruns: {out}"
    );
    let pods = kubectl(&["get", "pods", "-l", "app=web", "--no-headers"]);
    assert_eq!(
        pods.lines().filter(|l| l.contains("Running")).count(),
        3,
        "{pods}"
    );
    // Over TLS as the cluster admin; the node is its own user.
    assert!(kubectl(&["auth", "whoami"]).contains("kubernetes-admin"));
    let node = kubectl(&["get", "csr", "-o", "jsonpath={.items[*].spec.username}"]);
    assert!(
        node.contains("system:bootstrap:"),
        "the node joined with the token: {node}"
    );
    // `kubectl get pods` as is, when the quick start wrote ~/.kube/config (it
    // keeps one it did not write).
    let home = std::env::var("HOME").unwrap_or_default();
    let config = std::fs::read_to_string(format!("{home}/.kube/config")).unwrap_or_default();
    if config.contains("kubernetes-admin@minik8s") {
        let out = Command::new(minik8s_testkit::real_kubectl())
            .args(["get", "pods"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("hello"));
    }
}

/// Takes down a quick start this test started, whatever happens.
struct Down;

impl Drop for Down {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/quickstart.sh");
        let _ = Command::new("bash").arg(&script).arg("down").output();
    }
}

/// Stops the operator when the check ends, however it ends.
struct Operator(std::process::Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// doc/operators.md: the kube-rs example operator against the quick start's
/// cluster, with the admin's kubeconfig; the Website it makes answers through
/// its Service, from the pod hello.
fn a_kube_rs_operator_serves_a_site() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = root.join("target/debug/website-operator");
    if !bin.exists() {
        let built = Command::new("cargo")
            .args(["build", "-p", "website-operator"])
            .current_dir(&root)
            .status()
            .expect("cargo build -p website-operator");
        assert!(built.success(), "building examples/operator");
    }
    let crd = Command::new(&bin)
        .arg("crd")
        .output()
        .expect("website-operator crd");
    let dir = tempfile::tempdir().unwrap();
    let crd_file = dir.path().join("crd.yaml");
    std::fs::write(&crd_file, &crd.stdout).unwrap();
    kubectl(&["apply", "-f", crd_file.to_str().unwrap()]);
    kubectl(&[
        "wait",
        "--for",
        "condition=Established",
        "--timeout=30s",
        "crd/websites.minik8s.io",
    ]);
    let _operator = Operator(
        Command::new(&bin)
            .env("KUBECONFIG", ADMIN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting website-operator"),
    );
    let site = dir.path().join("site.yaml");
    std::fs::write(&site, "apiVersion: minik8s.io/v1\nkind: Website\nmetadata:\n  name: site\nspec:\n  replicas: 2\n  message: hello from a kube-rs operator\n").unwrap();
    kubectl(&["apply", "-f", site.to_str().unwrap()]);
    let hello = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            "label=io.minik8s.pod.name=hello",
            "--filter",
            "label=io.minik8s.container.name=hello",
        ])
        .output()
        .expect("docker ps");
    let hello = String::from_utf8_lossy(&hello.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        let out = Command::new("docker")
            .args([
                "exec",
                &hello,
                "sh",
                "-c",
                "timeout 3 wget -qO- http://site/",
            ])
            .output()
            .expect("docker exec");
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if last.contains("hello from a kube-rs operator") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    assert!(
        last.contains("hello from a kube-rs operator"),
        "the site through its Service: {last}"
    );
    let table = kubectl(&["get", "ws", "site"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .eq(["NAME", "REPLICAS", "READY", "AGE"]),
        "{table}"
    );
    // Its entry in the namespace's directory, which its finalizer removes
    // when it is deleted (kubectl's delete waits for that).
    let entry = || {
        kubectl(&[
            "get",
            "configmap",
            "websites",
            "-o",
            "jsonpath={.data.site}",
        ])
    };
    assert_eq!(entry(), "http://site.default.svc.cluster.local/");
    assert_eq!(
        kubectl(&[
            "get",
            "website",
            "site",
            "-o",
            "jsonpath={.metadata.finalizers}"
        ]),
        r#"["minik8s.io/website-directory"]"#
    );
    kubectl(&["delete", "website", "site"]);
    assert_eq!(entry(), "", "the directory entry outlived its site");
    kubectl(&["delete", "configmap", "websites"]);
    kubectl(&["delete", "crd", "websites.minik8s.io"]);
}

#[test]
fn the_quick_start_runs_again_and_after_down() {
    let already_running = Command::new("curl")
        .args(["-fsS", &format!("{SERVER}/readyz")])
        .output()
        .is_ok_and(|o| o.status.success());
    // Not `then_some(Down)`: its argument is built either way and, when
    // not kept, dropped at once, which stopped a running quick start.
    let _down = if already_running { None } else { Some(Down) };
    let first = quickstart(&[]);
    check_up(&first);
    // doc/apiserver.md: the named health checks.
    let out = Command::new("curl")
        .args(["-s", "http://127.0.0.1:8080/readyz?verbose"])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[+]etcd ok") && text.ends_with("readyz check passed\n"),
        "{text}"
    );
    // doc/apiserver.md: a learner looks into the embedded store with sqlite3.
    for (query, expect) in [
        ("SELECT id, name, created, deleted FROM kine ORDER BY id DESC LIMIT 5", "|/registry/"),
        ("SELECT value FROM kine WHERE name = '/registry/core/namespaces/default' ORDER BY id DESC LIMIT 1", "\"kind\":\"Namespace\""),
        ("SELECT * FROM meta", "compact_revision|"),
    ] {
        let out = Command::new("sqlite3")
            .args(["/var/lib/minik8s/state.db", query])
            .output()
            .expect("sqlite3 (Debian's package; scripts/test.sh installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(expect), "{query}: {text} {}", String::from_utf8_lossy(&out.stderr));
    }
    // Again on the running cluster, now with Prometheus (doc/monitoring.md).
    let again = quickstart(&["--with-monitoring"]);
    assert!(again.contains("already running"), "{again}");
    check_up(&again);
    monitoring_check::passes(&again, ADMIN);
    dra_check::passes(ADMIN);
    // A tutorial's Deployment by its Docker Hub image name.
    kubectl(&["create", "deployment", "qs-nginx", "--image=nginx:1.25"]);
    kubectl(&["rollout", "status", "deploy/qs-nginx", "--timeout=90s"]);
    kubectl(&["delete", "deploy", "qs-nginx"]);
    a_kube_rs_operator_serves_a_site();
    // Tools nobody here wrote, on the same cluster.
    kr8s_suite::passes(ADMIN);
    kopf_suite::passes(ADMIN);
    helm_check::passes(ADMIN);
    ui_check::passes(ADMIN);
    if already_running {
        return;
    }
    quickstart(&["down"]);
    let after_down = quickstart(&[]);
    check_up(&after_down);
    quickstart(&["down"]);
}
