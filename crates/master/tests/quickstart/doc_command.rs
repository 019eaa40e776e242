//! Runs a command of the docs as a student would type it: with sh, the real
//! kubectl (and any other tool directories) first on PATH, the admin's
//! kubeconfig. Shared by the checks of doc/monitoring.md, doc/helm.md and
//! doc/dra.md.

use std::path::Path;
use std::process::Command;

/// The repository's root (where the docs' relative paths start).
pub fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `command` in `dir` with `tools` and the real kubectl first on PATH:
/// (whether it succeeded, its stdout then stderr).
pub fn run(command: &str, dir: &Path, kubeconfig: &str, tools: &[&Path]) -> (bool, String) {
    let kubectl = minik8s_testkit::real_kubectl();
    let mut path: Vec<String> = tools.iter().map(|t| t.display().to_string()).collect();
    path.push(kubectl.parent().unwrap().display().to_string());
    path.push(std::env::var("PATH").unwrap_or_default());
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path.join(":"))
        .output()
        .expect("sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
