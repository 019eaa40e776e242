//! The TTL-after-finished controller: a finished Job with
//! `ttlSecondsAfterFinished` is deleted (with its pods, foreground) that many
//! seconds after it completed or failed.

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, DeleteParams, SharedInformers, WorkQueue};
use std::sync::Arc;
use std::time::Duration;

pub struct TtlAfterFinishedController {
    client: Client,
    jobs: Cache<Job>,
}

/// When the Job finished: its completion time, or when it was marked Complete or Failed.
pub fn finished_at(job: &Job) -> Option<DateTime<Utc>> {
    let status = job.status.as_ref()?;
    status
        .completion_time
        .as_ref()
        .map(minik8s_api::meta::utc_of)
        .or_else(|| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
                .and_then(|c| {
                    c.last_transition_time
                        .as_ref()
                        .map(minik8s_api::meta::utc_of)
                })
        })
}

/// How long until the Job expires; Some(ZERO) when it has, None when it never does.
pub fn time_left(job: &Job, now: DateTime<Utc>) -> Option<Duration> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let expires = finished_at(job)? + chrono::Duration::seconds(ttl as i64);
    Some((expires - now).to_std().unwrap_or(Duration::ZERO))
}

impl TtlAfterFinishedController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(TtlAfterFinishedController {
            client,
            jobs: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new()).for_own::<Job>(informers)
    }
}

impl Reconciler for TtlAfterFinishedController {
    const NAME: &'static str = "ttl-after-finished";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(job) = self.jobs.get(key) else {
            return Ok(Action::Done);
        };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        match time_left(&job, Utc::now()) {
            None => Ok(Action::Done),
            Some(left) if !left.is_zero() => Ok(Action::RequeueAfter(left)),
            Some(_) => {
                let api = self
                    .client
                    .dynamic(registry::of::<Job>(), job.metadata.namespace.as_deref());
                let dp = DeleteParams {
                    propagation_policy: Some("Foreground".into()),
                    precondition_uid: job.metadata.uid.clone(),
                    ..Default::default()
                };
                match api
                    .delete(job.metadata.name.as_deref().unwrap_or(""), &dp)
                    .await
                {
                    Err(e) if !(e.is_not_found() || e.is_conflict()) => Err(e),
                    _ => {
                        tracing::info!(job = key, "deleted a finished Job whose TTL expired");
                        Ok(Action::Done)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expiry_counts_from_completion() {
        let job: Job = serde_json::from_value(json!({"metadata": {"name": "j"},
            "spec": {"ttlSecondsAfterFinished": 30, "template": {}},
            "status": {"completionTime": "2026-11-24T10:00:00Z"}}))
        .unwrap();
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(
            time_left(&job, at("2026-11-24T10:00:10Z")),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            time_left(&job, at("2026-11-24T10:01:00Z")),
            Some(Duration::ZERO)
        );
        let running: Job = serde_json::from_value(json!({"metadata": {"name": "j"},
            "spec": {"ttlSecondsAfterFinished": 30, "template": {}}}))
        .unwrap();
        assert_eq!(time_left(&running, at("2026-11-24T10:01:00Z")), None);
    }
}
