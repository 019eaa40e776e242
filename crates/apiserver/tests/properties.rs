//! Property tests at the apiserver's edge: bodies in any media type, paging
//! tokens, and random objects and patches sent over HTTP. Whatever arrives,
//! the answer is a success or a 4xx `Status`, never a panic or a 5xx.
//! `PROPTEST_CASES=100000` runs the long version (doc/benchmarks.md).

use apiserver::decode::decode_body;
use apiserver::pagination::Page;
use axum::http::{header, HeaderMap};
use minik8s_testkit::{Backend, TestServer};
use proptest::prelude::*;
use serde_json::{json, Value};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json; charset=utf-8",
    "text/plain",
    "application/cbor",
    "",
];

/// Pod-shaped JSON with random parts where users make mistakes.
fn pod_like() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9./-]{0,10}".prop_map(Value::String),
        prop::sample::select(vec!["-1Gi", "1e400", "100m", "Always", "TCP", "1BAD", ""])
            .prop_map(|s| json!(s)),
    ];
    let any_value = scalar.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (
        "[a-z0-9.-]{0,12}",
        any_value.clone(),
        any_value.clone(),
        any_value,
        any::<u16>(),
    )
        .prop_map(|(name, image, resources, extra, port)| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"p": "t"}},
                   "spec": {"containers": [{"name": "c", "image": image, "resources": resources,
                                            "ports": [{"containerPort": port}]}], "extra": extra}})
        })
}

proptest! {
    #![proptest_config(config(3_000))]

    #[test]
    fn bodies_decode_or_fail_with_4xx(ct in prop::sample::select(MEDIA_TYPES), body in prop::collection::vec(any::<u8>(), 0..300), json_body in pod_like()) {
        let mut headers = HeaderMap::new();
        if !ct.is_empty() {
            headers.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        }
        for bytes in [body, json_body.to_string().into_bytes(), serde_yaml::to_string(&json_body).unwrap().into_bytes()] {
            if let Err(e) = decode_body(&headers, &bytes) {
                prop_assert!((400..500).contains(&e.code), "{e:?}");
            }
        }
    }

    #[test]
    fn paging_parameters_parse_or_fail_with_400(limit in "[-0-9a-z]{0,6}", token in "[A-Za-z0-9_=-]{0,60}", rv in "[0-9a-z]{0,4}") {
        if let Err(e) = Page::parse(Some(&limit), Some(&token), Some(&rv)) {
            prop_assert_eq!(e.code, 400);
        }
    }
}

/// Random pods and patches over HTTP against a real apiserver: never a 5xx,
/// every refusal a Status.
#[test]
fn random_objects_and_patches_over_http_get_4xx_not_5xx() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(TestServer::start(Backend::Embedded));
    let http = reqwest::Client::new();
    let pods = format!("{}/api/v1/namespaces/default/pods", s.url);
    let send = |req: reqwest::RequestBuilder| {
        rt.block_on(async {
            let resp = req.send().await.unwrap();
            let code = resp.status().as_u16();
            (code, resp.text().await.unwrap())
        })
    };
    let base = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "target"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    assert_eq!(send(http.post(&pods).json(&base)).0, 201);
    let check = |code: u16, body: &str| -> Result<(), TestCaseError> {
        prop_assert!(code < 500, "{code}: {body}");
        if code >= 400 {
            let status: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            prop_assert_eq!(&status["kind"], "Status", "{}", body);
            prop_assert_eq!(status["code"].as_u64(), Some(u64::from(code)));
        }
        Ok(())
    };
    let mut runner = proptest::test_runner::TestRunner::new(config(300));
    runner
        .run(
            &(
                pod_like(),
                pod_like(),
                prop::sample::select(vec![
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/json-patch+json",
                    "application/apply-patch+yaml",
                ]),
            ),
            |(pod, patch, patch_type)| {
                let (code, body) = send(http.post(&pods).json(&pod));
                check(code, &body)?;
                let patch_body = if patch_type == "application/json-patch+json" {
                    json!([{"op": "replace", "path": "/spec", "value": patch["spec"]}]).to_string()
                } else {
                    patch.to_string()
                };
                let (code, body) = send(
                    http.patch(format!("{pods}/target?fieldManager=prop"))
                        .header("Content-Type", patch_type)
                        .body(patch_body),
                );
                check(code, &body)
            },
        )
        .unwrap();
}
