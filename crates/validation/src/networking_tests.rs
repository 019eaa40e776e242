//! Ingress and IngressClass rules, with Kubernetes' messages.

use super::*;
use serde_json::Value;

/// `v` decoded as the typed object the rules take.
fn decoded<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap()
}

fn ingress(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"}, "spec": spec})
}

fn svc(name: &str, port: Value) -> Value {
    json!({"service": {"name": name, "port": port}})
}

fn rule(host: &str, paths: Value) -> Value {
    json!({"host": host, "http": {"paths": paths}})
}

fn errors(o: &Value, old: Option<&Value>) -> Vec<String> {
    let mut errs = Vec::new();
    let old = old.map(decoded::<Ingress>);
    validate_ingress(&decoded(o), old.as_ref(), &mut errs);
    errs.iter().map(|e| e.to_string()).collect()
}

fn has(o: &Value, want: &str) {
    let got = errors(o, None);
    assert!(got.iter().any(|e| e == want), "want {want}\ngot {got:?}");
}

#[test]
fn a_tutorial_ingress_is_valid() {
    let o = ingress(json!({"ingressClassName": "minik8s", "rules": [
        rule("hello.world.minik8s", json!([
            {"path": "/world", "pathType": "Prefix", "backend": svc("world", json!({"number": 80}))},
            {"path": "/", "pathType": "Exact", "backend": svc("hello", json!({"name": "http"}))}])),
        rule("*.apps.minik8s", json!([{"path": "/", "pathType": "ImplementationSpecific", "backend": svc("apps", json!({"number": 8080}))}]))],
        "tls": [{"hosts": ["hello.world.minik8s", "*.apps.minik8s"], "secretName": "hello-tls"}]}));
    assert!(errors(&o, None).is_empty(), "{:?}", errors(&o, None));
    let default_only = ingress(json!({"defaultBackend": svc("hello", json!({"number": 80}))}));
    assert!(errors(&default_only, None).is_empty());
}

#[test]
fn every_rule() {
    let one = |host: &str, path: Value| ingress(json!({"rules": [rule(host, json!([path]))]}));
    let ok_backend = svc("hello", json!({"number": 80}));
    has(
        &ingress(json!({})),
        "spec: Invalid value: null: either `defaultBackend` or `rules` must be specified",
    );
    has(
        &one(
            "10.0.0.1",
            json!({"path": "/", "pathType": "Prefix", "backend": ok_backend}),
        ),
        "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
    );
    has(
        &one(
            "Hello_World",
            json!({"path": "/", "pathType": "Prefix", "backend": ok_backend}),
        ),
        &format!(
            "spec.rules[0].host: Invalid value: \"Hello_World\": {}",
            minik8s_api::names::dns1123_subdomain_error("x_").unwrap()
        ),
    );
    has(
        &one(
            "foo.*.com",
            json!({"path": "/", "pathType": "Prefix", "backend": ok_backend}),
        ),
        &format!("spec.rules[0].host: Invalid value: \"foo.*.com\": {WILDCARD_MSG}"),
    );
    has(
        &one("a.b", json!({"path": "/", "backend": ok_backend})),
        "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
    );
    has(
        &one("a.b", json!({"path": "/", "pathType": "Regex", "backend": ok_backend})),
        "spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
    );
    has(
        &one(
            "a.b",
            json!({"path": "world", "pathType": "Prefix", "backend": ok_backend}),
        ),
        "spec.rules[0].http.paths[0].path: Invalid value: \"world\": must be an absolute path",
    );
    has(
        &one(
            "a.b",
            json!({"path": "/a//b", "pathType": "Exact", "backend": ok_backend}),
        ),
        "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//'",
    );
    has(
        &one(
            "a.b",
            json!({"path": "/a/..", "pathType": "Prefix", "backend": ok_backend}),
        ),
        "spec.rules[0].http.paths[0].path: Invalid value: \"/a/..\": cannot end with '/..'",
    );
    has(
        &ingress(json!({"rules": [{"host": "a.b", "http": {"paths": []}}]})),
        "spec.rules[0].http.paths: Required value",
    );
    has(
        &one("a.b", json!({"path": "/", "pathType": "Prefix", "backend": svc("hello", json!({"number": 80, "name": "http"}))})),
        "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both port name & port number",
    );
    has(
        &one(
            "a.b",
            json!({"path": "/", "pathType": "Prefix", "backend": svc("hello", json!({}))}),
        ),
        "spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
    );
    has(
        &one("a.b", json!({"path": "/", "pathType": "Prefix", "backend": svc("hello", json!({"number": 70000}))})),
        "spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive",
    );
    has(
        &one(
            "a.b",
            json!({"path": "/", "pathType": "Prefix", "backend": svc("Hello", json!({"number": 80}))}),
        ),
        &format!(
            "spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Hello\": {}",
            minik8s_api::names::dns1035_label_error("Hello").unwrap()
        ),
    );
    has(
        &one("a.b", json!({"path": "/", "pathType": "Prefix", "backend": {}})),
        "spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required",
    );
    has(
        &one("a.b", json!({"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "a", "port": {"number": 80}}, "resource": {"kind": "Bucket", "name": "b"}}})),
        "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both resource and service backends",
    );
    has(
        &ingress(
            json!({"defaultBackend": ok_backend, "tls": [{"hosts": ["*.*.x"], "secretName": "Bad_Secret"}]}),
        ),
        &format!("spec.tls[0].hosts[0]: Invalid value: \"*.*.x\": {WILDCARD_MSG}"),
    );
    has(
        &ingress(json!({"defaultBackend": ok_backend, "ingressClassName": "Bad!"})),
        &format!(
            "spec.ingressClassName: Invalid value: \"Bad!\": {}",
            minik8s_api::names::dns1123_subdomain_error("Bad!").unwrap()
        ),
    );
    let mut both = ingress(json!({"defaultBackend": ok_backend, "ingressClassName": "a"}));
    both["metadata"]["annotations"] = json!({INGRESS_CLASS_ANNOTATION: "b"});
    has(
        &both,
        "annotations.kubernetes.io/ingress.class: Invalid value: \"b\": must match `ingressClassName` when both are specified",
    );
    assert!(
        errors(&both, Some(&both)).is_empty(),
        "only checked on create"
    );
}

#[test]
fn ingress_class_rules() {
    let class = |controller: &str, params: Value| json!({"metadata": {"name": "c"}, "spec": {"controller": controller, "parameters": params}});
    let errs = |o: &Value, old: Option<&Value>| {
        let mut e = Vec::new();
        let old = old.map(decoded::<IngressClass>);
        validate_ingress_class(&decoded(o), old.as_ref(), &mut e);
        e.iter().map(|e| e.to_string()).collect::<Vec<_>>()
    };
    assert!(errs(&class("minik8s.io/ingress", Value::Null), None).is_empty());
    assert_eq!(
        errs(&class("", Value::Null), None),
        ["spec.controller: Required value"]
    );
    assert_eq!(
        errs(&class("nginx", Value::Null), None),
        ["spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"]
    );
    let a = class("minik8s.io/ingress", Value::Null);
    let b = class("example.com/other", Value::Null);
    assert_eq!(
        errs(&b, Some(&a)),
        ["spec.controller: Invalid value: \"example.com/other\": field is immutable"]
    );
    assert_eq!(
        errs(
            &class(
                "minik8s.io/x",
                json!({"kind": "Config", "name": "c", "scope": "Namespace"})
            ),
            None
        ),
        ["spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"]
    );
}
