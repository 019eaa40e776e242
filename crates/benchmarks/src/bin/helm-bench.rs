//! `helm-bench`: `helm install --wait` of `helm create`'s chart on the quick
//! start's cluster, against its floor on the same cluster: the same
//! manifests (`helm template`) applied with kubectl and waited for with
//! `kubectl rollout status` — what Helm adds is its release bookkeeping
//! (the release Secret, written twice) and its readiness wait.
//!
//! Usage: `helm-bench [ROUNDS]` (default 5). Needs a running quick start
//! (its admin kubeconfig) and Helm's CLI where `scripts/test.sh` installs it
//! (`$MINIK8S_TOOLS/helm-tools/venv/bin/helm`); not a test.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const KUBECONFIG: &str = "/var/lib/minik8s/pki/admin.conf";
const NS: &str = "helm-bench";

/// Runs `program args` (in `dir`), failing with its output; returns stdout.
fn run(program: &Path, args: &[&str], dir: &Path, stdin: Option<&str>) -> anyhow::Result<String> {
    let mut child = Command::new(program)
        .args(["--kubeconfig", KUBECONFIG])
        .args(args)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

/// Long on purpose: a benchmark's main is its scenario, read top to
/// bottom (start what it measures, run it, print the table beside its floor).
fn main() -> anyhow::Result<()> {
    let rounds = benchmarks::numeric_args::<usize>()
        .first()
        .copied()
        .unwrap_or(5);
    let helm = minik8s_testkit::tools_dir().join("helm-tools/venv/bin/helm");
    anyhow::ensure!(
        helm.exists(),
        "no Helm at {}: run scripts/test.sh's ensure_helm_tools",
        helm.display()
    );
    let kubectl = minik8s_testkit::real_kubectl();
    let dir = tempfile::tempdir()?;
    let here = dir.path();
    run(&helm, &["create", "mychart"], here, None)?;
    let _ = run(
        &kubectl,
        &[
            "delete",
            "namespace",
            NS,
            "--ignore-not-found",
            "--timeout=120s",
        ],
        here,
        None,
    );
    run(&kubectl, &["create", "namespace", NS], here, None)?;
    let manifests = run(
        &helm,
        &["template", "web", "./mychart", "-n", NS],
        here,
        None,
    )?;
    let (mut helm_runs, mut floor_runs) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let t = Instant::now();
        run(
            &helm,
            &[
                "install",
                "web",
                "./mychart",
                "-n",
                NS,
                "--wait",
                "--timeout",
                "120s",
            ],
            here,
            None,
        )?;
        helm_runs.push(t.elapsed().as_secs_f64() * 1000.0);
        run(&helm, &["uninstall", "web", "-n", NS, "--wait"], here, None)?;

        let t = Instant::now();
        run(
            &kubectl,
            &["apply", "-n", NS, "-f", "-"],
            here,
            Some(&manifests),
        )?;
        run(
            &kubectl,
            &[
                "rollout",
                "status",
                "-n",
                NS,
                "deploy/web-mychart",
                "--timeout=120s",
            ],
            here,
            None,
        )?;
        floor_runs.push(t.elapsed().as_secs_f64() * 1000.0);
        run(
            &kubectl,
            &["delete", "-n", NS, "-f", "-", "--wait"],
            here,
            Some(&manifests),
        )?;
        eprintln!(
            "round {round}: helm install --wait {:.0} ms, kubectl apply + rollout status {:.0} ms",
            helm_runs[round - 1],
            floor_runs[round - 1]
        );
    }
    let _ = run(
        &kubectl,
        &["delete", "namespace", NS, "--wait=false"],
        here,
        None,
    );
    let (h, hmin) = median(helm_runs);
    let (f, fmin) = median(floor_runs);
    println!("machine: {}", benchmarks::machine());
    println!("| what | median | min |\n| --- | ---: | ---: |");
    println!(
        "| helm install --wait (helm create's chart, {rounds} rounds) | {h:.0} ms | {hmin:.0} ms |"
    );
    println!("| floor: kubectl apply of the same manifests + rollout status | {f:.0} ms | {fmin:.0} ms |");
    Ok(())
}
