//! Getting a container's image as its pull policy says, with Kubernetes'
//! pull back-off: a failed pull is `ErrImagePull`; until its back-off
//! (10 s, doubling to 5 min, per pod and image) has passed the container
//! waits as `ImagePullBackOff` without pulling again. The events are the
//! kubelet's: Pulling, Pulled, Failed, BackOff.

use crate::credentials::{self, Credential};
use crate::Kubelet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Resource as _;
use minik8s_client::events::{EventType, Involved};
use minik8s_client::TRACE_POD_START;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);

/// The back-off after `failures` failed pulls: 10 s, 20 s, 40 s … 5 min.
pub fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    INITIAL.saturating_mul(1 << (failures - 1).min(10)).min(MAX)
}

/// Failed pulls by pod and image: (failures, when the last one ended,
/// whether this back-off was reported).
#[derive(Default)]
pub struct PullBackoff(Mutex<HashMap<String, (u32, Instant, bool)>>);

impl PullBackoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u32, Instant, bool)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long the key still backs off, if it does.
    pub fn remaining(&self, key: &str) -> Option<Duration> {
        let (failures, last, _) = *self.lock().get(key)?;
        backoff(failures)
            .checked_sub(last.elapsed())
            .filter(|d| !d.is_zero())
    }

    /// True the first time it is asked after a failure: one BackOff event
    /// per back-off, not one per sync (events are never aggregated here).
    pub fn report_once(&self, key: &str) -> bool {
        match self.lock().get_mut(key) {
            Some(entry) if !entry.2 => {
                entry.2 = true;
                true
            }
            _ => false,
        }
    }

    /// Forgets entries untouched for `age`: keys of pods that are gone.
    fn forget_older_than(&self, age: Duration) {
        self.lock().retain(|_, (_, last, _)| last.elapsed() < age);
    }

    pub fn failed(&self, key: &str) {
        // An entry untouched for twice the longest back-off is not backing
        // anything off any more (Kubernetes' Backoff.GC).
        self.forget_older_than(2 * MAX);
        let mut all = self.lock();
        let entry = all
            .entry(key.to_string())
            .or_insert((0, Instant::now(), false));
        *entry = (entry.0 + 1, Instant::now(), false);
    }

    pub fn succeeded(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// A pod as the subject of an Event (only its metadata travels to the
/// background send, not the whole pod).
fn about_pod(meta: &ObjectMeta) -> Involved<'_> {
    Involved {
        api_version: Pod::API_VERSION,
        kind: Pod::KIND,
        meta,
    }
}

impl Kubelet {
    /// A Warning event about a pod (Unhealthy, FailedPostStartHook ...),
    /// sent in the background.
    pub(crate) fn warning_event(&self, pod: &Pod, reason: &'static str, message: String) {
        let recorder = self.recorder.clone();
        let meta = pod.metadata.clone();
        tokio::spawn(async move {
            recorder
                .record(about_pod(&meta), EventType::Warning, reason, &message)
                .await;
        });
    }

    /// Normal events about a pod's containers (Created, Started, Killing),
    /// sent in order in the background: the pod's start and status report
    /// do not wait for them.
    pub(crate) fn container_events(&self, pod: &Pod, events: Vec<(&'static str, String)>) {
        if events.is_empty() {
            return;
        }
        let recorder = self.recorder.clone();
        let meta = pod.metadata.clone();
        tokio::spawn(async move {
            for (reason, message) in events {
                recorder
                    .record(about_pod(&meta), EventType::Normal, reason, &message)
                    .await;
            }
        });
    }

    /// Makes sure `image` is there according to `policy`; Err is the
    /// container's waiting (reason, message).
    pub(crate) async fn ensure_image(
        &self,
        pod: &Pod,
        image: &str,
        policy: &str,
    ) -> Result<(), (String, String)> {
        let present = self
            .runtime
            .image_present(image)
            .await
            .map_err(|e| ("ErrImageInspect".to_string(), e.to_string()))?;
        match policy {
            "Never" if !present => {
                let message =
                    format!("Container image \"{image}\" is not present with pull policy of Never");
                self.recorder
                    .event(pod, EventType::Warning, "ErrImageNeverPull", &message)
                    .await;
                return Err(("ErrImageNeverPull".into(), message));
            }
            "Never" | "IfNotPresent" if present => {
                tracing::debug!(target: TRACE_POD_START, %image, "image present");
                let message = format!("Container image \"{image}\" already present on machine");
                self.recorder
                    .event(pod, EventType::Normal, "Pulled", &message)
                    .await;
                return Ok(());
            }
            _ => {}
        }
        let key = format!("{}/{image}", pod.metadata.uid.as_deref().unwrap_or(""));
        if self.pull_backoff.remaining(&key).is_some() {
            let message = format!("Back-off pulling image \"{image}\"");
            if self.pull_backoff.report_once(&key) {
                self.recorder
                    .event(pod, EventType::Normal, "BackOff", &message)
                    .await;
            }
            return Err(("ImagePullBackOff".into(), message));
        }
        self.recorder
            .event(
                pod,
                EventType::Normal,
                "Pulling",
                &format!("Pulling image \"{image}\""),
            )
            .await;
        let started = Instant::now();
        let logins = self.pull_credentials(pod, image).await;
        match self.pull_with(image, &logins).await {
            Ok(()) => {
                tracing::debug!(target: TRACE_POD_START, %image, "image pulled");
                self.pull_backoff.succeeded(&key);
                let message = format!(
                    "Successfully pulled image \"{image}\" in {:.3}s",
                    started.elapsed().as_secs_f64()
                );
                self.recorder
                    .event(pod, EventType::Normal, "Pulled", &message)
                    .await;
                Ok(())
            }
            // Lab machines have no registry for every name: a local image
            // serves `Always` too.
            Err(_) if present => Ok(()),
            Err(e) => {
                self.pull_backoff.failed(&key);
                let message = format!("Failed to pull image \"{image}\": {e}");
                self.recorder
                    .event(pod, EventType::Warning, "Failed", &message)
                    .await;
                Err(("ErrImagePull".into(), message))
            }
        }
    }
}

impl Kubelet {
    /// The logins the pod's `imagePullSecrets` hold for `image`'s registry.
    /// A secret that cannot be read is said in a Warning event, and the pull
    /// goes on without it (as the real kubelet does).
    async fn pull_credentials(&self, pod: &Pod, image: &str) -> Vec<Credential> {
        let names: Vec<&str> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Vec::new();
        }
        let secrets = self.client.dynamic(
            minik8s_api::registry::of::<Secret>(),
            pod.metadata.namespace.as_deref(),
        );
        let (mut configs, mut missing) = (Vec::new(), Vec::new());
        for name in names {
            let config = match secrets.get(name).await {
                Ok(v) => serde_json::from_value::<Secret>(v)
                    .ok()
                    .and_then(|s| credentials::config_of(&crate::config_data::secret_data(&s))),
                Err(e) => {
                    tracing::debug!(secret = name, error = %e, "reading an image pull secret");
                    None
                }
            };
            match config {
                Some(c) => configs.push(c),
                None => missing.push(name),
            }
        }
        if !missing.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                missing.join(", ")
            );
            self.recorder
                .event(
                    pod,
                    EventType::Warning,
                    "FailedToRetrieveImagePullSecret",
                    &message,
                )
                .await;
        }
        credentials::for_image(image, &configs)
    }

    /// Pulls with each login in turn (anonymously without any); the last
    /// refusal is the error.
    async fn pull_with(&self, image: &str, logins: &[Credential]) -> crate::runtime::Result<()> {
        if logins.is_empty() {
            return self.runtime.pull(image, None).await;
        }
        let mut last = None;
        for login in logins {
            match self.runtime.pull(image, Some(login)).await {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one login was tried"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_to_five_minutes_per_key() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(3), Duration::from_secs(40));
        assert_eq!(backoff(9), Duration::from_secs(300));
        let b = PullBackoff::default();
        assert_eq!(b.remaining("p/nginx"), None);
        b.failed("p/nginx");
        let left = b.remaining("p/nginx").unwrap();
        assert!(left > Duration::from_secs(9) && left <= Duration::from_secs(10));
        assert_eq!(b.remaining("other/nginx"), None);
        assert!(b.report_once("p/nginx"));
        assert!(!b.report_once("p/nginx"), "one report per back-off");
        b.failed("p/nginx");
        assert!(b.report_once("p/nginx"), "a new failure, a new back-off");
        b.succeeded("p/nginx");
        assert_eq!(b.remaining("p/nginx"), None);
    }

    #[test]
    fn back_offs_of_gone_pods_are_forgotten() {
        let b = PullBackoff::default();
        for i in 0..100 {
            b.failed(&format!("deleted-{i}/nginx"));
        }
        std::thread::sleep(Duration::from_millis(20));
        b.failed("live/nginx");
        b.forget_older_than(Duration::from_millis(10));
        assert_eq!(b.lock().len(), 1, "only the live pod's back-off is left");
        assert!(b.remaining("live/nginx").is_some());
    }
}
