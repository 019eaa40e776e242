//! A Job's `podFailurePolicy` and `successPolicy` as pure decisions: what a
//! failed pod means (fail the Job, ignore the failure, count it), and
//! whether the completed indexes satisfy a success rule.

use super::decide::parse_indexes;
use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyRule, SuccessPolicy};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeSet;

/// What a failed pod means under the Job's pod failure policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureAction {
    /// The Job fails at once (reason `PodFailurePolicy`), with this message.
    FailJob(String),
    /// The pod's index fails (with `backoffLimitPerIndex`).
    FailIndex,
    /// The failure does not count toward the backoff limit.
    Ignore,
    /// The failure counts, as without a policy.
    Count,
}

/// The action of the first rule `pod` matches (Count when none does).
pub fn failure_action(policy: Option<&PodFailurePolicy>, pod: &Pod) -> FailureAction {
    let Some(policy) = policy else {
        return FailureAction::Count;
    };
    for (index, rule) in policy.rules.iter().enumerate() {
        let Some(why) = rule_match(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => {
                FailureAction::FailJob(format!("{why} matching FailJob rule at index {index}"))
            }
            "FailIndex" => FailureAction::FailIndex,
            "Ignore" => FailureAction::Ignore,
            _ => FailureAction::Count,
        };
    }
    FailureAction::Count
}

/// How `pod` matches `rule`, in the words of Kubernetes' message.
fn rule_match(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let status = pod.status.as_ref()?;
    if let Some(codes) = &rule.on_exit_codes {
        let containers = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten());
        for c in containers {
            if codes.container_name.as_ref().is_some_and(|n| *n != c.name) {
                continue;
            }
            let Some(code) = c
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
            else {
                continue;
            };
            // A container that succeeded matches no rule.
            let listed = codes.values.contains(&code);
            let hit = match codes.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if code != 0 && hit {
                return Some(format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code}",
                    c.name
                ));
            }
        }
    }
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let wanted = pattern
            .status
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("True");
        let has = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == pattern.type_ && c.status == wanted);
        if has {
            return Some(format!("Pod {ns}/{name} has condition {}", pattern.type_));
        }
    }
    None
}

/// The pod annotation with how many times its index failed before it
/// (`backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

/// One index's failures so far (`backoffLimitPerIndex`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct IndexFailures {
    /// Counted failures: the latest pod's annotation, plus one if it failed.
    pub count: i32,
    /// When its last counted failure ended.
    pub last: Option<chrono::DateTime<chrono::Utc>>,
    /// A FailIndex rule matched one of its pods.
    pub fail_index: bool,
}

/// Each index's failures, from its pods (failed ones whose failure the policy
/// does not ignore count one more than their annotation says).
pub fn index_failures(
    pods: &[std::sync::Arc<Pod>],
    policy: Option<&PodFailurePolicy>,
    index_of: impl Fn(&Pod) -> Option<i32>,
) -> std::collections::BTreeMap<i32, IndexFailures> {
    let mut out: std::collections::BTreeMap<i32, IndexFailures> = Default::default();
    for p in pods {
        let Some(i) = index_of(p) else { continue };
        let before: i32 = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INDEX_FAILURE_COUNT))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let status = p.status.as_ref();
        let failed = status.and_then(|s| s.phase.as_deref()) == Some("Failed");
        let action = failed.then(|| failure_action(policy, p));
        let counts = matches!(
            action,
            Some(FailureAction::Count | FailureAction::FailJob(_) | FailureAction::FailIndex)
        );
        let entry = out.entry(i).or_default();
        entry.count = entry.count.max(before + i32::from(counts));
        entry.fail_index |= action == Some(FailureAction::FailIndex);
        if counts {
            let finished = status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
                .map(minik8s_api::meta::utc_of)
                .max();
            entry.last = entry.last.max(finished);
        }
    }
    out
}

/// The index of the first success rule the completed indexes satisfy.
pub fn success_rule_met(
    policy: Option<&SuccessPolicy>,
    completed: &BTreeSet<i32>,
) -> Option<usize> {
    let policy = policy?;
    policy.rules.iter().position(|rule| {
        let within: Vec<i32> = match &rule.succeeded_indexes {
            Some(s) => {
                let wanted = parse_indexes(s);
                if rule.succeeded_count.is_none() {
                    // Every listed index.
                    return !wanted.is_empty() && wanted.is_subset(completed);
                }
                completed.intersection(&wanted).copied().collect()
            }
            None => completed.iter().copied().collect(),
        };
        rule.succeeded_count
            .is_some_and(|n| within.len() as i32 >= n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [
                {"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": exit}}}]}
        }))
        .unwrap()
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({"rules": rules})).unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let p = policy(json!([
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1, 42]}},
        ]));
        assert_eq!(
            failure_action(Some(&p), &failed_pod(42, json!([]))),
            FailureAction::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0".into()
            )
        );
        let disrupted = failed_pod(1, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(failure_action(Some(&p), &disrupted), FailureAction::Ignore);
        assert_eq!(
            failure_action(Some(&p), &failed_pod(1, json!([]))),
            FailureAction::Count
        );
        assert_eq!(
            failure_action(Some(&p), &failed_pod(7, json!([]))),
            FailureAction::Ignore
        );
        assert_eq!(
            failure_action(None, &failed_pod(42, json!([]))),
            FailureAction::Count
        );
        let on_condition = policy(
            json!([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]),
        );
        assert_eq!(
            failure_action(Some(&on_condition), &disrupted),
            FailureAction::FailJob(
                "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0".into()
            )
        );
    }

    #[test]
    fn each_index_counts_its_own_failures() {
        let pod = |index: i32, before: i32, phase: &str, exit: i32| {
            std::sync::Arc::new(
                serde_json::from_value::<Pod>(json!({
                    "metadata": {"name": format!("p{index}"), "namespace": "ns",
                                 "annotations": {INDEX_FAILURE_COUNT: before.to_string(), "i": index.to_string()}},
                    "status": {"phase": phase, "containerStatuses": [
                        {"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                         "state": {"terminated": {"exitCode": exit, "finishedAt": "2026-01-01T00:00:00Z"}}}]}
                }))
                .unwrap(),
            )
        };
        let index = |p: &Pod| p.metadata.annotations.as_ref()?.get("i")?.parse().ok();
        let p = policy(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [9]}},
        ]));
        let pods = [
            pod(0, 0, "Failed", 1),
            pod(0, 1, "Failed", 1),
            pod(1, 0, "Failed", 3),
            pod(2, 0, "Failed", 9),
            pod(3, 2, "Running", 0),
        ];
        let f = index_failures(&pods, Some(&p), index);
        assert_eq!(
            f[&0].count, 2,
            "the second pod of index 0 says one failure before it"
        );
        assert!(f[&0].last.is_some());
        assert_eq!(f[&1].count, 0, "an ignored failure does not count");
        assert!(f[&2].fail_index && f[&2].count == 1);
        assert_eq!(f[&3].count, 2);
    }

    #[test]
    fn success_rules_by_indexes_count_or_both() {
        let policy: SuccessPolicy = serde_json::from_value(json!({"rules": [
            {"succeededIndexes": "0,2-3"},
            {"succeededCount": 3},
            {"succeededIndexes": "4-9", "succeededCount": 2},
        ]}))
        .unwrap();
        let done = |v: &[i32]| v.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(success_rule_met(Some(&policy), &done(&[0, 2])), None);
        assert_eq!(success_rule_met(Some(&policy), &done(&[0, 2, 3])), Some(0));
        assert_eq!(success_rule_met(Some(&policy), &done(&[1, 4, 5])), Some(1));
        assert_eq!(success_rule_met(Some(&policy), &done(&[5, 9])), Some(2));
        assert_eq!(success_rule_met(None, &done(&[0, 1, 2, 3])), None);
    }
}
