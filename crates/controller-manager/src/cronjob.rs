//! The CronJob controller: creates a Job at each time the schedule names
//! (Kubernetes' `cronjob_controllerv2`).
//!
//! ```text
//!  CronJob ─▶ its Jobs: active │ finished ─▶ status.active, lastSuccessfulTime,
//!     │                                     history beyond the limits deleted
//!     ├─ suspended or deleting ─▶ nothing new
//!     └─ the latest schedule time in (lastScheduleTime, now] not yet run:
//!          past startingDeadlineSeconds ─▶ MissSchedule
//!          Forbid and a Job still active ─▶ JobAlreadyActive
//!          Replace ─▶ delete the active Jobs
//!          create Job <cronjob>-<minutes since 1970>, lastScheduleTime = that time
//!     then wake up at the next schedule time
//! ```
//!
//! The clock is injectable ([`Clock`]) so tests need not wait for minutes.

use crate::ns_of;
use crate::ownership::{controller_of, controller_ref};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use minik8s_api::cron::{self, Schedule};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::rest::content;
use minik8s_client::shared::{AlreadyStarted, NAMESPACE_INDEX};
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The time a Job was scheduled for (annotation on the Job).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// More missed start times than this and the controller says so.
const MAX_MISSED: usize = 100;

/// Where the controller's "now" comes from.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The latest schedule time in (`earliest`, `now`], and how many there were
/// (counted up to `MAX_MISSED + 1`).
pub fn most_recent(
    schedule: &Schedule,
    tz: Tz,
    earliest: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, usize) {
    let mut last = None;
    let mut count = 0;
    let mut t = earliest;
    while let Some(next) = schedule.next_after(t, tz) {
        if next > now {
            break;
        }
        last = Some(next);
        count += 1;
        if count > MAX_MISSED {
            // Jump to the most recent one without counting further.
            let mut probe = next;
            while let Some(n) = schedule.next_after(probe, tz).filter(|n| *n <= now) {
                probe = n;
            }
            return (Some(probe), count);
        }
        t = next;
    }
    (last, count)
}

/// `<cronjob>-<minutes since 1970>`: one name per schedule time, so a Job is never made twice.
pub fn job_name(cron_job: &str, scheduled: DateTime<Utc>) -> String {
    format!("{cron_job}-{}", scheduled.timestamp() / 60)
}

/// "Complete" or "Failed" once the Job has finished.
pub fn finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"]
        .into_iter()
        .find(|t| conds.iter().any(|c| c.type_ == *t && c.status == "True"))
}

fn scheduled_at(job: &Job) -> Option<DateTime<Utc>> {
    let t = job
        .metadata
        .annotations
        .as_ref()?
        .get(SCHEDULED_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

pub struct CronJobController {
    client: Client,
    recorder: Recorder,
    cron_jobs: Cache<CronJob>,
    jobs: Cache<Job>,
    clock: Arc<dyn Clock>,
}

impl CronJobController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        clock: Arc<dyn Clock>,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(CronJobController {
            recorder: Recorder::new(client.clone(), "cronjob-controller"),
            client,
            cron_jobs: informers.cache(),
            jobs: informers.cache(),
            clock,
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<CronJob>(informers)?
            .owns::<Job>(informers, "CronJob")
    }

    async fn delete_job(&self, cj: &CronJob, job: &Job) -> Result<(), ClientError> {
        let api = self
            .client
            .dynamic(registry::of::<Job>(), job.metadata.namespace.as_deref());
        let name = job.metadata.name.clone().unwrap_or_default();
        let dp = DeleteParams {
            propagation_policy: Some("Background".into()),
            ..Default::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => {
                self.recorder
                    .event(
                        cj,
                        EventType::Normal,
                        "SuccessfulDelete",
                        &format!("Deleted job {name}"),
                    )
                    .await;
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates the Job for `scheduled` from the template; false when it already exists.
    async fn create_job(
        &self,
        cj: &CronJob,
        scheduled: DateTime<Utc>,
        tz: Tz,
    ) -> Result<Option<Value>, ClientError> {
        let spec = cj.spec.clone();
        let template = spec.job_template;
        let meta = template.metadata.unwrap_or_default();
        let name = job_name(cj.metadata.name.as_deref().unwrap_or(""), scheduled);
        let mut annotations =
            serde_json::to_value(meta.annotations.unwrap_or_default()).unwrap_or(json!({}));
        annotations[SCHEDULED_TIMESTAMP] = json!(scheduled.with_timezone(&tz).to_rfc3339());
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns_of(&cj.metadata), "labels": meta.labels,
                         "annotations": annotations,
                         "ownerReferences": [controller_ref("batch/v1", "CronJob", &cj.metadata)]},
            "spec": template.spec});
        let api = self
            .client
            .dynamic(registry::of::<Job>(), Some(&ns_of(&cj.metadata)));
        match api.create(&job).await {
            Ok(v) => {
                self.recorder
                    .event(
                        cj,
                        EventType::Normal,
                        "SuccessfulCreate",
                        &format!("Created job {name}"),
                    )
                    .await;
                Ok(Some(v))
            }
            Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn job_ref(v: &Value) -> Value {
    let m = &v["metadata"];
    json!({"apiVersion": "batch/v1", "kind": "Job", "name": m["name"], "namespace": m["namespace"],
           "uid": m["uid"], "resourceVersion": m["resourceVersion"]})
}

fn time_s(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Reconciler for CronJobController {
    const NAME: &'static str = "cronjob";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(cj) = self.cron_jobs.get(key) else {
            return Ok(Action::Done);
        };
        let now = self.clock.now();
        let status = cj.status.clone().unwrap_or_default();
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let mut jobs: Vec<Arc<Job>> = self
            .jobs
            .by_index(NAMESPACE_INDEX, &ns_of(&cj.metadata))
            .into_iter()
            .filter(|j| controller_of(&j.metadata).is_some_and(|(u, _, _)| u == uid))
            .collect();
        jobs.sort_by_key(|j| (scheduled_at(j), j.metadata.name.clone()));
        let last_success = self.tidy_history(&cj, &jobs, &status).await?;
        let mut runs = Runs {
            active: jobs
                .iter()
                .filter(|j| finished(j).is_none() && j.metadata.deletion_timestamp.is_none())
                .filter_map(|j| serde_json::to_value(&**j).ok())
                .map(|v| job_ref(&v))
                .collect(),
            last_schedule: status
                .last_schedule_time
                .as_ref()
                .map(minik8s_api::meta::utc_of),
        };
        let again = self.start_due(&cj, &jobs, &mut runs, now).await?;
        self.write_status(&cj, &status, &runs, last_success).await?;
        Ok(again)
    }
}

/// What a CronJob's status says of its runs: the Jobs running, and when the
/// last one was scheduled.
struct Runs {
    active: Vec<Value>,
    last_schedule: Option<DateTime<Utc>>,
}

impl CronJobController {
    /// Finished Jobs leave the active list (an event for each seen finish)
    /// and history beyond the limits goes; returns the last success.
    async fn tidy_history(
        &self,
        cj: &CronJob,
        jobs: &[Arc<Job>],
        status: &CronJobStatus,
    ) -> Result<Option<DateTime<Utc>>, ClientError> {
        let was_active: Vec<String> = status
            .active
            .iter()
            .flatten()
            .filter_map(|r| r.name.clone())
            .collect();
        let mut last_success = status
            .last_successful_time
            .as_ref()
            .map(minik8s_api::meta::utc_of);
        for job in jobs.iter().filter(|j| finished(j).is_some()) {
            let name = job.metadata.name.clone().unwrap_or_default();
            let how = finished(job).unwrap_or_default();
            if was_active.contains(&name) {
                let note = format!("Saw completed job: {name}, status: {how}");
                self.recorder
                    .event(cj, EventType::Normal, "SawCompletedJob", &note)
                    .await;
            }
            if how == "Complete" {
                let done = job
                    .status
                    .as_ref()
                    .and_then(|s| s.completion_time.as_ref())
                    .map(minik8s_api::meta::utc_of);
                last_success = last_success.max(done);
            }
        }
        let spec = &cj.spec;
        for (how, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let done: Vec<&Arc<Job>> = jobs.iter().filter(|j| finished(j) == Some(how)).collect();
            let excess = done.len().saturating_sub(limit.max(0) as usize);
            for job in done.into_iter().take(excess) {
                self.delete_job(cj, job).await?;
            }
        }
        Ok(last_success)
    }

    /// Starts the Job of the most recent due time, unless it is too late,
    /// its concurrency policy forbids it, or it exists already; returns
    /// when to look again (the next scheduled time).
    async fn start_due(
        &self,
        cj: &CronJob,
        jobs: &[Arc<Job>],
        runs: &mut Runs,
        now: DateTime<Utc>,
    ) -> Result<Action, ClientError> {
        let spec = &cj.spec;
        let tz = cron::time_zone(spec.time_zone.as_deref()).unwrap_or(Tz::UTC);
        let schedule = cron::parse(&spec.schedule).ok();
        let live = !spec.suspend.unwrap_or(false) && cj.metadata.deletion_timestamp.is_none();
        let (Some(schedule), true) = (schedule, live) else {
            return Ok(Action::Done);
        };
        let created = cj
            .metadata
            .creation_timestamp
            .as_ref()
            .map(minik8s_api::meta::utc_of)
            .unwrap_or(now);
        let mut earliest = runs.last_schedule.unwrap_or(created);
        if let Some(deadline) = spec.starting_deadline_seconds {
            earliest = earliest.max(now - chrono::Duration::seconds(deadline));
        }
        let (due, count) = most_recent(&schedule, tz, earliest, now);
        if count > MAX_MISSED {
            let note = format!("too many missed start times: {count}. Set or decrease .spec.startingDeadlineSeconds or check clock skew");
            self.recorder
                .event(cj, EventType::Warning, "TooManyMissedTimes", &note)
                .await;
        }
        // The Job of that time exists already (our status write is not in
        // the cache yet): it is done, whatever the policy says.
        let name_of = |t| job_name(cj.metadata.name.as_deref().unwrap_or(""), t);
        let exists = |t| {
            jobs.iter()
                .any(|j| j.metadata.name.as_deref() == Some(name_of(t).as_str()))
        };
        if let Some(t) = due.filter(|t| exists(*t)) {
            runs.last_schedule = runs.last_schedule.max(Some(t));
        } else if let Some(t) = due {
            let late = spec
                .starting_deadline_seconds
                .is_some_and(|d| t + chrono::Duration::seconds(d) < now);
            let forbid =
                spec.concurrency_policy.as_deref() == Some("Forbid") && !runs.active.is_empty();
            if late {
                let note = format!("Missed scheduled time to start a job: {}", t.to_rfc3339());
                self.recorder
                    .event(cj, EventType::Warning, "MissSchedule", &note)
                    .await;
            } else if forbid {
                let note = "Not starting job because prior execution is running and concurrency policy is Forbid";
                self.recorder
                    .event(cj, EventType::Normal, "JobAlreadyActive", note)
                    .await;
            } else {
                if spec.concurrency_policy.as_deref() == Some("Replace") {
                    for job in jobs.iter().filter(|j| finished(j).is_none()) {
                        self.delete_job(cj, job).await?;
                    }
                    runs.active.clear();
                }
                if let Some(created) = self.create_job(cj, t, tz).await? {
                    runs.active.push(job_ref(&created));
                }
                runs.last_schedule = Some(t);
            }
        }
        Ok(match schedule.next_after(now, tz) {
            Some(next) => Action::RequeueAfter(
                (next - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(100),
            ),
            None => Action::Done,
        })
    }

    /// Writes the active list and the times when any of them changed.
    async fn write_status(
        &self,
        cj: &CronJob,
        status: &CronJobStatus,
        runs: &Runs,
        last_success: Option<DateTime<Utc>>,
    ) -> Result<(), ClientError> {
        let active = &runs.active;
        let patch = json!({"status": {
            "active": if active.is_empty() { Value::Null } else { json!(active) },
            "lastScheduleTime": runs.last_schedule.map(time_s),
            "lastSuccessfulTime": last_success.map(time_s),
        }});
        let before = json!({"active": status.active.as_ref().map(|a| serde_json::to_value(a).unwrap_or_default()),
            "lastScheduleTime": status.last_schedule_time.as_ref().map(|t| time_s(minik8s_api::meta::utc_of(t))),
            "lastSuccessfulTime": status.last_successful_time.as_ref().map(|t| time_s(minik8s_api::meta::utc_of(t)))});
        let names = |v: &Value| -> Vec<Value> {
            v["active"]
                .as_array()
                .map(|a| a.iter().map(|r| r["name"].clone()).collect())
                .unwrap_or_default()
        };
        let changed = names(&patch["status"]) != names(&before)
            || patch["status"]["lastScheduleTime"] != before["lastScheduleTime"]
            || patch["status"]["lastSuccessfulTime"] != before["lastSuccessfulTime"];
        if changed {
            self.client
                .patch_status::<CronJob>(&cj.metadata, content::MERGE_PATCH, &patch)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_latest_due_time_and_how_many_were_missed() {
        let every5 = cron::parse("*/5 * * * *").unwrap();
        let (t, n) = most_recent(
            &every5,
            Tz::UTC,
            at("2026-11-24T10:00:00Z"),
            at("2026-11-24T10:17:00Z"),
        );
        assert_eq!((t, n), (Some(at("2026-11-24T10:15:00Z")), 3));
        let (t, n) = most_recent(
            &every5,
            Tz::UTC,
            at("2026-11-24T10:15:00Z"),
            at("2026-11-24T10:17:00Z"),
        );
        assert_eq!((t, n), (None, 0), "10:15 already ran");
        let minutely = cron::parse("* * * * *").unwrap();
        let (t, n) = most_recent(
            &minutely,
            Tz::UTC,
            at("2026-11-24T00:00:00Z"),
            at("2026-11-24T10:00:30Z"),
        );
        assert_eq!(t, Some(at("2026-11-24T10:00:00Z")));
        assert!(n > MAX_MISSED);
    }

    #[test]
    fn job_names_count_minutes() {
        assert_eq!(
            job_name("backup", at("2026-11-24T10:15:00Z")),
            "backup-29925255"
        );
    }
}
