//! The aggregation layer: Local APIServices for what the apiserver serves
//! (the metrics API among them, as metrics-server registers it on
//! Kubernetes), and an extension apiserver (our own HTTPS server on loopback)
//! registered with an APIService: its group in discovery, its requests
//! proxied with the requester's identity, its availability checked.

mod common;

use axum::http::HeaderMap;
use axum::routing::get;
use axum::Json;
use common::{Http, Kubectl};
use minik8s_testkit::{eventually, Backend, TestServer};
use serde_json::{json, Value};

/// An extension apiserver for `demo.example.com/v1`; returns its port and CA bundle.
async fn extension_server() -> (u16, String) {
    let router = axum::Router::new()
        .route("/apis/demo.example.com/v1", get(|| async {
            Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "demo.example.com/v1",
                "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ["get", "list"]}]}))
        }))
        .route("/apis/demo.example.com/v1/namespaces/{ns}/widgets", get(|headers: HeaderMap| async move {
            let user = headers.get("X-Remote-User").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            Json(json!({"kind": "WidgetList", "apiVersion": "demo.example.com/v1", "metadata": {},
                "items": [{"kind": "Widget", "apiVersion": "demo.example.com/v1", "metadata": {"name": "w1"}, "requestedBy": user}]}))
        }));
    common::tls_server(router, &["demo-api.default.svc"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiservices_local_and_aggregated() {
    let s = TestServer::start(Backend::Embedded).await;
    let http = Http::new(&s.url);
    let k = Kubectl::new(&s.url);
    let apiservices = "/apis/apiregistration.k8s.io/v1/apiservices";

    // Every served group/version has its Local APIService, the metrics API included.
    let (_, metrics) = http
        .get(&format!("{apiservices}/v1beta1.metrics.k8s.io"))
        .await;
    assert_eq!(
        metrics["status"]["conditions"][0]["status"], "True",
        "{metrics}"
    );
    assert_eq!(metrics["status"]["conditions"][0]["reason"], "Local");
    let table = k
        .ok(&["get", "apiservice", "v1beta1.metrics.k8s.io", "v1.apps"])
        .await;
    assert!(
        table.lines().next().unwrap().split_whitespace().eq([
            "NAME",
            "SERVICE",
            "AVAILABLE",
            "AGE"
        ]),
        "{table}"
    );
    assert!(
        table.contains("v1beta1.metrics.k8s.io   Local     True"),
        "{table}"
    );

    // An extension apiserver behind a Service.
    let (port, ca) = extension_server().await;
    common::loopback_service(&http, "demo-api", port).await;
    let apiservice = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.demo.example.com"},
        "spec": {"group": "demo.example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
            "service": {"namespace": "default", "name": "demo-api", "port": 443}, "caBundle": ca}});
    assert_eq!(
        http.post(apiservices, "application/json", &apiservice.to_string())
            .await
            .0,
        201
    );
    eventually(20, "the extension APIService is Available", || async {
        let (_, a) = http
            .get(&format!("{apiservices}/v1.demo.example.com"))
            .await;
        (a["status"]["conditions"][0]["status"] == "True").then_some(())
    })
    .await;
    let table = k.ok(&["get", "apiservice", "v1.demo.example.com"]).await;
    assert!(table.contains("default/demo-api   True"), "{table}");

    // Discovery lists the group; requests are proxied with who asked.
    let (_, apis) = http.get("/apis").await;
    assert!(
        apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "demo.example.com"),
        "{apis}"
    );
    let resources = k
        .ok(&["api-resources", "--api-group=demo.example.com"])
        .await;
    assert!(
        resources.contains("widgets") && resources.contains("Widget"),
        "{resources}"
    );
    let raw = k
        .ok(&[
            "get",
            "--raw",
            "/apis/demo.example.com/v1/namespaces/default/widgets",
        ])
        .await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["items"][0]["requestedBy"], "system:unsecured");

    // The extension apiserver's Service loses its endpoints: no longer available.
    let (code, _) = http
        .call(
            reqwest::Method::DELETE,
            "/api/v1/namespaces/default/endpoints/demo-api",
            "",
            "",
        )
        .await;
    assert_eq!(code, 200);
    let down = eventually(20, "the APIService is no longer Available", || async {
        let (_, a) = http
            .get(&format!("{apiservices}/v1.demo.example.com"))
            .await;
        (a["status"]["conditions"][0]["status"] == "False").then_some(a)
    })
    .await;
    assert_eq!(
        down["status"]["conditions"][0]["reason"], "MissingEndpoints",
        "{down}"
    );
    let (code, body) = http
        .get("/apis/demo.example.com/v1/namespaces/default/widgets")
        .await;
    assert_eq!(code, 503, "{body}");
}
