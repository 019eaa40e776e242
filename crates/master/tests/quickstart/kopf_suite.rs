//! kopf's own end-to-end suite (`pytest --only-e2e`: every example under
//! `examples/` run as an operator with `kopf run`, an object created and
//! deleted, the operator's log checked), from the release's source
//! (`scripts/test.sh` fetches it: `ensure_kopf_suite`), against the quick
//! start's cluster. The admission example registers its webhooks with the
//! apiserver and serves them with kopf's own self-signed certificate.

use super::pytest_suite::{self, tools};
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
            "--timeout=300",
        ])
        .current_dir(run.path().join("src"))
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path);
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
    result.assert_passes(&format!("kopf {VERSION}'s e2e suite"), FLOOR);
}
