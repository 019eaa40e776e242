//! kr8s' own test suite (the release's source, `scripts/test.sh` fetches it:
//! `ensure_kr8s_suite`) against the quick start's cluster. Its kind fixture
//! is replaced by `tests/kr8s/conftest.py`, which names the tests that need
//! kind's cluster content and why; every other test must pass, and at least
//! [`FLOOR`] of them.

use super::pytest_suite::{self, tools};
use std::path::Path;
use std::process::Command;

/// The kr8s release whose suite runs (pinned with its test tools in
/// `tests/kr8s/requirements.txt`).
const VERSION: &str = "0.20.15";
/// Tests of that release expected to pass against minik8s (274 pass, 19 are
/// skipped: 12 named in the conftest, 7 by kr8s itself; 2 are kr8s' xfails).
const FLOOR: usize = 274;

/// Runs the suite against the cluster of `kubeconfig`; panics naming every
/// failed test with pytest's account of it.
pub fn passes(kubeconfig: &str) {
    let dir = tools(&format!("kr8s-{VERSION}"));
    let python = dir.join("venv/bin/python");
    let source = dir.join("src/kr8s");
    assert!(
        python.exists() && source.join("tests").exists(),
        "kr8s {VERSION}'s suite is not installed at {}: scripts/test.sh installs it (ensure_kr8s_suite)",
        dir.display()
    );
    // The images its fixtures name, from the local ones (as the quick start
    // tags Docker Hub names): pause and a shell with `date` and `sleep`.
    for (local, name) in [
        (
            "minik8s/pause:latest",
            "gcr.io/google_containers/pause:latest",
        ),
        ("minik8s/busybox:latest", "ubuntu:latest"),
    ] {
        let tagged = Command::new("docker").args(["tag", local, name]).status();
        assert!(
            tagged.is_ok_and(|s| s.success()),
            "docker tag {local} {name}"
        );
    }
    let run = pytest_suite::copy_of(&source);
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kr8s/conftest.py");
    std::fs::copy(&shim, run.path().join("conftest.py")).expect("the conftest shim");
    let started = std::time::Instant::now();
    let mut pytest = Command::new(&python);
    pytest
        .args([
            "-m",
            "pytest",
            "kr8s",
            "-o",
            "addopts=",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rfE",
            // Python's own traceback format: pytest's (which parses the
            // test's source) once crashed with an INTERNALERROR while
            // reporting a failure, ending the session without the rest.
            "--tb=native",
            "--timeout=120",
            "-W",
            "ignore",
        ])
        .current_dir(run.path())
        .env("KR8S_KUBECONFIG", kubeconfig)
        .env("KR8S_KUBECTL", minik8s_testkit::real_kubectl());
    let result = pytest_suite::run("kr8s", pytest);
    // The suite deletes its namespaces without waiting: they are all gone
    // within a minute (the namespace controller empties ten at a time), so
    // the rest of the quick-start test meets a calm cluster.
    let gone = minik8s_testkit::poll_blocking(
        120,
        std::time::Duration::from_secs(1),
        "kr8s' namespaces to be deleted",
        || {
            let out = Command::new(minik8s_testkit::real_kubectl())
                .args([
                    "--kubeconfig",
                    kubeconfig,
                    "get",
                    "namespaces",
                    "-o",
                    "name",
                ])
                .output()
                .map_err(|e| e.to_string())?;
            let left = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains("kr8s-pytest-"))
                .count();
            (out.status.success() && left == 0)
                .then_some(started.elapsed())
                .ok_or(format!("{left} namespaces left"))
        },
    );
    eprintln!(
        "kr8s' namespaces gone {:.0} s after the suite started",
        gone.as_secs_f64()
    );
    result.assert_passes(&format!("kr8s {VERSION}'s suite"), FLOOR);
}
