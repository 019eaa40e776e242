//! Asynchronous calls: `POST /function/NS/NAME?async=true` answers 202 with an
//! id at once; the call runs in the gateway and `GET /calls/ID` shows it.
//! Kept in the gateway's memory for an hour (at most [`MAX_KEPT`] calls).

use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_KEPT: usize = 10_000;
pub const KEPT_FOR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
struct Call {
    function: String,
    status: &'static str,
    code: Option<u16>,
    result: Option<Value>,
    started: chrono::DateTime<chrono::Utc>,
    completed: Option<chrono::DateTime<chrono::Utc>>,
    at: Instant,
}

#[derive(Default)]
pub struct Calls {
    inner: Mutex<(HashMap<String, Call>, VecDeque<String>)>,
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<String, Call>, VecDeque<String>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new call of `function` (namespace/name), Running; its id.
    pub fn start(&self, function: &str) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut g = self.lock();
        let (calls, order) = &mut *g;
        while order.len() >= MAX_KEPT
            || order
                .front()
                .and_then(|o| calls.get(o))
                .is_some_and(|c| c.at.elapsed() > KEPT_FOR)
        {
            if let Some(old) = order.pop_front() {
                calls.remove(&old);
            }
        }
        calls.insert(
            id.clone(),
            Call {
                function: function.to_string(),
                status: "Running",
                code: None,
                result: None,
                started: chrono::Utc::now(),
                completed: None,
                at: Instant::now(),
            },
        );
        order.push_back(id.clone());
        id
    }

    /// Records the answer: Succeeded for a 2xx, Failed otherwise.
    pub fn finish(&self, id: &str, code: u16, result: Value) {
        if let Some(c) = self.lock().0.get_mut(id) {
            c.status = if (200..300).contains(&code) {
                "Succeeded"
            } else {
                "Failed"
            };
            c.code = Some(code);
            c.result = Some(result);
            c.completed = Some(chrono::Utc::now());
        }
    }

    /// The call as `GET /calls/ID` shows it.
    pub fn get(&self, id: &str) -> Option<Value> {
        let g = self.lock();
        let c = g.0.get(id)?;
        let time =
            |t: &chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
        let mut v = json!({"id": id, "function": c.function, "status": c.status,
            "startTime": time(&c.started)});
        if let Some(done) = &c.completed {
            v["completionTime"] = json!(time(done));
            v["code"] = json!(c.code);
            let key = if c.status == "Succeeded" {
                "result"
            } else {
                "error"
            };
            v[key] = c.result.clone().unwrap_or(Value::Null);
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_runs_then_has_its_result_or_error() {
        let calls = Calls::default();
        let id = calls.start("default/hello");
        assert_eq!(calls.get(&id).unwrap()["status"], "Running");
        calls.finish(&id, 200, json!({"hello": "world"}));
        let c = calls.get(&id).unwrap();
        assert_eq!(c["status"], "Succeeded");
        assert_eq!(c["result"], json!({"hello": "world"}));
        assert!(c["completionTime"].is_string());
        let bad = calls.start("default/hello");
        calls.finish(
            &bad,
            500,
            json!({"error": "ZeroDivisionError: division by zero"}),
        );
        assert_eq!(calls.get(&bad).unwrap()["status"], "Failed");
        assert!(calls.get("nope").is_none());
    }
}
