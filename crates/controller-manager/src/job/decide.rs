//! The Job controller's decisions as pure functions: which pods count as
//! what, how many should run, which completion indexes still need a pod,
//! the pod-failure backoff, and the `completedIndexes` notation.

use std::collections::BTreeSet;
use std::time::Duration;

/// Kubernetes' pod-failure backoff: 10 s doubling per failure, at most 6 min.
pub fn backoff(failures: i32) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let secs = 10u64.saturating_mul(1u64 << (failures - 1).min(16) as u64);
    Duration::from_secs(secs.min(360))
}

/// How many pods should be running (NonIndexed): up to `parallelism`, no
/// more than the completions still missing; a work queue (no `completions`)
/// starts nothing new once one pod has succeeded.
pub fn want_active(completions: Option<i32>, parallelism: i32, succeeded: i32, active: i32) -> i32 {
    let want = match completions {
        Some(c) => (c - succeeded).min(parallelism),
        None if succeeded > 0 => active.min(parallelism),
        None => parallelism,
    };
    want.max(0)
}

/// The success criteria: enough completions (NonIndexed), every index
/// (Indexed), or, for a work queue, one success and nothing running.
pub fn succeeded_enough(
    completions: Option<i32>,
    indexed: bool,
    succeeded: i32,
    completed_indexes: &BTreeSet<i32>,
    active: i32,
) -> bool {
    match (completions, indexed) {
        (Some(c), true) => (0..c).all(|i| completed_indexes.contains(&i)),
        (Some(c), false) => succeeded >= c,
        (None, _) => succeeded > 0 && active == 0,
    }
}

/// The indexes to start a pod for: not completed, not running, lowest first,
/// as many as `parallelism` leaves room for.
pub fn indexes_to_create(
    completions: i32,
    parallelism: i32,
    completed: &BTreeSet<i32>,
    running: &BTreeSet<i32>,
) -> Vec<i32> {
    let room = (parallelism - running.len() as i32).max(0) as usize;
    (0..completions)
        .filter(|i| !completed.contains(i) && !running.contains(i))
        .take(room)
        .collect()
}

/// `completedIndexes` as Kubernetes writes it: "0-2,4,7-8".
pub fn format_indexes(set: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// The inverse of [`format_indexes`]; malformed parts are skipped.
pub fn parse_indexes(s: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_ten_seconds_to_six_minutes() {
        let secs: Vec<u64> = (0..8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 320, 360]);
        assert_eq!(backoff(100).as_secs(), 360);
    }

    #[test]
    fn active_pods_wanted() {
        // 5 completions, 2 at a time.
        assert_eq!(want_active(Some(5), 2, 0, 0), 2);
        assert_eq!(want_active(Some(5), 2, 4, 1), 1);
        assert_eq!(want_active(Some(5), 2, 5, 0), 0);
        // A work queue: once one succeeded, no new pods.
        assert_eq!(want_active(None, 3, 0, 0), 3);
        assert_eq!(want_active(None, 3, 1, 2), 2);
    }

    #[test]
    fn success_criteria() {
        let done: BTreeSet<i32> = [0, 1, 2].into();
        assert!(succeeded_enough(Some(3), true, 3, &done, 0));
        assert!(!succeeded_enough(Some(4), true, 3, &done, 0));
        assert!(succeeded_enough(Some(3), false, 3, &BTreeSet::new(), 0));
        assert!(!succeeded_enough(None, false, 1, &BTreeSet::new(), 1));
        assert!(succeeded_enough(None, false, 1, &BTreeSet::new(), 0));
    }

    #[test]
    fn indexes_lowest_first_within_parallelism() {
        let completed: BTreeSet<i32> = [0, 2].into();
        let running: BTreeSet<i32> = [1].into();
        assert_eq!(indexes_to_create(6, 3, &completed, &running), [3, 4]);
        assert!(indexes_to_create(3, 2, &completed, &running).is_empty());
    }

    #[test]
    fn completed_indexes_notation_round_trips() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 7, 8].into();
        assert_eq!(format_indexes(&set), "0-2,4,7-8");
        assert_eq!(parse_indexes("0-2,4,7-8"), set);
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }
}
