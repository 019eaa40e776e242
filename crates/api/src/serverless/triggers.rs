//! What calls a Function besides HTTP: a schedule (a cron line, read by the
//! CronJob controller's parser in [`crate::cron`]) or changes of API objects
//! (an event trigger, like Knative's ApiServerSource). The serverless
//! gateway runs both (`crates/serverless/src/triggers.rs`).
//!
//! ```yaml
//! triggers:
//! - schedule: "*/5 * * * *"        # every five minutes; timeZone optional
//!   data: {report: daily}          # the event the function gets
//! - event:                         # {"type": "ADDED|MODIFIED|DELETED", "object": {...}}
//!     apiVersion: v1
//!     kind: ConfigMap
//!     labelSelector: notify=true
//!     types: [ADDED, MODIFIED]     # default: all three
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The watch event types an event trigger may ask for.
pub const EVENT_TYPES: &[&str] = &["ADDED", "MODIFIED", "DELETED"];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// A cron line (five fields or a macro such as `@hourly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The schedule's time zone (IANA name; default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// What a scheduled call sends (default `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<EventTrigger>,
}

/// Objects whose changes call the function (in the function's namespace,
/// or every namespace for a cluster-scoped kind).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventTrigger {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// ADDED, MODIFIED, DELETED (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
}

impl EventTrigger {
    pub fn wants(&self, event_type: &str) -> bool {
        self.types
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t == event_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_trigger_wants_the_types_it_names() {
        let e: EventTrigger = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Pod", "types": ["DELETED"]}),
        )
        .unwrap();
        assert!(e.wants("DELETED") && !e.wants("ADDED"));
    }
}
