//! The autoscaler's shell (`sync_scale`): samples each function's calls in
//! flight ten times a second, asks [`Autoscaler::decide`] once a second, and
//! writes the answer to the function's Deployment through its `scale`
//! subresource. A call to a function at zero does not wait for the next
//! second: [`Scaler::wake`] scales it to one at once.

use crate::autoscaler::Autoscaler;
use k8s_openapi::api::apps::v1::Deployment;
use minik8s_api::registry;
use minik8s_api::serverless::Function;
use minik8s_client::rest::content;
use minik8s_client::{Cache, Client};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Samples per decision (one decision a second).
const SAMPLES: u32 = 10;

#[derive(Default)]
struct FnState {
    in_flight: usize,
    last_call: Option<f64>,
    sum: usize,
    autoscaler: Autoscaler,
}

#[derive(Clone)]
pub struct Scaler {
    client: Client,
    deployments: Cache<Deployment>,
    started: Instant,
    state: Arc<Mutex<HashMap<String, FnState>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One call in flight of one function, counted until dropped.
pub struct InFlight {
    scaler: Scaler,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.scaler.now();
        let mut state = lock(&self.scaler.state);
        let s = state.entry(self.key.clone()).or_default();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.last_call = Some(now);
    }
}

impl Scaler {
    pub fn new(client: Client, deployments: Cache<Deployment>) -> Scaler {
        Scaler {
            client,
            deployments,
            started: Instant::now(),
            state: Arc::default(),
        }
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Counts a call of `ns/name` in flight.
    pub fn begin(&self, ns: &str, name: &str) -> InFlight {
        let key = format!("{ns}/{name}");
        let now = self.now();
        let mut state = lock(&self.state);
        let s = state.entry(key.clone()).or_default();
        s.in_flight += 1;
        s.last_call = Some(now);
        InFlight {
            scaler: self.clone(),
            key,
        }
    }

    /// Calls in flight of `ns/name` now.
    pub fn in_flight(&self, ns: &str, name: &str) -> usize {
        lock(&self.state)
            .get(&format!("{ns}/{name}"))
            .map_or(0, |s| s.in_flight)
    }

    fn replicas(&self, ns: &str, name: &str) -> Option<(i32, i32)> {
        let d = self
            .deployments
            .get(&format!("{ns}/{}", Function::child_name(name)))?;
        let spec = d.spec.replicas.unwrap_or(1);
        let ready = d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        Some((spec, ready))
    }

    async fn scale(&self, ns: &str, name: &str, replicas: u32) {
        let api = self.client.dynamic(registry::of::<Deployment>(), Some(ns));
        let child = Function::child_name(name);
        let patch = json!({"spec": {"replicas": replicas}});
        if let Err(e) = api
            .patch(&child, Some("scale"), content::MERGE_PATCH, &patch)
            .await
        {
            tracing::warn!(function = %format!("{ns}/{name}"), replicas, error = %e, "scaling");
        }
    }

    /// Scale from zero: a call arrived and no instance is wanted yet.
    pub async fn wake(&self, f: &Function) {
        let ns = f.metadata.namespace.clone().unwrap_or_default();
        let name = f.metadata.name.clone().unwrap_or_default();
        if let Some((spec, _)) = self.replicas(&ns, &name) {
            if spec < 1 {
                tracing::info!(function = %format!("{ns}/{name}"), "scaling from zero");
                self.scale(&ns, &name, f.scaling().min.max(1)).await;
            }
        }
    }

    /// Samples and decides until the process ends.
    pub async fn run(self, functions: Cache<Function>) {
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / SAMPLES as u64));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n = 0;
        loop {
            tick.tick().await;
            for s in lock(&self.state).values_mut() {
                s.sum += s.in_flight;
            }
            n += 1;
            if n < SAMPLES {
                continue;
            }
            n = 0;
            self.sync_scale(&functions).await;
        }
    }

    /// One decision per function: sample in, replicas out.
    async fn sync_scale(&self, functions: &Cache<Function>) {
        let now = self.now();
        let mut writes = Vec::new();
        for f in functions.list() {
            let ns = f.metadata.namespace.clone().unwrap_or_default();
            let name = f.metadata.name.clone().unwrap_or_default();
            let Some((spec, ready)) = self.replicas(&ns, &name) else {
                continue;
            };
            let decision = {
                let mut state = lock(&self.state);
                let s = state.entry(format!("{ns}/{name}")).or_default();
                s.autoscaler.record(now, s.sum as f64 / SAMPLES as f64);
                s.sum = 0;
                s.autoscaler.decide(
                    &f.scaling(),
                    now,
                    ready.max(0) as u32,
                    s.in_flight,
                    s.last_call,
                )
            };
            if decision.desired as i32 != spec {
                tracing::info!(function = %format!("{ns}/{name}"), from = spec, to = decision.desired,
                    panicking = decision.panicking, "autoscaling");
                writes.push((ns, name, decision.desired));
            }
        }
        // Functions that are gone leave no state behind.
        let live: std::collections::HashSet<String> = functions
            .list()
            .iter()
            .map(|f| {
                format!(
                    "{}/{}",
                    f.metadata.namespace.as_deref().unwrap_or_default(),
                    f.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        lock(&self.state).retain(|k, s| live.contains(k) || s.in_flight > 0);
        for (ns, name, replicas) in writes {
            self.scale(&ns, &name, replicas).await;
        }
    }
}
