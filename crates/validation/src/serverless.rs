//! The rules of minik8s' serverless Function (`serverless.minik8s.io/v1alpha1`),
//! on its JSON form: a Function is served as a custom resource, so a field
//! of the wrong type is a 422 naming it, not a decoding error.

use crate::{Errors, FieldError};
use minik8s_api::serverless::{self, triggers};
use serde_json::{json, Value};

/// The API's rules for a Function (422 with the field path).
pub fn validate_function(obj: &Value) -> Errors {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let runtime = spec.get("runtime").cloned().unwrap_or(json!("python"));
    if !serverless::RUNTIMES.iter().any(|r| runtime == *r) {
        errs.push(FieldError::not_supported(
            "spec.runtime",
            &runtime,
            serverless::RUNTIMES,
        ));
    }
    validate_source(&spec, &mut errs);
    if let Some(h) = spec.get("handler") {
        let ok = h.as_str().is_some_and(|h| {
            let mut chars = h.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !ok {
            errs.push(FieldError::invalid(
                "spec.handler",
                h,
                "must be a Python identifier",
            ));
        }
    }
    if let Some(t) = spec.get("timeoutSeconds") {
        if t.as_i64().is_none_or(|t| !(1..=3600).contains(&t)) {
            errs.push(FieldError::invalid(
                "spec.timeoutSeconds",
                t,
                "must be between 1 and 3600, inclusive",
            ));
        }
    }
    if let Some(t) = spec.get("triggers") {
        errs.extend(validate_triggers(t));
    }
    if let Some(scale) = spec.get("scale") {
        validate_scale(scale, &mut errs);
    }
    errs
}

/// A Function's code: inline (`spec.source`) or from a ConfigMap key, not both.
fn validate_source(spec: &Value, errs: &mut Errors) {
    match (spec.get("source"), spec.get("sourceFrom")) {
        (None, None) => errs.push(FieldError::required(
            "spec.source",
            "the function's code: spec.source or spec.sourceFrom",
        )),
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            "spec.sourceFrom",
            &json!("configMapKeyRef"),
            "may not be set together with spec.source",
        )),
        (Some(s), None) if !s.is_string() => {
            errs.push(FieldError::invalid("spec.source", s, "must be a string"))
        }
        (None, Some(from)) => {
            for f in ["name", "key"] {
                let v = from.pointer(&format!("/configMapKeyRef/{f}"));
                if v.and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(
                        format!("spec.sourceFrom.configMapKeyRef.{f}"),
                        "",
                    ));
                }
            }
        }
        _ => {}
    }
}

/// `spec.scale`: the bounds and the target of the autoscaler.
fn validate_scale(scale: &Value, errs: &mut Errors) {
    let int = |f: &str| scale.get(f).map(|v| (v, v.as_i64()));
    if let Some((v, n)) = int("minScale") {
        if n.is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                "spec.scale.minScale",
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some((v, n)) = int("maxScale") {
        if n.is_none_or(|n| n < 1) {
            errs.push(FieldError::invalid(
                "spec.scale.maxScale",
                v,
                "must be greater than or equal to 1",
            ));
        }
    }
    if let (Some((_, Some(min))), Some((v, Some(max)))) = (int("minScale"), int("maxScale")) {
        if max < min {
            errs.push(FieldError::invalid(
                "spec.scale.maxScale",
                v,
                "must be greater than or equal to spec.scale.minScale",
            ));
        }
    }
    if let Some((v, n)) = int("targetConcurrency") {
        if n.is_none_or(|n| n < 1) {
            errs.push(FieldError::invalid(
                "spec.scale.targetConcurrency",
                v,
                "must be greater than or equal to 1",
            ));
        }
    }
    for f in ["stableWindow", "idleWindow"] {
        if let Some(v) = scale.get(f) {
            let ok = v
                .as_str()
                .and_then(|s| minik8s_api::meta::parse_duration(s).ok())
                .is_some_and(|d| d >= std::time::Duration::from_secs(1));
            if !ok {
                errs.push(FieldError::invalid(
                    format!("spec.scale.{f}"),
                    v,
                    "must be a duration of at least 1s (e.g. \"30s\", \"2m\")",
                ));
            }
        }
    }
}

/// The rules of `spec.triggers`.
pub fn validate_triggers(triggers: &Value) -> Errors {
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
                    .and_then(minik8s_api::cron::parse)
                {
                    errs.push(FieldError::invalid(format!("{at}.schedule"), s, why));
                }
                if let Some(tz) = t.get("timeZone") {
                    if let Err(why) = tz
                        .as_str()
                        .ok_or_else(|| "must be a string".to_string())
                        .and_then(|z| minik8s_api::cron::time_zone(Some(z)))
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
                        .and_then(|s| minik8s_api::selector::Selector::parse(s).map(|_| ()));
                    if let Err(why) = parsed {
                        errs.push(FieldError::invalid(
                            format!("{at}.event.labelSelector"),
                            sel,
                            why,
                        ));
                    }
                }
                for (j, ty) in e["types"].as_array().into_iter().flatten().enumerate() {
                    if !triggers::EVENT_TYPES.iter().any(|t| ty == t) {
                        errs.push(FieldError::not_supported(
                            format!("{at}.event.types[{j}]"),
                            ty,
                            triggers::EVENT_TYPES,
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

    #[test]
    fn every_rule_names_its_field() {
        let fields = |v: Value| -> Vec<String> {
            validate_function(&v).into_iter().map(|e| e.field).collect()
        };
        assert!(fields(json!({"spec": {"source": "x"}})).is_empty());
        assert_eq!(fields(json!({"spec": {}})), ["spec.source"]);
        assert_eq!(
            fields(json!({"spec": {"source": "x", "runtime": "java"}})),
            ["spec.runtime"]
        );
        assert_eq!(
            fields(
                json!({"spec": {"source": "x", "sourceFrom": {"configMapKeyRef": {"name": "a", "key": "b"}}}})
            ),
            ["spec.sourceFrom"]
        );
        assert_eq!(
            fields(json!({"spec": {"sourceFrom": {"configMapKeyRef": {"name": "a"}}}})),
            ["spec.sourceFrom.configMapKeyRef.key"]
        );
        assert_eq!(
            fields(json!({"spec": {"source": "x", "handler": "my-handler", "timeoutSeconds": 0}})),
            ["spec.handler", "spec.timeoutSeconds"]
        );
        assert_eq!(
            fields(
                json!({"spec": {"source": "x", "scale": {"minScale": 3, "maxScale": 2,
                "targetConcurrency": 0, "idleWindow": "soon"}}})
            ),
            [
                "spec.scale.maxScale",
                "spec.scale.targetConcurrency",
                "spec.scale.idleWindow"
            ]
        );
    }

    #[test]
    fn each_trigger_is_a_schedule_or_an_event() {
        let fields = |v: Value| {
            validate_triggers(&v)
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
    }
}
