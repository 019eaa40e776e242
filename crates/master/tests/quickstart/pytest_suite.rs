//! What the suites of other projects (kr8s, kopf) run through: their
//! release's source and a venv of pinned tools under `$MINIK8S_TOOLS`
//! (`scripts/lib/common.sh` installs them), pytest in a copy of the source,
//! and pytest's summary read back as counts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `$MINIK8S_TOOLS/<dir>`, where `scripts/lib/common.sh` installs a tool.
pub fn tools(dir: &str) -> PathBuf {
    minik8s_testkit::tools_dir().join(dir)
}

/// The count before `word` in pytest's summary line ("3 failed, 274 passed, ...").
pub fn count(summary: &str, word: &str) -> usize {
    summary
        .split(',')
        .filter_map(|part| {
            let mut it = part.split_whitespace();
            let n: usize = it.next()?.parse().ok()?;
            (it.next()? == word).then_some(n)
        })
        .sum()
}

/// A finished pytest run: its summary line and where its whole report is.
pub struct Run {
    pub summary: String,
    pub text: String,
    pub stderr: String,
    pub report: PathBuf,
}

impl Run {
    pub fn passed(&self) -> usize {
        count(&self.summary, "passed")
    }

    pub fn failed(&self) -> usize {
        count(&self.summary, "failed")
            + count(&self.summary, "errors")
            + count(&self.summary, "error")
    }

    /// pytest's account of each failure (its `FAILED`, `ERROR` and `E` lines).
    pub fn failures(&self) -> String {
        self.text
            .lines()
            .filter(|l| l.starts_with("FAILED") || l.starts_with("ERROR") || l.starts_with("E "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Panics unless nothing failed and at least `floor` passed, naming
    /// every failed test with pytest's account of it.
    pub fn assert_passes(&self, what: &str, floor: usize) {
        assert!(
            self.failed() == 0 && self.passed() >= floor && !self.summary.is_empty(),
            "{what}: {} (at least {floor} must pass, none fail; the report: {})\n{}\n{}",
            self.summary,
            self.report.display(),
            self.failures(),
            self.stderr
        );
    }
}

/// Copies `source` (a directory) into a fresh temporary directory, so a
/// suite's runs never change the installed copy; returns the copy's parent.
pub fn copy_of(source: &Path) -> tempfile::TempDir {
    let run = tempfile::tempdir().unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(source)
        .arg(run.path())
        .status();
    assert!(
        copied.is_ok_and(|s| s.success()),
        "copying {}",
        source.display()
    );
    run
}

/// Runs `command` (pytest), keeps its whole report at
/// `$TMPDIR/<name>-suite.log` and reads its summary line.
pub fn run(name: &str, mut command: Command) -> Run {
    let started = std::time::Instant::now();
    let out: Output = command
        .output()
        .unwrap_or_else(|e| panic!("running pytest on {name}'s suite: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report = std::env::temp_dir().join(format!("{name}-suite.log"));
    let _ = std::fs::write(&report, format!("{text}{stderr}"));
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" passed") || l.contains(" failed") || l.contains(" error"))
        .unwrap_or("")
        .trim_matches(|c| c == '=' || c == ' ')
        .to_string();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("{name} suite: {summary} ({seconds:.0} s)");
    Run {
        summary,
        text,
        stderr,
        report,
    }
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
