//! The CronJob controller against a real apiserver on a clock the test moves:
//! a Job per schedule time (named by the minute, annotated with the time),
//! Allow / Forbid / Replace, finished Jobs leaving `status.active` and the
//! history limit, suspend, kubectl's columns, and bad schedules refused.

mod common;

use chrono::{DateTime, Duration, DurationRound, Utc};
use common::{kubectl, table_line};
use controller_manager::cronjob::{Clock, CronJobController};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi, ListParams, SharedInformers};
use minik8s_testkit::until;
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

struct TestClock(Mutex<DateTime<Utc>>);

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

impl TestClock {
    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap() = t;
    }
}

/// The names of the CronJob's live Jobs, sorted.
async fn job_names(jobs: &DynamicApi) -> Vec<String> {
    let list = jobs.list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| j["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|j| j["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_jobs_follow_their_schedule_and_policies() {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let clock = Arc::new(TestClock(Mutex::new(Utc::now())));
    let informers = SharedInformers::new(&client);
    let controller = CronJobController::new(client.clone(), &informers, clock.clone()).unwrap();
    informers.start();
    informers.wait_synced().await;
    tokio::spawn(controller.run(1, Default::default()));

    let cron_jobs = client.dynamic(registry::of::<CronJob>(), Some("default"));
    let jobs = client.dynamic(registry::of::<Job>(), Some("default"));
    // doc/workloads.md's example.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cronjob.yaml");
    let (ok, out) = kubectl(&server.url, &["apply", "-f", example]);
    assert!(ok, "kubectl apply: {out}");
    // Each step: move the clock, then touch the CronJob (a real controller
    // would wake up by itself at the next schedule time).
    let minute0 = Utc::now().duration_trunc(Duration::minutes(1)).unwrap() + Duration::minutes(1);
    // A spec change lands first and the controller's cache must show it
    // before the clock moves: a reconcile must never see the new minute
    // with the old policy.
    let cached = informers.cache::<CronJob>();
    let step = |n: i64, spec: Value| {
        let (clock, cron_jobs, cached) = (clock.clone(), cron_jobs.clone(), cached.clone());
        async move {
            let merge = "application/merge-patch+json";
            let fields = spec.as_object().cloned().unwrap_or_default();
            if !fields.is_empty() {
                let patch = json!({"spec": spec});
                cron_jobs.patch("tick", None, merge, &patch).await.unwrap();
                until(20, "the controller's cache shows the change", || async {
                    let cj = serde_json::to_value(cached.get("default/tick").as_deref()).unwrap();
                    let seen = fields.iter().all(|(k, v)| cj["spec"][k] == *v);
                    seen.then_some(()).ok_or_else(|| cj["spec"].to_string())
                })
                .await;
            }
            clock.set(minute0 + Duration::minutes(n) + Duration::seconds(5));
            let poke = json!({"metadata": {"annotations": {"step": n.to_string()}}});
            cron_jobs.patch("tick", None, merge, &poke).await.unwrap();
        }
    };
    let name_at = |n: i64| format!("tick-{}", (minute0 + Duration::minutes(n)).timestamp() / 60);

    // Minute 0: the first Job, named by its minute and annotated with the time.
    step(0, json!({})).await;
    let first = name_at(0);
    until(20, "the first Job", || async {
        let names = job_names(&jobs).await;
        (names == [first.clone()])
            .then_some(())
            .ok_or_else(|| format!("{names:?}"))
    })
    .await;
    let job = jobs.get(&first).await.unwrap();
    assert_eq!(job["metadata"]["labels"]["app"], "tick");
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    let scheduled = job["metadata"]["annotations"]
        ["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(DateTime::parse_from_rfc3339(&scheduled).unwrap(), minute0);
    let cj = until(20, "status.active and lastScheduleTime", || async {
        let cj = cron_jobs.get("tick").await.unwrap();
        let ok = cj["status"]["active"][0]["name"] == first.as_str()
            && cj["status"]["lastScheduleTime"].as_str().is_some();
        ok.then(|| cj.clone())
            .ok_or_else(|| cj["status"].to_string())
    })
    .await;
    let last = cj["status"]["lastScheduleTime"].as_str().unwrap();
    assert_eq!(DateTime::parse_from_rfc3339(last).unwrap(), minute0);

    // Allow (the default): a second Job beside the first.
    step(1, json!({})).await;
    until(20, "two Jobs side by side", || async {
        let names = job_names(&jobs).await;
        (names.len() == 2)
            .then_some(())
            .ok_or_else(|| format!("{names:?}"))
    })
    .await;

    // Forbid: nothing new while they run.
    step(2, json!({"concurrencyPolicy": "Forbid"})).await;
    let events = client.dynamic(registry::of::<Event>(), Some("default"));
    until(20, "the JobAlreadyActive event", || async {
        let evs = events
            .list(&ListParams::default().fields("reason=JobAlreadyActive"))
            .await
            .unwrap();
        let n = evs["items"].as_array().map_or(0, Vec::len);
        (n > 0)
            .then_some(())
            .ok_or_else(|| "no event yet".to_string())
    })
    .await;
    assert_eq!(job_names(&jobs).await, [name_at(0), name_at(1)]);

    // Replace: the running ones go, one new Job.
    step(3, json!({"concurrencyPolicy": "Replace"})).await;
    until(20, "replaced by the minute-3 Job", || async {
        let names = job_names(&jobs).await;
        (names == [name_at(3)])
            .then_some(())
            .ok_or_else(|| format!("{names:?}"))
    })
    .await;

    // Finished Jobs leave status.active; one successful Job is kept.
    let complete = |name: String| {
        let jobs = jobs.clone();
        async move {
            let now = Utc::now().to_rfc3339();
            let status = json!({"status": {"completionTime": now, "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": now}]}});
            jobs.patch(
                &name,
                Some("status"),
                "application/merge-patch+json",
                &status,
            )
            .await
            .unwrap();
        }
    };
    complete(name_at(3)).await;
    step(4, json!({"concurrencyPolicy": "Allow"})).await;
    until(20, "the minute-4 Job", || async {
        let names = job_names(&jobs).await;
        names
            .contains(&name_at(4))
            .then_some(())
            .ok_or_else(|| format!("{names:?}"))
    })
    .await;
    complete(name_at(4)).await;
    until(20, "history limit 1, nothing active", || async {
        let names = job_names(&jobs).await;
        let cj = cron_jobs.get("tick").await.unwrap();
        let ok = names == [name_at(4)]
            && cj["status"]["active"].is_null()
            && cj["status"]["lastSuccessfulTime"].is_string();
        ok.then_some(())
            .ok_or_else(|| format!("{names:?} {}", cj["status"]))
    })
    .await;
    // Suspended: the next minute passes without a Job.
    step(4, json!({"suspend": true})).await;
    step(5, json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(job_names(&jobs).await, [name_at(4)]);

    let (ok, out) = kubectl(&server.url, &["get", "cronjobs"]);
    assert!(ok, "{out}");
    let header = table_line(&out, 0);
    assert_eq!(
        header,
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    );
    let row = table_line(&out, 1);
    assert_eq!(row[..3], ["tick", "*", "*"], "{out}");
    assert!(out.contains("True"), "suspended: {out}");

    // Bad schedules and time zones: 422 with the field, nothing stored.
    for (spec, want) in [
        (json!({"schedule": "61 * * * *"}), "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"),
        (json!({"schedule": "0 * * * *", "timeZone": "Mars/Olympus"}), "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"),
    ] {
        let mut cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "bad"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        for (k, v) in spec.as_object().unwrap() {
            cj["spec"][k] = v.clone();
        }
        let err = cron_jobs.create(&cj).await.expect_err("refused");
        assert_eq!(err.api().map(|a| a.code), Some(422), "{err}");
        assert!(err.to_string().contains(want), "{err}");
        assert!(cron_jobs.get("bad").await.unwrap_err().is_not_found());
    }
}
