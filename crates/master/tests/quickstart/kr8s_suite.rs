//! kr8s' own test suite (the release's source, `scripts/test.sh` fetches it:
//! `ensure_kr8s_suite`) against the quick start's cluster. Its kind fixture
//! is replaced by `tests/kr8s/conftest.py`, which names the tests that need
//! kind's cluster content and why; every other test must pass, and at least
//! [`FLOOR`] of them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kr8s release whose suite runs (pinned with its test tools in
/// `tests/kr8s/requirements.txt`).
const VERSION: &str = "0.20.15";
/// Tests of that release expected to pass against minik8s (275 pass, 18 are
/// skipped: 11 named in the conftest, 7 by kr8s itself; 2 are kr8s' xfails).
const FLOOR: usize = 274;

fn tools() -> PathBuf {
    std::env::var_os("MINIK8S_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/minik8s")
        })
        .join(format!("kr8s-{VERSION}"))
}

/// The count before `word` in pytest's summary line ("3 failed, 274 passed, ...").
fn count(summary: &str, word: &str) -> usize {
    summary
        .split(',')
        .filter_map(|part| {
            let mut it = part.split_whitespace();
            let n: usize = it.next()?.parse().ok()?;
            (it.next()? == word).then_some(n)
        })
        .sum()
}

/// Runs the suite against the cluster of `kubeconfig`; panics naming every
/// failed test with pytest's account of it.
pub fn passes(kubeconfig: &str) {
    let dir = tools();
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
    let run = tempfile::tempdir().unwrap();
    let copied = Command::new("cp")
        .args(["-r"])
        .arg(&source)
        .arg(run.path())
        .status();
    assert!(copied.is_ok_and(|s| s.success()), "copying kr8s' source");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kr8s/conftest.py");
    std::fs::copy(&shim, run.path().join("conftest.py")).expect("the conftest shim");
    let started = std::time::Instant::now();
    let out = Command::new(&python)
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
            "--timeout=120",
            "-W",
            "ignore",
        ])
        .current_dir(run.path())
        .env("KR8S_KUBECONFIG", kubeconfig)
        .env("KR8S_KUBECTL", minik8s_testkit::real_kubectl())
        .output()
        .expect("running pytest on kr8s' suite");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // The whole report, for a failure's details.
    let report = std::env::temp_dir().join("kr8s-suite.log");
    let _ = std::fs::write(
        &report,
        format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
    );
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" passed") || l.contains(" failed"))
        .unwrap_or("")
        .trim_matches(|c| c == '=' || c == ' ')
        .to_string();
    eprintln!(
        "kr8s {VERSION} suite: {summary} ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    let (passed, failed, errors) = (
        count(&summary, "passed"),
        count(&summary, "failed"),
        count(&summary, "errors") + count(&summary, "error"),
    );
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
    assert!(
        failed == 0 && errors == 0 && passed >= FLOOR,
        "kr8s {VERSION}'s suite: {summary} (at least {FLOOR} must pass, none fail; the report: {})\n{}\n{}",
        report.display(),
        text.lines()
            .filter(|l| l.starts_with("FAILED") || l.starts_with("ERROR") || l.starts_with("E "))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn pytest_summaries_are_counted() {
        let s = "2 failed, 274 passed, 17 skipped, 2 xfailed, 1 error in 96.95s (0:01:36)";
        assert_eq!(super::count(s, "passed"), 274);
        assert_eq!(super::count(s, "failed"), 2);
        assert_eq!(super::count(s, "error"), 1);
        assert_eq!(super::count("274 passed in 9s", "failed"), 0);
    }
}
