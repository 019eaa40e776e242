//! Triggers: calls of a Function that no HTTP caller makes. Once a second
//! the scheduled triggers due are fired (cron lines read by the CronJob
//! controller's parser); one watch per (namespace, kind, label selector)
//! asked for by any function turns each change into a call with
//! `{"type": "ADDED|MODIFIED|DELETED", "object": ...}`. Every call goes
//! through the gateway (so it wakes a function at zero) and leaves an Event
//! on the Function: `Triggered` with the answer, or `TriggerFailed`.
//!
//! ```text
//!   tick 1/s ─▶ due_schedules(functions, next times) ─┐
//!   watch ConfigMaps -l notify=true ─▶ subscribers() ──┴▶ Gateway::call ─▶ Event on the Function
//! ```

use crate::gateway::Gateway;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use minik8s_api::cron;
use minik8s_api::serverless::Function;
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::{Client, ListParams, WatchEvent};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// One scheduled trigger: the function (`ns/name`), its index, the schedule and time zone.
pub type ScheduleKey = (String, usize, String, Option<String>);

/// One watch serving event triggers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchKey {
    /// The function's namespace; None for a cluster-scoped kind.
    pub namespace: Option<String>,
    pub api_version: String,
    pub kind: String,
    pub label_selector: String,
}

fn key_of(f: &Function) -> String {
    format!(
        "{}/{}",
        f.metadata.namespace.as_deref().unwrap_or_default(),
        f.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The scheduled triggers due at `now`, as (function, body, what fired);
/// `next` keeps each trigger's next time (a new trigger's first is after now).
pub fn due_schedules(
    functions: &[Arc<Function>],
    next: &mut HashMap<ScheduleKey, Option<DateTime<Utc>>>,
    now: DateTime<Utc>,
) -> Vec<(String, Value, String)> {
    let mut due = Vec::new();
    let mut live = BTreeSet::new();
    for f in functions {
        for (i, t) in f.spec.triggers.iter().flatten().enumerate() {
            let Some(line) = &t.schedule else { continue };
            let (Ok(schedule), Ok(tz)) =
                (cron::parse(line), cron::time_zone(t.time_zone.as_deref()))
            else {
                continue;
            };
            let key = (key_of(f), i, line.clone(), t.time_zone.clone());
            live.insert(key.clone());
            let at = next
                .entry(key)
                .or_insert_with(|| schedule.next_after(now, tz));
            if at.is_some_and(|at| at <= now) {
                due.push((
                    key_of(f),
                    t.data.clone().unwrap_or(json!({})),
                    format!("schedule {line:?}"),
                ));
                *at = schedule.next_after(now, tz);
            }
        }
    }
    next.retain(|k, _| live.contains(k));
    due
}

/// The watches the functions' event triggers need.
pub fn desired_watches(functions: &[Arc<Function>]) -> BTreeSet<WatchKey> {
    let mut out = BTreeSet::new();
    for f in functions {
        for t in f.spec.triggers.iter().flatten() {
            let Some(e) = &t.event else { continue };
            let Some(info) = minik8s_api::registry::by_kind(&e.api_version, &e.kind) else {
                continue;
            };
            out.insert(WatchKey {
                namespace: info
                    .namespaced
                    .then(|| f.metadata.namespace.clone().unwrap_or_default()),
                api_version: e.api_version.clone(),
                kind: e.kind.clone(),
                label_selector: e.label_selector.clone().unwrap_or_default(),
            });
        }
    }
    out
}

/// The functions a change seen on `watch` calls.
pub fn subscribers(functions: &[Arc<Function>], watch: &WatchKey, event_type: &str) -> Vec<String> {
    functions
        .iter()
        .filter(|f| watch.namespace.is_none() || f.metadata.namespace == watch.namespace)
        .filter(|f| {
            f.spec.triggers.iter().flatten().any(|t| {
                t.event.as_ref().is_some_and(|e| {
                    e.api_version == watch.api_version
                        && e.kind == watch.kind
                        && e.label_selector.clone().unwrap_or_default() == watch.label_selector
                        && e.wants(event_type)
                })
            })
        })
        .map(|f| key_of(f))
        .collect()
}

pub struct Triggers {
    client: Client,
    recorder: Recorder,
    gateway: Arc<Gateway>,
}

impl Triggers {
    pub fn new(client: Client, gateway: Arc<Gateway>) -> Arc<Triggers> {
        Arc::new(Triggers {
            recorder: Recorder::new(client.clone(), "serverless-gateway"),
            client,
            gateway,
        })
    }

    pub async fn run(self: Arc<Self>) {
        let mut next = HashMap::new();
        let mut watches: HashMap<WatchKey, tokio::task::JoinHandle<()>> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let functions = self.gateway.functions.list();
            for (function, body, what) in due_schedules(&functions, &mut next, Utc::now()) {
                self.fire(function, body, what);
            }
            let want = desired_watches(&functions);
            watches.retain(|k, task| {
                let keep = want.contains(k) && !task.is_finished();
                if !keep {
                    task.abort();
                }
                keep
            });
            for k in want {
                if !watches.contains_key(&k) {
                    let me = self.clone();
                    watches.insert(k.clone(), tokio::spawn(async move { me.watch(k).await }));
                }
            }
        }
    }

    /// Calls `function` (`ns/name`) with `body` and records the answer as an Event.
    fn fire(self: &Arc<Self>, function: String, body: Value, what: String) {
        let me = self.clone();
        tokio::spawn(async move {
            let (ns, name) = function.split_once('/').unwrap_or(("default", &function));
            let bytes = axum::body::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
            let (code, answer) = me.gateway.call(ns, name, bytes).await;
            let Some(f) = me.gateway.functions.get(&function) else {
                return;
            };
            let mut shown = answer.to_string();
            if shown.len() > 200 {
                let cut = (0..=200)
                    .rev()
                    .find(|i| shown.is_char_boundary(*i))
                    .unwrap_or(0);
                shown.truncate(cut);
                shown.push_str("...");
            }
            let (type_, reason) = if code.is_success() {
                (EventType::Normal, "Triggered")
            } else {
                (EventType::Warning, "TriggerFailed")
            };
            tracing::debug!(%function, %what, code = code.as_u16(), "trigger fired");
            let message = format!("{what}: answered {} {shown}", code.as_u16());
            me.recorder.event(&*f, type_, reason, &message).await;
        });
    }

    /// Follows the objects of `key`, calling the subscribed functions on each change.
    async fn watch(self: Arc<Self>, key: WatchKey) {
        let Some(info) = minik8s_api::registry::by_kind(&key.api_version, &key.kind) else {
            return;
        };
        let api = self.client.dynamic(info, key.namespace.as_deref());
        let mut lp = ListParams::default();
        if !key.label_selector.is_empty() {
            lp = lp.labels(&key.label_selector);
        }
        let mut version: Option<String> = None;
        loop {
            // Only changes from now on call functions: the list just gives the version.
            let rv = match &version {
                Some(v) => v.clone(),
                None => match api.list(&lp).await {
                    Ok(list) => list
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("0")
                        .to_string(),
                    Err(e) => {
                        tracing::debug!(?key, error = %e, "listing for an event trigger");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        continue;
                    }
                },
            };
            version = Some(rv.clone());
            let mut stream = match api.watch(&lp, &rv, false).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(?key, error = %e, "watching for an event trigger");
                    version = None;
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            while let Some(ev) = stream.next().await {
                let (type_, obj) = match ev {
                    Ok(WatchEvent::Added(o)) => ("ADDED", o),
                    Ok(WatchEvent::Modified(o)) => ("MODIFIED", o),
                    Ok(WatchEvent::Deleted(o)) => ("DELETED", o),
                    Ok(WatchEvent::Bookmark(v)) => {
                        version = Some(v);
                        continue;
                    }
                    // Too old (410) or broken: list again, from now.
                    Ok(WatchEvent::Error(_)) | Err(_) => {
                        version = None;
                        break;
                    }
                };
                if let Some(v) = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                {
                    version = Some(v.to_string());
                }
                let what = format!("{type_} {} {}", key.kind, minik8s_api::meta::name(&obj));
                let functions = self.gateway.functions.list();
                for function in subscribers(&functions, &key, type_) {
                    self.fire(
                        function,
                        json!({"type": type_, "object": obj}),
                        what.clone(),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(ns: &str, name: &str, triggers: Value) -> Arc<Function> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name},
                "spec": {"source": "x", "triggers": triggers}}))
            .unwrap(),
        )
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_schedule_fires_at_its_times_and_not_at_creation() {
        let fs = vec![function(
            "default",
            "tick",
            json!([{"schedule": "*/5 * * * *", "data": {"n": 1}}]),
        )];
        let mut next = HashMap::new();
        assert!(due_schedules(&fs, &mut next, at("2026-11-27T10:03:30Z")).is_empty());
        assert!(due_schedules(&fs, &mut next, at("2026-11-27T10:04:59Z")).is_empty());
        let due = due_schedules(&fs, &mut next, at("2026-11-27T10:05:00Z"));
        assert_eq!(
            due,
            [(
                "default/tick".to_string(),
                json!({"n": 1}),
                "schedule \"*/5 * * * *\"".to_string()
            )]
        );
        assert!(due_schedules(&fs, &mut next, at("2026-11-27T10:05:01Z")).is_empty());
        assert_eq!(
            due_schedules(&fs, &mut next, at("2026-11-27T10:10:00Z")).len(),
            1
        );
        // A removed trigger is forgotten.
        assert!(due_schedules(&[], &mut next, at("2026-11-27T10:15:00Z")).is_empty());
        assert!(next.is_empty());
    }

    #[test]
    fn event_triggers_share_watches_by_namespace_kind_and_selector() {
        let cm = |sel: &str, types: Value| json!([{"event": {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": sel, "types": types}}]);
        let fs = vec![
            function("a", "one", cm("notify=true", json!(["ADDED"]))),
            function("a", "two", cm("notify=true", json!(["ADDED", "DELETED"]))),
            function("b", "three", cm("notify=true", json!(["ADDED"]))),
            function(
                "a",
                "nodes",
                json!([{"event": {"apiVersion": "v1", "kind": "Node"}}]),
            ),
            function(
                "a",
                "unknown",
                json!([{"event": {"apiVersion": "v9", "kind": "Nothing"}}]),
            ),
        ];
        let watches: Vec<(Option<String>, String)> = desired_watches(&fs)
            .into_iter()
            .map(|w| (w.namespace, w.kind))
            .collect();
        assert_eq!(
            watches,
            [
                (None, "Node".to_string()),
                (Some("a".to_string()), "ConfigMap".to_string()),
                (Some("b".to_string()), "ConfigMap".to_string())
            ]
        );
        let key = WatchKey {
            namespace: Some("a".into()),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            label_selector: "notify=true".into(),
        };
        assert_eq!(subscribers(&fs, &key, "ADDED"), ["a/one", "a/two"]);
        assert_eq!(subscribers(&fs, &key, "DELETED"), ["a/two"]);
        assert!(subscribers(&fs, &key, "MODIFIED").is_empty());
    }
}
