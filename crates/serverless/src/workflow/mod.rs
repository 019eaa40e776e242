//! The workflow executor: drives each WorkflowRun that has not ended, calling
//! its steps' functions through the gateway in this process and writing the
//! run's status after every change, so `kubectl get workflowruns -w` follows
//! it step by step and a restarted master resumes from the status.
//!
//! ```text
//!  WorkflowRun (informer) ─▶ drive(run) ─ engine::begin / startable
//!        ▲                        │ one task per execution: Gateway::call,
//!        │ PATCH status           │ retried per the step's policy
//!        └────────────────────────┴◀─ engine::finish (branch, fan-out/in, loops) ─ conclude
//! ```

pub mod engine;

use crate::gateway::Gateway;
use engine::Outcome;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use minik8s_api::workflow::{phase, RunStatus, Step, Workflow, WorkflowRun};
use minik8s_client::{Cache, Client};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

pub struct Executor {
    client: Client,
    gateway: Arc<Gateway>,
    runs: Cache<WorkflowRun>,
    workflows: Cache<Workflow>,
    /// Runs being driven by this process (`namespace/name`).
    active: Mutex<HashSet<String>>,
}

/// What a step's task reports to its run.
enum Report {
    /// A call failed and will be tried again.
    Retrying {
        index: usize,
        attempts: i32,
        error: String,
    },
    Done {
        index: usize,
        attempts: i32,
        outcome: Outcome,
    },
}

fn now() -> Time {
    minik8s_api::meta::time_now()
}

fn ended(run: &WorkflowRun) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| s.phase == phase::SUCCEEDED || s.phase == phase::FAILED)
}

impl Executor {
    pub fn new(
        client: Client,
        gateway: Arc<Gateway>,
        runs: Cache<WorkflowRun>,
        workflows: Cache<Workflow>,
    ) -> Arc<Executor> {
        Arc::new(Executor {
            client,
            gateway,
            runs,
            workflows,
            active: Mutex::default(),
        })
    }

    /// Starts driving `run` unless it has ended or is driven already.
    pub fn observe(self: &Arc<Self>, run: &WorkflowRun) {
        if ended(run) || run.metadata.deletion_timestamp.is_some() {
            return;
        }
        let key = format!(
            "{}/{}",
            run.metadata.namespace.as_deref().unwrap_or_default(),
            run.metadata.name.as_deref().unwrap_or_default()
        );
        if !self
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone())
        {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = me.drive(&key).await {
                tracing::warn!(run = %key, error = %e, "workflow run stopped; it resumes on its next change");
            }
            me.active
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
        });
    }

    /// Writes the run's status; false when the run is gone.
    async fn write(&self, run: &WorkflowRun, status: &RunStatus) -> anyhow::Result<bool> {
        let patch = json!({"status": status});
        Ok(self
            .client
            .patch_status::<WorkflowRun>(
                &run.metadata,
                minik8s_client::rest::content::MERGE_PATCH,
                &patch,
            )
            .await?)
    }

    async fn drive(self: &Arc<Self>, key: &str) -> anyhow::Result<()> {
        let Some(run) = self.runs.get(key) else {
            return Ok(());
        };
        let run = (*run).clone();
        let ns = run.metadata.namespace.clone().unwrap_or_default();
        let wf_key = format!("{ns}/{}", run.spec.workflow);
        // The Workflow's informer may be a moment behind the run's.
        let mut workflow = self.workflows.get(&wf_key);
        for _ in 0..50 {
            if workflow.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            workflow = self.workflows.get(&wf_key);
        }
        let Some(workflow) = workflow else {
            let status = RunStatus {
                phase: phase::FAILED.into(),
                message: Some(format!("workflow \"{}\" not found", run.spec.workflow)),
                completion_time: Some(now()),
                ..run.status.clone().unwrap_or_default()
            };
            self.write(&run, &status).await?;
            return Ok(());
        };
        let spec = workflow.spec.clone();
        let mut status = match run.status.clone() {
            Some(s) if !s.steps.is_empty() => s,
            _ => engine::begin(&spec, run.spec.input.clone().unwrap_or(Value::Null), now()),
        };
        // Executions cut short by a restart run again (their attempts are kept).
        for s in &mut status.steps {
            if s.phase == phase::RUNNING {
                s.phase = phase::PENDING.into();
            }
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        loop {
            for i in engine::startable(&status) {
                let rec = &mut status.steps[i];
                rec.phase = phase::RUNNING.into();
                rec.start_time.get_or_insert_with(now);
                let Some(step) = spec.step(&rec.name).cloned() else {
                    let _ = tx.send(Report::Done {
                        index: i,
                        attempts: rec.attempts,
                        outcome: Outcome::Failed(format!("no step {} in the workflow", rec.name)),
                    });
                    continue;
                };
                let task = StepCall {
                    gateway: self.gateway.clone(),
                    namespace: ns.clone(),
                    step,
                    input: rec.input.clone().unwrap_or(Value::Null),
                    attempts: rec.attempts,
                    index: i,
                };
                tokio::spawn(task.run(tx.clone()));
            }
            let over = engine::conclude(&spec, &mut status, now());
            if !self.write(&run, &status).await? || over {
                if over {
                    tracing::info!(run = %key, phase = %status.phase, steps = status.steps.len(), "workflow run ended");
                }
                return Ok(());
            }
            let Some(report) = rx.recv().await else {
                return Ok(());
            };
            let mut apply = |report| match report {
                Report::Retrying {
                    index,
                    attempts,
                    error,
                } => {
                    status.steps[index].attempts = attempts;
                    status.steps[index].error = Some(error);
                }
                Report::Done {
                    index,
                    attempts,
                    outcome,
                } => {
                    status.steps[index].attempts = attempts;
                    engine::finish(&spec, &mut status, index, outcome, now());
                }
            };
            apply(report);
            // Whatever else has arrived goes into the same write.
            while let Ok(more) = rx.try_recv() {
                apply(more);
            }
        }
    }
}

/// One execution of a step: calls its function until it answers with
/// success or the step's retries are spent.
struct StepCall {
    gateway: Arc<Gateway>,
    namespace: String,
    step: Step,
    input: Value,
    /// Calls already made (after a restart).
    attempts: i32,
    index: usize,
}

impl StepCall {
    async fn run(mut self, tx: mpsc::UnboundedSender<Report>) {
        let body = axum::body::Bytes::from(serde_json::to_vec(&self.input).unwrap_or_default());
        loop {
            self.attempts += 1;
            let (code, answer) = self
                .gateway
                .call(&self.namespace, &self.step.function, body.clone())
                .await;
            if code.is_success() {
                let _ = tx.send(Report::Done {
                    index: self.index,
                    attempts: self.attempts,
                    outcome: Outcome::Succeeded(answer),
                });
                return;
            }
            let why = answer["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| answer.to_string());
            let error = format!("{}: {why}", code.as_u16());
            let retries = (self.attempts - 1).max(0) as u32;
            if retries >= self.step.retry_limit() {
                let _ = tx.send(Report::Done {
                    index: self.index,
                    attempts: self.attempts,
                    outcome: Outcome::Failed(error),
                });
                return;
            }
            let _ = tx.send(Report::Retrying {
                index: self.index,
                attempts: self.attempts,
                error,
            });
            tokio::time::sleep(self.step.backoff(retries + 1)).await;
        }
    }
}
