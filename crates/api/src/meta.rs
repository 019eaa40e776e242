//! Small helpers for reading and writing object metadata on the JSON form.

use serde_json::{Map, Value};
use std::time::Duration;

/// The current time as Kubernetes writes timestamps (`2024-01-01T00:00:00Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A Kubernetes `Time` (k8s-openapi keeps a `jiff::Timestamp`) as the
/// `chrono` time the controllers compute with.
pub fn utc_of(
    t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// A `chrono` time as a Kubernetes `Time`.
pub fn time_of(
    t: chrono::DateTime<chrono::Utc>,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let stamp = k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(stamp)
}

/// The current time as a Kubernetes `Time`.
pub fn time_now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    time_of(chrono::Utc::now())
}

/// A member of `metadata` (borrowed lookups: `Value::pointer` allocates
/// two strings per segment, and these run several times per request).
pub fn field<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
    obj.get("metadata")?.get(name)
}

pub fn name(obj: &Value) -> &str {
    field(obj, "name").and_then(Value::as_str).unwrap_or("")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    field(obj, "namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub fn uid(obj: &Value) -> &str {
    field(obj, "uid").and_then(Value::as_str).unwrap_or("")
}

pub fn resource_version(obj: &Value) -> &str {
    field(obj, "resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata` as a mutable map, created if missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj.as_object_mut().expect("object");
    let meta = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("object")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(field(obj, "finalizers").unwrap_or(&Value::Null))
}

/// The strings of a JSON list (anything else: none).
pub fn strings(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

pub fn is_deleting(obj: &Value) -> bool {
    field(obj, "deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// The human age kubectl prints (`5s`, `3m2s`, `4h`, `2d`), as apimachinery's `HumanDuration`.
pub fn human_age(since: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(since) else {
        return "<unknown>".into();
    };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    human_duration(secs)
}

pub fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        if secs % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", secs % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        format!("{}y{}d", d / 365, d % 365)
    } else {
        format!("{}y", d / 365)
    }
}

/// Parses a Go-style duration as Kubernetes' flags and annotations take it:
/// `50s`, `5m`, `1m30s`, `500ms`, `2h`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{s:?}: missing unit (ms, s, m, h)"))?;
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("{s:?}: invalid duration"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(182), "3m2s");
        assert_eq!(human_duration(15 * 60), "15m");
        assert_eq!(human_duration(4 * 3600), "4h");
        assert_eq!(human_duration(4 * 3600 + 120), "4h2m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
        assert_eq!(human_duration(30 * 86400), "30d");
    }
}
