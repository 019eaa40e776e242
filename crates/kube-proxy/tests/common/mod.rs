//! What the kube-proxy tests on real iptables share: running a tool, and
//! refusing to start without the tools they need.
#![allow(dead_code)]

use std::process::{Command, Stdio};

/// Fails the test with the reason when `tool` is not on the PATH.
pub fn need(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test needs `{tool}` (apt-get install iproute2 iptables util-linux busybox-static python3) and root"
    );
}

/// Runs `args` and gives its stdout; fails the test when it fails.
pub fn sh(args: &[&str]) -> String {
    let mut cmd = Command::new(args[0]);
    cmd.args(&args[1..]);
    stdout_of(cmd, args)
}

/// Runs `cmd` (which runs `args`) and gives its stdout; fails the test when it fails.
pub fn stdout_of(mut cmd: Command, args: &[&str]) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
