//! `reconcile`: one Job's sync (Kubernetes' `syncJob` with
//! `trackJobStatusAndRemoveFinalizers` and `manageJob`).

use super::decide::{self, format_indexes, parse_indexes};
use super::*;
use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use minik8s_api::meta::now_rfc3339;
use minik8s_client::controller::Action;
use minik8s_client::events::EventType;
use std::collections::BTreeSet;
use std::time::Duration;

/// What the counting step found, for the status.
struct Tally {
    indexed: bool,
    succeeded: i32,
    failed: i32,
    completed: BTreeSet<i32>,
    /// With `backoffLimitPerIndex`: the indexes that failed for good.
    failed_indexes: Option<BTreeSet<i32>>,
    /// With `backoffLimitPerIndex`: each index's failures (empty otherwise).
    index_failures: std::collections::BTreeMap<i32, policy::IndexFailures>,
    terminating: i32,
}

const MAX_FAILED_INDEXES: (&str, &str) = (
    "MaxFailedIndexesExceeded",
    "Job has exceeded the specified maximal number of failed indexes",
);
const FAILED_INDEXES: (&str, &str) = ("FailedIndexes", "Job has failed indexes");

/// Why a Job stops: (condition reason, message).
type Verdict = (String, String);

fn verdict(reason: &str, message: &str) -> Verdict {
    (reason.to_string(), message.to_string())
}

const BACKOFF_EXCEEDED: (&str, &str) = (
    "BackoffLimitExceeded",
    "Job has reached the specified backoff limit",
);
const DEADLINE_EXCEEDED: (&str, &str) = (
    "DeadlineExceeded",
    "Job was active longer than specified deadline",
);
const COMPLETIONS_REACHED: (&str, &str) = (
    "CompletionsReached",
    "Reached expected number of succeeded pods",
);

/// The reason and message a condition already carries.
fn carried(c: &Value) -> Verdict {
    verdict(
        c["reason"].as_str().unwrap_or(""),
        c["message"].as_str().unwrap_or(""),
    )
}

fn set_condition(conditions: &mut Vec<Value>, new: Value) {
    match conditions.iter_mut().find(|c| c["type"] == new["type"]) {
        Some(c) if c["status"] == new["status"] => {}
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

fn condition_true(conditions: &[Value], type_: &str) -> Option<Value> {
    conditions
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
        .cloned()
}

fn time(
    v: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    v.as_ref().map(minik8s_api::meta::utc_of)
}

impl Reconciler for JobController {
    const NAME: &'static str = "job";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let job = self.jobs.get(key)?;
        let settled = crate::journey::job_settled(&job);
        crate::journey::context_unless(&self.client, &job.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        // The Job as stored, not as cached: its counters must never be older
        // than the pods' finalizers this controller already removed.
        let job = match self.jobs.get(key) {
            Some(_) => self.fresh_job(ns, name).await?,
            None => None,
        };
        let Some(job) = job else {
            self.release_orphans(ns, name).await?;
            return Ok(Action::Done);
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let spec = job.spec.clone().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        let pods = self.owned_pods(ns, &uid);
        let now = chrono::Utc::now();
        let now_s = now_rfc3339();
        let mut conditions: Vec<Value> = status
            .conditions
            .iter()
            .flatten()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        let finished = has_condition(&job, "Complete") || has_condition(&job, "Failed");
        let targeted = condition_true(&conditions, "SuccessCriteriaMet").is_some()
            || condition_true(&conditions, "FailureTarget").is_some();
        let winding_down = finished || targeted || spec.suspend.unwrap_or(false);

        // 1. Count every finished pod exactly once: first into
        // uncountedTerminatedPods, then its finalizer goes, then into the totals.
        let counted = self
            .count_finished(&job, &spec, &status, &pods, winding_down)
            .await?;
        if !counted.failed.is_empty() {
            self.note_failure(&uid);
        }
        let tally = tally(&spec, &status, &pods, &counted);
        let active: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| pod_state(p) == PodState::Active)
            .cloned()
            .collect();
        let mut start_time = time(&status.start_time);

        // 2. Terminal: a target condition first, the final one once no pod runs.
        if finished {
            let st = self.status_body(&tally, &[], start_time, conditions);
            self.write_status(&job, st).await?;
            return Ok(Action::Done);
        }
        let past_deadline = match (spec.active_deadline_seconds, start_time) {
            (Some(deadline), Some(start)) => (now - start).num_seconds() >= deadline,
            _ => false,
        };
        let end = ending(
            &spec,
            &conditions,
            &pods,
            &tally,
            active.len(),
            past_deadline,
        );
        if let Some(end) = end {
            let (conditions, completed_now) = self
                .wind_down(&job, end, &active, conditions, tally.terminating, &now_s)
                .await?;
            let mut st = self.status_body(&tally, &[], start_time, conditions);
            if completed_now {
                st["completionTime"] = json!(now_s);
            }
            self.write_status(&job, st).await?;
            return Ok(Action::Done);
        }

        // 3. Suspended: no pods, no clock.
        if spec.suspend.unwrap_or(false) {
            return self
                .suspend(&job, &tally, &active, conditions, &now_s)
                .await;
        }
        if self.resumed(&job, &mut conditions, &now_s).await {
            start_time = None;
        }
        let start = *start_time.get_or_insert(now);

        // 4. Pods toward parallelism, after the failure backoff, once the
        // cache shows this controller's own last creates and deletes.
        let mut again = self
            .manage_pods(key, &job, &spec, &tally, &active, now)
            .await?;
        if let Some(deadline) = spec.active_deadline_seconds {
            let left = deadline - (now - start).num_seconds();
            let at = Duration::from_secs(left.max(1) as u64);
            again = again.no_later_than(at);
        }
        let st = self.status_body(&tally, &active, Some(start), conditions);
        self.write_status(&job, st).await?;
        Ok(again)
    }
}

/// The pods this sync counts as finished, by uid: the ones recorded in
/// `uncountedTerminatedPods` before, and the ones it recorded now.
struct Counted {
    succeeded: BTreeSet<String>,
    failed: BTreeSet<String>,
}

impl JobController {
    /// A suspended Job: its active pods deleted, `Suspended` set (with an
    /// event the first time), its status written without a start time.
    async fn suspend(
        &self,
        job: &Job,
        tally: &Tally,
        active: &[Arc<Pod>],
        mut conditions: Vec<Value>,
        now: &str,
    ) -> Result<Action, ClientError> {
        for p in active {
            self.delete_pod(job, p).await?;
        }
        if condition_true(&conditions, "Suspended").is_none() {
            set_condition(
                &mut conditions,
                condition("Suspended", "True", "JobSuspended", "Job suspended", now),
            );
            self.recorder
                .event(job, EventType::Normal, "Suspended", "Job suspended")
                .await;
        }
        let st = self.status_body(tally, &[], None, conditions);
        self.write_status(job, st).await?;
        Ok(Action::Done)
    }

    /// A Job suspended before and not now: `Suspended` turns False, with an
    /// event; true when it did (its clock starts again).
    async fn resumed(&self, job: &Job, conditions: &mut Vec<Value>, now: &str) -> bool {
        if condition_true(conditions, "Suspended").is_none() {
            return false;
        }
        set_condition(
            conditions,
            condition("Suspended", "False", "JobResumed", "Job resumed", now),
        );
        self.recorder
            .event(job, EventType::Normal, "Resumed", "Job resumed")
            .await;
        true
    }
}

/// How a Job ends: the target condition written first, the final one
/// once no pod runs, and why.
struct Ending {
    target: &'static str,
    final_type: &'static str,
    verdict: Verdict,
}

/// The totals and indexes of the status, from what was counted before and now.
fn tally(spec: &JobSpec, status: &JobStatus, pods: &[Arc<Pod>], counted: &Counted) -> Tally {
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let mut succeeded = status.succeeded.unwrap_or(0) + counted.succeeded.len() as i32;
    let failed = status.failed.unwrap_or(0) + counted.failed.len() as i32;
    let mut completed = parse_indexes(status.completed_indexes.as_deref().unwrap_or(""));
    if indexed {
        for p in pods.iter().filter(|p| {
            counted
                .succeeded
                .contains(p.metadata.uid.as_deref().unwrap_or(""))
        }) {
            if let Some(i) = index_of(p).filter(|i| *i < spec.completions.unwrap_or(0)) {
                completed.insert(i);
            }
        }
        succeeded = succeeded.max(completed.len() as i32);
    }
    let terminating = pods
        .iter()
        .filter(|p| pod_state(p) == PodState::Terminating)
        .count() as i32;
    // backoffLimitPerIndex: each index has its own failures and limit.
    let per_index = spec.backoff_limit_per_index.filter(|_| indexed);
    let index_failures = match per_index {
        Some(_) => policy::index_failures(pods, spec.pod_failure_policy.as_ref(), index_of),
        None => Default::default(),
    };
    let failed_indexes = per_index.map(|limit| {
        let mut set = parse_indexes(status.failed_indexes.as_deref().unwrap_or(""));
        for (i, f) in &index_failures {
            if (f.fail_index || f.count > limit) && !completed.contains(i) {
                set.insert(*i);
            }
        }
        set
    });
    Tally {
        indexed,
        succeeded,
        failed,
        completed,
        failed_indexes,
        index_failures,
        terminating,
    }
}

/// Whether and how the Job ends now (Kubernetes' order: a target already
/// set, a FailJob rule, too many failed indexes, every index failed or
/// done, the backoff limit, the deadline; then success by rule or count).
fn ending(
    spec: &JobSpec,
    conditions: &[Value],
    pods: &[Arc<Pod>],
    t: &Tally,
    active: usize,
    past_deadline: bool,
) -> Option<Ending> {
    // A failed pod a FailJob rule matches fails the Job at once.
    let fail_job = pods
        .iter()
        .filter(|p| pod_state(p) == PodState::Failed)
        .find_map(
            |p| match policy::failure_action(spec.pod_failure_policy.as_ref(), p) {
                policy::FailureAction::FailJob(message) => Some(message),
                _ => None,
            },
        );
    let failed_indexes = t.failed_indexes.as_ref();
    let failure = match condition_true(conditions, "FailureTarget") {
        Some(c) => Some(carried(&c)),
        None => match fail_job {
            Some(message) => Some(verdict("PodFailurePolicy", &message)),
            None if failed_indexes.is_some_and(|f| {
                spec.max_failed_indexes
                    .is_some_and(|max| f.len() as i32 > max)
            }) =>
            {
                Some(verdict(MAX_FAILED_INDEXES.0, MAX_FAILED_INDEXES.1))
            }
            None if failed_indexes.is_some_and(|f| {
                !f.is_empty()
                    && (0..spec.completions.unwrap_or(0))
                        .all(|i| f.contains(&i) || t.completed.contains(&i))
            }) =>
            {
                Some(verdict(FAILED_INDEXES.0, FAILED_INDEXES.1))
            }
            None if t.failed > spec.backoff_limit.unwrap_or(6) => {
                Some(verdict(BACKOFF_EXCEEDED.0, BACKOFF_EXCEEDED.1))
            }
            None if past_deadline => Some(verdict(DEADLINE_EXCEEDED.0, DEADLINE_EXCEEDED.1)),
            None => None,
        },
    };
    if let Some(verdict) = failure {
        return Some(Ending {
            target: "FailureTarget",
            final_type: "Failed",
            verdict,
        });
    }
    let by_rule = policy::success_rule_met(spec.success_policy.as_ref(), &t.completed)
        .filter(|_| t.indexed)
        .map(|i| verdict("SuccessPolicy", &format!("Matched rules at index {i}")));
    let success = match condition_true(conditions, "SuccessCriteriaMet") {
        Some(c) => Some(carried(&c)),
        None if by_rule.is_some() => by_rule,
        None if decide::succeeded_enough(
            spec.completions,
            t.indexed,
            t.succeeded,
            &t.completed,
            active as i32,
        ) =>
        {
            Some(verdict(COMPLETIONS_REACHED.0, COMPLETIONS_REACHED.1))
        }
        None => None,
    };
    success.map(|verdict| Ending {
        target: "SuccessCriteriaMet",
        final_type: "Complete",
        verdict,
    })
}

impl JobController {
    /// A Job that is gone: its pods must not keep the tracking finalizer forever.
    async fn release_orphans(&self, ns: &str, name: &str) -> Result<(), ClientError> {
        for p in self.pods.by_index(NAMESPACE_INDEX, ns) {
            let mine = controller_of(&p.metadata).is_some_and(|(_, k, n)| k == "Job" && n == name);
            if mine && has_tracking_finalizer(&p) {
                self.release_pod(&p).await?;
            }
        }
        Ok(())
    }

    /// Counts every finished pod exactly once: records the newly finished
    /// ones in `uncountedTerminatedPods`, then removes their tracking
    /// finalizers (and those of failures the pod failure policy ignores,
    /// and of pods deleted while the Job winds down).
    async fn count_finished(
        &self,
        job: &Job,
        spec: &JobSpec,
        status: &JobStatus,
        pods: &[Arc<Pod>],
        winding_down: bool,
    ) -> Result<Counted, ClientError> {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let mut to_succeed: BTreeSet<String> = uncounted
            .succeeded
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut to_fail: BTreeSet<String> =
            uncounted.failed.unwrap_or_default().into_iter().collect();
        let mut newly = false;
        let mut ignored: Vec<Arc<Pod>> = Vec::new();
        let already = self.still_counted(&uid, pods);
        for p in pods.iter().filter(|p| has_tracking_finalizer(p)) {
            let pod_uid = p.metadata.uid.clone().unwrap_or_default();
            if to_succeed.contains(&pod_uid)
                || to_fail.contains(&pod_uid)
                || already.contains(&pod_uid)
            {
                continue;
            }
            let failure_counts = || {
                let action = policy::failure_action(spec.pod_failure_policy.as_ref(), p);
                action != policy::FailureAction::Ignore
            };
            match pod_state(p) {
                PodState::Succeeded => newly |= to_succeed.insert(pod_uid),
                // A failure the pod failure policy ignores is not counted at all.
                PodState::Failed if !failure_counts() => ignored.push(p.clone()),
                PodState::Failed => newly |= to_fail.insert(pod_uid),
                // Deleted under the Job (not by its own winding down): a failure.
                PodState::Terminating if !winding_down && !failure_counts() => {
                    ignored.push(p.clone())
                }
                PodState::Terminating if !winding_down => newly |= to_fail.insert(pod_uid),
                PodState::Terminating => self.release_pod(p).await?,
                PodState::Active => {}
            }
        }
        if newly {
            let record = json!({"uncountedTerminatedPods": {
                "succeeded": to_succeed.iter().collect::<Vec<_>>(), "failed": to_fail.iter().collect::<Vec<_>>()}});
            self.client
                .patch_status::<Job>(
                    &job.metadata,
                    content::MERGE_PATCH,
                    &json!({"status": record}),
                )
                .await?;
        }
        for p in pods.iter().filter(|p| has_tracking_finalizer(p)) {
            let pod_uid = p.metadata.uid.clone().unwrap_or_default();
            if to_succeed.contains(&pod_uid) || to_fail.contains(&pod_uid) {
                self.release_pod(p).await?;
            }
        }
        for p in &ignored {
            self.release_pod(p).await?;
        }
        let ignored_uids = ignored.iter().filter_map(|p| p.metadata.uid.clone());
        self.mark_counted(
            &uid,
            to_succeed
                .iter()
                .chain(&to_fail)
                .cloned()
                .chain(ignored_uids),
        );
        Ok(Counted {
            succeeded: to_succeed,
            failed: to_fail,
        })
    }

    /// Ends the Job as `end` says: the target condition (a failure also as
    /// a Warning event), the active pods deleted, and the final condition
    /// once none runs (`terminating` counts the pods still going). The
    /// conditions, and whether the Job completed now.
    async fn wind_down(
        &self,
        job: &Arc<Job>,
        end: Ending,
        active: &[Arc<Pod>],
        mut conditions: Vec<Value>,
        terminating: i32,
        now_s: &str,
    ) -> Result<(Vec<Value>, bool), ClientError> {
        let (reason, message) = (end.verdict.0.as_str(), end.verdict.1.as_str());
        if condition_true(&conditions, end.target).is_none() {
            set_condition(
                &mut conditions,
                condition(end.target, "True", reason, message, now_s),
            );
            if end.final_type == "Failed" {
                self.recorder
                    .event(&**job, EventType::Warning, reason, message)
                    .await;
            }
        }
        for p in active {
            self.delete_pod(job, p).await?;
        }
        let mut completed_now = false;
        if active.is_empty() && terminating == 0 {
            set_condition(
                &mut conditions,
                condition(end.final_type, "True", reason, message, now_s),
            );
            if end.final_type == "Complete" {
                completed_now = true;
                self.recorder
                    .event(&**job, EventType::Normal, "Completed", "Job completed")
                    .await;
            }
        }
        Ok((conditions, completed_now))
    }

    /// Creates and deletes pods toward parallelism (Indexed Jobs: one pod
    /// per missing index, each after its own backoff with a per-index
    /// limit), once the cache shows this controller's own last creates and
    /// deletes. When to sync again.
    async fn manage_pods(
        &self,
        key: &str,
        job: &Arc<Job>,
        spec: &JobSpec,
        tally: &Tally,
        active: &[Arc<Pod>],
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Action, ClientError> {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let parallelism = spec.parallelism.unwrap_or(1);
        let wait = self.backoff_left(&uid, tally.failed);
        let mut again = Action::Done;
        if !self.expectations.satisfied(key) {
            return Ok(crate::expectations::action(false));
        }
        if tally.indexed {
            let mut running = BTreeSet::new();
            let mut extra = Vec::new();
            for p in active {
                match index_of(p) {
                    Some(i) if !tally.completed.contains(&i) && running.insert(i) => {}
                    // A duplicate or finished index: the extra pod goes.
                    _ => extra.push(p.clone()),
                }
            }
            self.delete_pods(key, job, &extra).await?;
            let completions = spec.completions.unwrap_or(0);
            // Failed indexes are done too: nothing starts for them again.
            let mut done = tally.completed.clone();
            done.extend(tally.failed_indexes.iter().flatten());
            let missing = decide::indexes_to_create(completions, parallelism, &done, &running);
            if tally.failed_indexes.is_some() {
                // Each index waits out its own backoff.
                let mut ready = Vec::new();
                for i in missing {
                    let f = tally.index_failures.get(&i).cloned().unwrap_or_default();
                    let left = f.last.and_then(|last| {
                        let elapsed = (now - last).to_std().unwrap_or_default();
                        decide::backoff(f.count)
                            .checked_sub(elapsed)
                            .filter(|d| !d.is_zero())
                    });
                    match left {
                        Some(d) => again = again.no_later_than(d),
                        None => ready.push((Some(i), f.count)),
                    }
                }
                self.create_pods(key, job, &ready).await?;
            } else if !missing.is_empty() {
                match wait {
                    Some(left) => again = Action::RequeueAfter(left),
                    None => {
                        let indexes: Vec<(Option<i32>, i32)> =
                            missing.into_iter().map(|i| (Some(i), 0)).collect();
                        self.create_pods(key, job, &indexes).await?;
                    }
                }
            }
        } else {
            let have = active.len() as i32;
            let want = decide::want_active(spec.completions, parallelism, tally.succeeded, have);
            if have < want {
                match wait {
                    Some(left) => again = Action::RequeueAfter(left),
                    None => {
                        let indexes = vec![(None, 0); (want - have) as usize];
                        self.create_pods(key, job, &indexes).await?;
                    }
                }
            } else if have > want {
                // Not-ready pods go first, then the newest.
                let mut extra = active.to_vec();
                extra.sort_by_key(|p| {
                    let created = p
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map(minik8s_api::meta::utc_of);
                    (is_ready(p), std::cmp::Reverse(created))
                });
                extra.truncate((have - want) as usize);
                self.delete_pods(key, job, &extra).await?;
            }
        }
        Ok(again)
    }

    /// Creates one pod per entry (an index for Indexed Jobs, and how often
    /// that index failed before), expecting to see them.
    async fn create_pods(
        &self,
        key: &str,
        job: &Job,
        indexes: &[(Option<i32>, i32)],
    ) -> Result<(), ClientError> {
        if indexes.is_empty() {
            return Ok(());
        }
        self.expectations.expect(key, indexes.len() as i64, 0);
        for (n, (index, failures)) in indexes.iter().enumerate() {
            if let Err(e) = self.create_pod(job, *index, *failures).await {
                // The rest will never show up.
                self.expectations
                    .observed(key, (indexes.len() - n) as i64, 0);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Deletes the pods, expecting to see them go.
    async fn delete_pods(
        &self,
        key: &str,
        job: &Job,
        pods: &[Arc<Pod>],
    ) -> Result<(), ClientError> {
        if pods.is_empty() {
            return Ok(());
        }
        self.expectations.expect(key, 0, pods.len() as i64);
        for p in pods {
            self.delete_pod(job, p).await?;
        }
        Ok(())
    }

    /// The Job's status from what this sync counted and decided.
    fn status_body(
        &self,
        t: &Tally,
        active: &[Arc<Pod>],
        start: Option<chrono::DateTime<chrono::Utc>>,
        conditions: Vec<Value>,
    ) -> Value {
        let or_null = |n: i32| if n == 0 { Value::Null } else { json!(n) };
        let start = start
            .map(|t| json!(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
            .unwrap_or(Value::Null);
        json!({
            "active": or_null(active.len() as i32),
            "ready": ready_count(active),
            "terminating": t.terminating,
            "succeeded": or_null(t.succeeded),
            "failed": or_null(t.failed),
            "completedIndexes": if t.indexed && !t.completed.is_empty() { json!(format_indexes(&t.completed)) } else { Value::Null },
            "failedIndexes": t.failed_indexes.as_ref().map(|f| json!(format_indexes(f))).unwrap_or(Value::Null),
            "uncountedTerminatedPods": {"succeeded": null, "failed": null},
            "startTime": start,
            "conditions": if conditions.is_empty() { Value::Null } else { json!(conditions) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(succeeded: i32, failed: i32) -> Tally {
        Tally {
            indexed: false,
            succeeded,
            failed,
            completed: BTreeSet::new(),
            failed_indexes: None,
            index_failures: Default::default(),
            terminating: 0,
        }
    }

    fn spec(v: Value) -> JobSpec {
        serde_json::from_value(v).unwrap()
    }

    fn reason(end: Option<Ending>) -> Option<(&'static str, String)> {
        end.map(|e| (e.final_type, e.verdict.0))
    }

    #[test]
    fn a_job_ends_in_kubernetes_order() {
        let job = spec(json!({"completions": 2, "backoffLimit": 1, "template": {}}));
        // Running, nothing decided.
        assert_eq!(reason(ending(&job, &[], &[], &tally(1, 1), 1, false)), None);
        // Past its backoff limit: failed, even with enough successes.
        assert_eq!(
            reason(ending(&job, &[], &[], &tally(2, 2), 0, false)),
            Some(("Failed", "BackoffLimitExceeded".into()))
        );
        // Past its deadline.
        assert_eq!(
            reason(ending(&job, &[], &[], &tally(0, 0), 1, true)),
            Some(("Failed", "DeadlineExceeded".into()))
        );
        // Enough completions.
        assert_eq!(
            reason(ending(&job, &[], &[], &tally(2, 0), 0, false)),
            Some(("Complete", "CompletionsReached".into()))
        );
        // A target set by an earlier sync is kept, with its reason.
        let target = [condition(
            "FailureTarget",
            "True",
            "PodFailurePolicy",
            "rule 0",
            "t",
        )];
        assert_eq!(
            reason(ending(&job, &target, &[], &tally(2, 0), 0, false)),
            Some(("Failed", "PodFailurePolicy".into()))
        );
    }
}
