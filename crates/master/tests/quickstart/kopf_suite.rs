//! kopf's own end-to-end suite (`pytest --only-e2e`: every example under
//! `examples/` run as an operator with `kopf run`, an object created and
//! deleted, the operator's log checked), from the release's source
//! (`scripts/test.sh` fetches it: `ensure_kopf_suite`), against the quick
//! start's cluster. The admission example registers its webhooks with the
//! apiserver and serves them with kopf's own self-signed certificate.

use super::pytest_suite::{self, tools};
use std::path::Path;
use std::process::Command;

/// The kopf release whose suite runs (pinned with its test tools in
/// `tests/kopf/requirements.txt`).
const VERSION: &str = "1.45.2";
/// Tests of that release expected to pass against minik8s: the 14 examples
/// tests/e2e runs, and the examples' own tests (09, 10, 11).
const FLOOR: usize = 17;

/// Runs the suite against the cluster of `kubeconfig` (kopf, pykube and the
/// suite's `kubectl` calls all read it); panics naming every failed test.
pub fn passes(kubeconfig: &str) {
    let dir = tools(&format!("kopf-{VERSION}"));
    let python = dir.join("venv/bin/python");
    let source = dir.join("src");
    assert!(
        python.exists() && source.join("tests/e2e").exists(),
        "kopf {VERSION}'s suite is not installed at {}: scripts/test.sh installs it (ensure_kopf_suite)",
        dir.display()
    );
    let run = pytest_suite::copy_of(&source);
    // The suite calls `kubectl`: the real one of the release we speak.
    let kubectl = minik8s_testkit::real_kubectl();
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut pytest = Command::new(&python);
    pytest
        .args([
            "-m",
            "pytest",
            "--only-e2e",
            "tests/e2e",
            "examples",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rfE",
            // Python's traceback format (see kr8s_suite.rs).
            "--tb=native",
            "--timeout=300",
            // `tests/kopf/minik8s_warnings.py`: asyncio's "unclosed
            // transport" from the operator's own event loop is reported, not
            // made an error (every other warning still is).
            "-p",
            "minik8s_warnings",
        ])
        .current_dir(run.path().join("src"))
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kopf"),
        );
    let result = pytest_suite::run("kopf", pytest);
    // What the examples leave behind by design (kopf does not remove the
    // webhook configurations it manages, nor the CRDs the suite applied).
    for args in [
        ["delete", "validatingwebhookconfiguration", "auto.kopf.dev"],
        ["delete", "mutatingwebhookconfiguration", "auto.kopf.dev"],
        ["delete", "crd", "kopfexamples.kopf.dev"],
        ["delete", "crd", "kopfpeerings.kopf.dev"],
    ] {
        let _ = Command::new(&kubectl)
            .args(["--kubeconfig", kubeconfig, "--ignore-not-found"])
            .args(args)
            .output();
    }
    release_kopf_finalizers(&kubectl, kubeconfig);
    result.assert_passes(&format!("kopf {VERSION}'s e2e suite"), FLOOR);
}

/// kopf's finalizer on an object.
const KOPF_FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";

/// The examples that handle pods (10-builtins, 13-hooks, 99-all-at-once)
/// watch every namespace and put kopf's finalizer on each pod they see,
/// to be removed when they handle its deletion. With the operators gone,
/// those pods could never be deleted (as on Kubernetes): the finalizer is
/// taken off, as a user does after removing such an operator.
fn release_kopf_finalizers(kubectl: &Path, kubeconfig: &str) {
    let out = Command::new(kubectl)
        .args([
            "--kubeconfig",
            kubeconfig,
            "get",
            "pods",
            "-A",
            "-o",
            "json",
        ])
        .output()
        .expect("kubectl get pods");
    let pods: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let meta = &pod["metadata"];
        let finalizers = meta["finalizers"].as_array().cloned().unwrap_or_default();
        let Some(at) = finalizers.iter().position(|f| f == KOPF_FINALIZER) else {
            continue;
        };
        // A test of the position with the removal: a finalizer list that
        // changed meanwhile is left alone (the patch fails as a whole).
        let patch = serde_json::json!([
            {"op": "test", "path": format!("/metadata/finalizers/{at}"), "value": KOPF_FINALIZER},
            {"op": "remove", "path": format!("/metadata/finalizers/{at}")},
        ]);
        let (ns, name) = (
            meta["namespace"].as_str().unwrap_or(""),
            meta["name"].as_str().unwrap_or(""),
        );
        let _ = Command::new(kubectl)
            .args(["--kubeconfig", kubeconfig, "-n", ns, "patch", "pod", name])
            .args(["--type=json", "-p", &patch.to_string()])
            .output();
    }
}
