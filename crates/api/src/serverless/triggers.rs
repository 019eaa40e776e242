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

use crate::field::{Errors, FieldError};
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

/// The rules of `spec.triggers`.
pub fn validate(triggers: &Value) -> Errors {
    let mut errs = Vec::new();
    let Some(list) = triggers.as_array() else {
        return vec![FieldError::invalid(
            "spec.triggers",
            triggers,
            "must be a list",
        )];
    };
    for (i, t) in list.iter().enumerate() {
        let at = format!("spec.triggers[{i}]");
        match (t.get("schedule"), t.get("event")) {
            (Some(_), Some(_)) | (None, None) => errs.push(FieldError::invalid(
                at.clone(),
                t,
                "must have exactly one of schedule and event",
            )),
            (Some(s), None) => {
                if let Err(why) = s
                    .as_str()
                    .ok_or_else(|| "must be a string".to_string())
                    .and_then(crate::cron::parse)
                {
                    errs.push(FieldError::invalid(format!("{at}.schedule"), s, why));
                }
                if let Some(tz) = t.get("timeZone") {
                    if let Err(why) = tz
                        .as_str()
                        .ok_or_else(|| "must be a string".to_string())
                        .and_then(|z| crate::cron::time_zone(Some(z)))
                    {
                        errs.push(FieldError::invalid(format!("{at}.timeZone"), tz, why));
                    }
                }
            }
            (None, Some(e)) => {
                for f in ["apiVersion", "kind"] {
                    if e[f].as_str().is_none_or(str::is_empty) {
                        errs.push(FieldError::required(format!("{at}.event.{f}"), ""));
                    }
                }
                if let Some(sel) = e.get("labelSelector") {
                    let parsed = sel
                        .as_str()
                        .ok_or_else(|| "must be a string".to_string())
                        .and_then(|s| crate::selector::Selector::parse(s).map(|_| ()));
                    if let Err(why) = parsed {
                        errs.push(FieldError::invalid(
                            format!("{at}.event.labelSelector"),
                            sel,
                            why,
                        ));
                    }
                }
                for (j, ty) in e["types"].as_array().into_iter().flatten().enumerate() {
                    if !EVENT_TYPES.iter().any(|t| ty == t) {
                        errs.push(FieldError::not_supported(
                            format!("{at}.event.types[{j}]"),
                            ty,
                            EVENT_TYPES,
                        ));
                    }
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_trigger_is_a_schedule_or_an_event() {
        let fields = |v: Value| {
            validate(&v)
                .into_iter()
                .map(|e| e.field)
                .collect::<Vec<_>>()
        };
        assert!(fields(json!([{"schedule": "*/5 * * * *", "timeZone": "Europe/Paris"},
            {"event": {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": "a=b", "types": ["ADDED"]}}]))
        .is_empty());
        assert_eq!(
            fields(
                json!([{}, {"schedule": "61 * * * *"}, {"schedule": "@hourly", "timeZone": "Mars/Base"},
                {"event": {"kind": "ConfigMap", "labelSelector": "a in (", "types": ["CHANGED"]}}])
            ),
            [
                "spec.triggers[0]",
                "spec.triggers[1].schedule",
                "spec.triggers[2].timeZone",
                "spec.triggers[3].event.apiVersion",
                "spec.triggers[3].event.labelSelector",
                "spec.triggers[3].event.types[0]"
            ]
        );
        let e: EventTrigger = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Pod", "types": ["DELETED"]}),
        )
        .unwrap();
        assert!(e.wants("DELETED") && !e.wants("ADDED"));
    }
}
