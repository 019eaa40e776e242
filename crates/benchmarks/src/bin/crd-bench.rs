//! `crd-bench`: creates/s of a custom resource whose CRD has a 20-field
//! schema and 3 CEL rules, against creates/s of a ConfigMap of the same size
//! and raw store writes of the same bytes (the floor), at client concurrency
//! 1 and 16, on etcd and on the embedded store. Prints a Markdown report.
//!
//! Usage: `crd-bench [--quick]`.

use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Map, Value};
use std::time::Duration;

const LEVELS: [usize; 2] = [1, 16];
const FIELDS: usize = 20;

/// The CRD: 20 typed fields (strings with patterns and lengths, bounded
/// integers, an enum) and 3 CEL rules on spec.
fn crd() -> Value {
    let mut props = Map::new();
    for i in 0..FIELDS {
        let schema = match i % 4 {
            0 => json!({"type": "string", "maxLength": 64, "pattern": "^[a-z0-9-]+$"}),
            1 => json!({"type": "integer", "minimum": 0, "maximum": 1000000}),
            2 => json!({"type": "string", "enum": ["alpha", "beta", "gamma", "delta"]}),
            _ => json!({"type": "string", "minLength": 1, "maxLength": 128}),
        };
        props.insert(format!("field{i:02}"), schema);
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "benches.bench.minik8s.io"},
        "spec": {"group": "bench.minik8s.io", "scope": "Namespaced", "names": {"plural": "benches", "kind": "Bench"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object",
                "properties": {"spec": {"type": "object", "properties": props, "x-kubernetes-validations": [
                    {"rule": "self.field01 <= self.field05 + 1000000"},
                    {"rule": "self.field00.startsWith('v')"},
                    {"rule": "size(self.field03) < 100"}]}}}}}]}})
}

fn value(i: usize, n: usize) -> Value {
    match i % 4 {
        0 => json!(format!("v{n}-value-{i:02}")),
        1 => json!(n as i64 * 7 % 1000000),
        2 => json!("beta"),
        _ => json!(format!("some text for field {i} of object {n}")),
    }
}

fn bench_body(name: &str, n: usize) -> Value {
    let spec: Map<String, Value> = (0..FIELDS)
        .map(|i| (format!("field{i:02}"), value(i, n)))
        .collect();
    json!({"apiVersion": "bench.minik8s.io/v1", "kind": "Bench", "metadata": {"name": name}, "spec": spec})
}

/// A ConfigMap with the same 20 values as strings (about the same bytes).
fn config_map_body(name: &str, n: usize) -> Value {
    let data: Map<String, Value> = (0..FIELDS)
        .map(|i| {
            (
                format!("field{i:02}"),
                json!(value(i, n).to_string().trim_matches('"')),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

async fn post_all(
    s: &TestServer,
    path: &'static str,
    c: usize,
    total: usize,
    body: fn(&str, usize) -> Value,
    tag: &'static str,
) -> f64 {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let url = format!("{}{path}", s.url);
    benchmarks::ops_per_second(c, total, move |i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let r = client
                .post(&url)
                .json(&body(&format!("{tag}-{c}-{i}"), i))
                .send()
                .await
                .expect("POST");
            assert_eq!(
                r.status().as_u16(),
                201,
                "{}",
                r.text().await.unwrap_or_default()
            );
        }
    })
    .await
}

async fn run(backend: Backend, quick: bool) -> Vec<(usize, f64, f64, f64, usize)> {
    let s = TestServer::start(backend).await;
    let http = reqwest::Client::new();
    let r = http
        .post(format!(
            "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            s.url
        ))
        .json(&crd())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let benches = "/apis/bench.minik8s.io/v1/namespaces/default/benches";
    for _ in 0..100 {
        if http
            .get(format!("{}{benches}", s.url))
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sample = http
        .post(format!("{}{benches}", s.url))
        .json(&bench_body("sample", 0))
        .send()
        .await
        .unwrap();
    assert_eq!(sample.status().as_u16(), 201);
    let stored = s
        .server
        .store
        .get("/registry/bench.minik8s.io/benches/default/sample")
        .await
        .unwrap()
        .unwrap()
        .value;
    let size = stored.len();
    let mut rows = Vec::new();
    for c in LEVELS {
        let total = if quick {
            100
        } else if c == 1 {
            1000
        } else {
            4000
        };
        let raw = benchmarks::raw_writes(
            s.server.store.clone(),
            c,
            total,
            format!("/bench/raw/{c}"),
            stored.clone(),
        )
        .await;
        let cr = post_all(&s, benches, c, total, bench_body, "b").await;
        let cm = post_all(
            &s,
            "/api/v1/namespaces/default/configmaps",
            c,
            total,
            config_map_body,
            "cm",
        )
        .await;
        rows.push((c, raw, cr, cm, size));
    }
    rows
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    println!("# crd-bench: a custom resource (20-field schema, 3 CEL rules) against a ConfigMap of the same size\n");
    for (label, backend) in [("etcd", Backend::Etcd), ("embedded", Backend::Embedded)] {
        let rows = run(backend, quick).await;
        println!(
            "## {label} store (stored custom resource: {} bytes)\n",
            rows[0].4
        );
        println!("| concurrency | raw store writes/s | custom resource creates/s | ConfigMap creates/s | CR / ConfigMap |");
        println!("|---:|---:|---:|---:|---:|");
        for (c, raw, cr, cm, _) in rows {
            println!("| {c} | {raw:.0} | {cr:.0} | {cm:.0} | {:.2} |", cr / cm);
        }
        println!();
    }
}
