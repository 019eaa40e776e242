//! Helpers the lab tests share: the binaries, shell commands, polling.
#![allow(dead_code)] // each test file uses a part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// target/debug, where this test's `master` is (the other binaries are built
/// beside it by the same `cargo test --workspace` or `cargo build --bins`).
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_master"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// `bash -c SCRIPT`: stdout on success, panics with stderr otherwise.
pub fn sh(script: &str) -> String {
    let out = run(Command::new("bash").arg("-c").arg(script));
    assert!(
        out.status.success(),
        "`{script}` failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Like [`sh`] but returns None on failure.
pub fn try_sh(script: &str) -> Option<String> {
    let out = run(Command::new("bash").arg("-c").arg(script));
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Polls `f` until it returns Some, or panics after `secs` with `what`.
pub fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let every = Duration::from_millis(250);
    minik8s_testkit::poll_blocking(secs, every, what, || f().ok_or_else(|| "not yet".into()))
}
