//! Property tests over every decoder and patcher of user input: whatever
//! arrives, they answer Ok or Err, never panic. A few thousand cases run in
//! the suite; `PROPTEST_CASES=100000` runs the long version (doc/benchmarks.md).
//!
//! Inputs are drawn from the characters and keys each parser cares about
//! (selector operators, patch directives, protobuf field tags), so the cases
//! reach deep into the parsers instead of failing on the first byte.

use minik8s_api::patch::{apply_patch, PatchType};
use minik8s_api::selector::{FieldSelector, Selector};
use proptest::prelude::*;
use serde_json::{json, Value};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Keys a strategic merge patch or an object may carry, with random ones.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "metadata",
            "spec",
            "containers",
            "name",
            "image",
            "ports",
            "containerPort",
            "env",
            "value",
            "labels",
            "$patch",
            "$retainKeys",
            "$setElementOrder/containers",
            "$deleteFromPrimitiveList/finalizers",
            "finalizers",
            "volumes",
            "args",
            "items",
        ])
        .prop_map(str::to_string),
        "[a-z$/.~0-9]{0,6}",
    ]
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "delete", "replace", "merge", "c", "-1Gi", "100m", "/a/0"
        ])
        .prop_map(|s| json!(s)),
        "[a-z0-9/~.-]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A JSON patch: a list of operations with plausible and broken parts.
fn json_patch() -> impl Strategy<Value = Value> {
    let path = "(/[a-z0-9~-]{0,4}){0,4}";
    let op = (
        prop::sample::select(vec![
            "add", "remove", "replace", "move", "copy", "test", "bogus",
        ]),
        path,
        path,
        json_value(),
        any::<bool>(),
    )
        .prop_map(|(op, path, from, value, with_value)| {
            let mut o = json!({"op": op, "path": path, "from": from});
            if with_value {
                o["value"] = value;
            }
            o
        });
    prop_oneof![
        prop::collection::vec(op, 0..5).prop_map(Value::Array),
        json_value(),
    ]
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": ["x"]},
           "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["1", "2"],
                                    "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}],
                    "volumes": [{"name": "v", "emptyDir": {}}]}})
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn patches_never_panic(original in prop_oneof![Just(pod()), json_value()], merge in json_value(), jp in json_patch(), strategic_ok in any::<bool>()) {
        let _ = apply_patch(&original, &merge, PatchType::Merge, strategic_ok);
        let _ = apply_patch(&original, &merge, PatchType::Strategic, strategic_ok);
        let _ = apply_patch(&original, &jp, PatchType::Json, strategic_ok);
    }

    #[test]
    fn label_selectors_never_panic(s in "[a-z0-9=!,() .:/-]{0,40}|(notin|in|exists)[ a-z(),!=]{0,20}", labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..4)) {
        if let Ok(sel) = Selector::parse(&s) {
            let _ = sel.matches(&labels);
        }
    }

    #[test]
    fn field_selectors_never_panic(s in "[a-z.=!,]{0,30}", obj in json_value()) {
        if let Ok(sel) = FieldSelector::parse(&s, &["metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"]) {
            let _ = sel.matches(&obj);
        }
    }

    #[test]
    fn quantities_durations_and_cron_never_panic(q in "[-+0-9.eEinumkKMGTP]{0,12}", d in "[0-9.hms]{0,10}", cron in "[0-9*/,@a-z -]{0,24}") {
        if let Ok(v) = minik8s_api::quantity::Quantity::parse(&q) {
            let _ = (v.millis(), v.units());
        }
        let _ = minik8s_api::meta::parse_duration(&d);
        if let Ok(schedule) = minik8s_api::cron::parse(&cron) {
            let _ = schedule.next_after(chrono::Utc::now(), chrono_tz::UTC);
        }
    }

    #[test]
    fn protobuf_bodies_never_panic(tail in prop::collection::vec(any::<u8>(), 0..200), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6)) {
        // Random bytes after the magic prefix...
        let mut body = b"k8s\x00".to_vec();
        body.extend_from_slice(&tail);
        let _ = minik8s_wire::protobuf::decode_object(&body);
        // ...and a real Pod's encoding with bytes changed.
        if let Ok(Some(mut valid)) = minik8s_wire::protobuf::encode_object(&pod()) {
            for (i, b) in &flips {
                let at = i.index(valid.len());
                valid[at] = *b;
            }
            let _ = minik8s_wire::protobuf::decode_object(&valid);
            valid.truncate(valid.len() / 2);
            let _ = minik8s_wire::protobuf::decode_object(&valid);
        }
    }

    #[test]
    fn validation_never_panics(spec in json_value(), meta in json_value()) {
        fn both<K: minik8s_validation::KindRules>(obj: &Value) {
            let _ = minik8s_validation::validate::<K>(obj, None);
            let _ = minik8s_validation::validate::<K>(obj, Some(&pod()));
        }
        use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
        let obj = json!({"metadata": meta, "spec": spec});
        both::<core::Pod>(&obj);
        both::<apps::Deployment>(&obj);
        both::<core::Service>(&obj);
        both::<core::ConfigMap>(&obj);
        both::<batch::Job>(&obj);
        both::<apps::StatefulSet>(&obj);
    }
}
