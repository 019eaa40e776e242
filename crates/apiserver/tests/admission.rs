//! Dynamic admission against a real HTTPS webhook server (our own, on
//! loopback, with a certificate from its own CA): a mutating webhook adds a
//! label, a validating webhook denies pods with an annotation, failurePolicy
//! Fail and Ignore with the webhook down, a webhook reached through a
//! Service, and ValidatingAdmissionPolicies (CEL) with Deny and Warn bindings.

mod common;

use axum::routing::post;
use axum::Json;
use base64::Engine;
use common::{assert_status, Http, Kubectl};
use minik8s_testkit::{eventually, free_port, Backend, TestServer};
use serde_json::{json, Value};

/// The webhook server's answer to one AdmissionReview.
fn answer(review: &Value, allowed: bool, patch: Option<Value>, message: &str) -> Json<Value> {
    let mut response = json!({"uid": review["request"]["uid"], "allowed": allowed});
    if let Some(p) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(p.to_string()));
    }
    if !allowed {
        response["status"] = json!({"code": 403, "reason": "Forbidden", "message": message});
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// Starts the webhook server; returns its port and the CA bundle (base64 PEM).
async fn webhook_server() -> (u16, String) {
    let router = axum::Router::new()
        .route(
            "/mutate",
            post(|Json(review): Json<Value>| async move {
                let has_labels = review["request"]["object"]["metadata"]["labels"].is_object();
                let patch = if has_labels {
                    json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
                };
                answer(&review, true, Some(patch), "")
            }),
        )
        .route(
            "/validate",
            post(|Json(review): Json<Value>| async move {
                let deny = review["request"]["object"]["metadata"]["annotations"]["deny"] == "yes";
                answer(&review, !deny, None, "pods annotated deny=yes are refused")
            }),
        );
    common::tls_server(router, &["127.0.0.1", "hook.default.svc"]).await
}

fn hook(name: &str, client: Value, ca: &str, policy: &str) -> Value {
    let mut client = client;
    client["caBundle"] = json!(ca);
    json!({"name": name, "clientConfig": client, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "failurePolicy": policy, "timeoutSeconds": 5,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}})
}

fn pod(name: &str, annotations: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    .to_string()
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

async fn webhooks(backend: Backend) {
    let s = TestServer::start(backend).await;
    let http = Http::new(&s.url);
    let (port, ca) = webhook_server().await;
    let url = |path: &str| json!({"url": format!("https://127.0.0.1:{port}{path}")});
    // The namespace selector matches the label Kubernetes gives every namespace.
    let m = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "label"}, "webhooks": [hook("label.example.com", url("/mutate"), &ca, "Fail")]});
    assert_eq!(
        http.post(MUTATING, "application/json", &m.to_string())
            .await
            .0,
        201
    );
    let v = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deny"}, "webhooks": [hook("deny.example.com", url("/validate"), &ca, "Fail")]});
    assert_eq!(
        http.post(VALIDATING, "application/json", &v.to_string())
            .await
            .0,
        201
    );

    // The mutating webhook labels every new pod (once the server follows the configuration).
    let mut n = 0;
    let labelled = eventually(10, "the mutating webhook labels pods", || {
        n += 1;
        let name = format!("p{n}");
        let http = &http;
        async move {
            let (code, p) = http
                .post(PODS, "application/json", &pod(&name, json!({})))
                .await;
            assert_eq!(code, 201, "{p}");
            (p["metadata"]["labels"]["mutated"] == "yes").then_some(p)
        }
    })
    .await;
    assert_eq!(labelled["metadata"]["labels"]["mutated"], "yes");

    // The validating webhook denies, with its message passed through, and nothing is stored.
    let denied = http
        .post(
            PODS,
            "application/json",
            &pod("denied", json!({"deny": "yes"})),
        )
        .await;
    assert_status(&denied, 403, "Forbidden");
    assert_eq!(denied.1["message"], "admission webhook \"deny.example.com\" denied the request: pods annotated deny=yes are refused");
    let k = Kubectl::new(&s.url);
    let f = k.write("denied.yaml", &pod("denied", json!({"deny": "yes"})));
    let (ok, _, err) = k.run(&["create", "-f", &f]).await;
    assert!(!ok && err.contains("admission webhook \"deny.example.com\" denied the request: pods annotated deny=yes are refused"), "{err}");
    assert_eq!(http.get(&format!("{PODS}/denied")).await.0, 404);

    // A webhook that cannot be reached: Fail refuses the write, Ignore lets it through.
    let closed = free_port();
    let down = |policy: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "down"}, "webhooks": [hook("down.example.com", json!({"url": format!("https://127.0.0.1:{closed}/x")}), &ca, policy)]})
    };
    assert_eq!(
        http.post(VALIDATING, "application/json", &down("Fail").to_string())
            .await
            .0,
        201
    );
    // Until the server follows the new configuration a create may pass: each try has its own name.
    let mut tries = 0;
    let failed = eventually(10, "a Fail webhook that is down refuses", || {
        tries += 1;
        let name = format!("while-down-{tries}");
        let http = &http;
        async move {
            let r = http
                .post(PODS, "application/json", &pod(&name, json!({})))
                .await;
            (r.0 != 201).then_some(r)
        }
    })
    .await;
    assert_status(&failed, 500, "InternalError");
    assert!(failed.1["message"].as_str().unwrap().starts_with("Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post"), "{}", failed.1);
    let (code, _) = http
        .call(
            reqwest::Method::PUT,
            &format!("{VALIDATING}/down"),
            "application/json",
            &down("Ignore").to_string(),
        )
        .await;
    assert_eq!(code, 200);
    let mut tries = 0;
    minik8s_testkit::until(10, "an Ignore webhook that is down is skipped", || {
        tries += 1;
        let name = format!("ignored-{tries}");
        let http = &http;
        async move {
            let r = http
                .post(PODS, "application/json", &pod(&name, json!({})))
                .await;
            if r.0 == 201 {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
    })
    .await;

    // A webhook reached through a Service: its Endpoints lead to the server.
    common::loopback_service(&http, "hook", port).await;
    let mut via_service = hook(
        "svc.example.com",
        json!({"service": {"namespace": "default", "name": "hook", "path": "/validate"}}),
        &ca,
        "Fail",
    );
    via_service["rules"][0]["resources"] = json!(["configmaps"]);
    let cfg = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "svc"}, "webhooks": [via_service]});
    assert_eq!(
        http.post(VALIDATING, "application/json", &cfg.to_string())
            .await
            .0,
        201
    );
    let cm = |name: &str, deny: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": {"deny": deny}}})
        .to_string()
    };
    let denied = eventually(10, "the Service-backed webhook answers", || async {
        let r = http
            .post(
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                &cm("cm-denied", "yes"),
            )
            .await;
        (r.0 == 403).then_some(r)
    })
    .await;
    assert!(
        denied.1["message"]
            .as_str()
            .unwrap()
            .contains("svc.example.com"),
        "{}",
        denied.1
    );
    assert_eq!(
        http.post(
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            &cm("cm-ok", "no")
        )
        .await
        .0,
        201
    );

    let (_, listed) = http.get(MUTATING).await;
    assert_eq!(
        listed["items"][0]["webhooks"][0]["matchPolicy"], "Equivalent",
        "defaulted"
    );
    let bad = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"}, "webhooks": [{"name": "bad", "clientConfig": {}, "sideEffects": "Some", "admissionReviewVersions": ["v1"]}]});
    assert_status(
        &http
            .post(VALIDATING, "application/json", &bad.to_string())
            .await,
        422,
        "Invalid",
    );
}

async fn policies(backend: Backend) {
    let s = TestServer::start(backend).await;
    let http = Http::new(&s.url);
    let group = "/apis/admissionregistration.k8s.io/v1";
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "replica-limit"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"},
                {"expression": "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
                 "messageExpression": "'label forbidden is not allowed on ' + object.metadata.name", "reason": "Forbidden"}]}});
    assert_eq!(
        http.post(
            &format!("{group}/validatingadmissionpolicies"),
            "application/json",
            &policy.to_string()
        )
        .await
        .0,
        201
    );
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "replica-limit-binding"}, "spec": {"policyName": "replica-limit", "validationActions": ["Deny"]}});
    assert_eq!(
        http.post(
            &format!("{group}/validatingadmissionpolicybindings"),
            "application/json",
            &binding.to_string()
        )
        .await
        .0,
        201
    );
    let deploy = |name: &str, replicas: i64, labels: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}).to_string()
    };
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let denied = eventually(10, "the policy denies", || async {
        let r = http
            .post(
                deployments,
                "application/json",
                &deploy("nginx", 7, json!({})),
            )
            .await;
        (r.0 == 422).then_some(r)
    })
    .await;
    assert_status(&denied, 422, "Invalid");
    assert_eq!(denied.1["message"], "The deployments.apps \"nginx\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: failed expression: object.spec.replicas <= 5");
    let forbidden = http
        .post(
            deployments,
            "application/json",
            &deploy("labelled", 1, json!({"forbidden": "x"})),
        )
        .await;
    assert_status(&forbidden, 403, "Forbidden");
    assert!(
        forbidden.1["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: label forbidden is not allowed on labelled"),
        "{}",
        forbidden.1
    );
    assert_eq!(
        http.post(
            deployments,
            "application/json",
            &deploy("small", 3, json!({}))
        )
        .await
        .0,
        201
    );

    // A Warn binding: the write goes through with a warning.
    let (code, _) = http
        .call(
            reqwest::Method::PATCH,
            &format!("{group}/validatingadmissionpolicybindings/replica-limit-binding"),
            "application/merge-patch+json",
            r#"{"spec":{"validationActions":["Warn"]}}"#,
        )
        .await;
    assert_eq!(code, 200);
    let k = Kubectl::new(&s.url);
    let f = k.write("big.yaml", &deploy("big", 9, json!({})));
    eventually(10, "the Warn binding warns", || {
        let (k, f) = (&k, &f);
        async move {
            let (ok, _, err) = k.run(&["apply", "-f", f]).await;
            (ok && err.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding': failed expression: object.spec.replicas <= 5")).then_some(())
        }
    })
    .await;
    let bad = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "bad"}, "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]}, "validations": [{"expression": "object.spec.replicas <="}]}});
    let refused = http
        .post(
            &format!("{group}/validatingadmissionpolicies"),
            "application/json",
            &bad.to_string(),
        )
        .await;
    assert_status(&refused, 422, "Invalid");
    assert_eq!(
        refused.1["details"]["causes"][0]["field"],
        "spec.validations[0].expression"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_mutate_deny_and_fail_as_configured() {
    webhooks(Backend::Embedded).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_policies_deny_and_warn() {
    policies(Backend::Embedded).await
}

/// A webhook whose serving certificate is self-signed with `CA:TRUE` (what
/// kopf and many development setups make) and is itself the caBundle is
/// trusted, as Go's TLS trusts it; a caBundle that does not match still
/// fails, with the TLS reason in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_ca_serving_certificate_in_the_bundle_is_trusted() {
    let s = TestServer::start(Backend::Embedded).await;
    let http = Http::new(&s.url);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap())];
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let config =
        minik8s_pki::serve::server_config(&cert.pem(), &key.serialize_pem(), &cert.pem()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = axum::Router::new().route(
        "/validate",
        post(|Json(review): Json<Value>| async move {
            let deny = review["request"]["object"]["metadata"]["annotations"]["deny"] == "yes";
            answer(&review, !deny, None, "refused by the self-signed webhook")
        }),
    );
    tokio::spawn(minik8s_pki::serve::serve(
        listener,
        std::sync::Arc::new(config),
        router,
        std::future::pending(),
    ));
    let bundle = base64::engine::general_purpose::STANDARD.encode(cert.pem());
    let url = json!({"url": format!("https://127.0.0.1:{port}/validate")});
    let v = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "self-signed"}, "webhooks": [hook("self.example.com", url.clone(), &bundle, "Fail")]});
    assert_eq!(
        http.post(VALIDATING, "application/json", &v.to_string())
            .await
            .0,
        201
    );
    // Denied by the webhook: it was reached over TLS.
    let denied = eventually(10, "the webhook is followed and answers", || {
        let http = &http;
        async move {
            let got = http
                .post(PODS, "application/json", &pod("d", json!({"deny": "yes"})))
                .await;
            (got.0 == 403).then_some(got)
        }
    })
    .await;
    assert!(
        denied.1["message"]
            .as_str()
            .unwrap()
            .contains("refused by the self-signed webhook"),
        "{}",
        denied.1
    );
    let (code, body) = http
        .post(PODS, "application/json", &pod("allowed", json!({})))
        .await;
    assert_eq!(code, 201, "{body}");

    // Another certificate in the bundle: refused, saying why.
    let other = minik8s_pki::Ca::generate("other").unwrap();
    let wrong = json!({"webhooks": [hook("self.example.com", url,
            &base64::engine::general_purpose::STANDARD.encode(&other.cert_pem), "Fail")]});
    let (code, body) = http
        .call(
            reqwest::Method::PATCH,
            &format!("{VALIDATING}/self-signed"),
            "application/merge-patch+json",
            &wrong.to_string(),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let failed = eventually(10, "the new bundle is used", || {
        let http = &http;
        async move {
            let got = http
                .post(PODS, "application/json", &pod("x", json!({})))
                .await;
            (got.0 == 500).then_some(got)
        }
    })
    .await;
    let message = failed.1["message"].as_str().unwrap();
    assert!(
        message.contains("failed calling webhook \"self.example.com\"")
            && message.contains("certificate"),
        "{message}"
    );
}

const LABEL_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: team-label
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  matchConditions:
  - name: not-opted-out
    expression: "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"team": "platform"}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: team-label
spec:
  policyName: team-label
"#;

const PARAM_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: owner-annotation
spec:
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["secrets"]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations",
                   value: {"example.com/owner": params.data.owner}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: owner-annotation
spec:
  policyName: owner-annotation
  paramRef:
    name: owners
    namespace: default
    parameterNotFoundAction: Deny
"#;

/// MutatingAdmissionPolicies through the real kubectl: one that labels
/// ConfigMaps (an apply configuration), one that annotates Secrets from a
/// param resource (a JSON patch), and what happens when its param is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_admission_policies_through_kubectl() {
    let s = TestServer::start(Backend::Embedded).await;
    let k = Kubectl::new(&s.url);
    k.ok(&["apply", "-f", &k.write("label.yaml", LABEL_POLICY)])
        .await;
    let listed = k.ok(&["get", "mutatingadmissionpolicies"]).await;
    assert!(
        listed.contains("MUTATIONS") && listed.contains("team-label"),
        "{listed}"
    );
    let mut n = 0;
    eventually(10, "the policy labels new ConfigMaps", || {
        n += 1;
        let name = format!("cm{n}");
        let k = &k;
        async move {
            k.ok(&["create", "configmap", &name, "--from-literal=a=b"])
                .await;
            let team = k
                .ok(&[
                    "get",
                    "configmap",
                    &name,
                    "-o",
                    "jsonpath={.metadata.labels.team}",
                ])
                .await;
            (team == "platform").then_some(())
        }
    })
    .await;
    // Its match condition leaves opted-out objects alone.
    let opted_out = k.write(
        "skip.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped, labels: {skip: \"yes\"}}\n",
    );
    k.ok(&["create", "-f", &opted_out]).await;
    let labels = k
        .ok(&[
            "get",
            "configmap",
            "skipped",
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .await;
    assert_eq!(labels, r#"{"skip":"yes"}"#);

    // With a param: the param's data lands in the mutation.
    k.ok(&["apply", "-f", &k.write("param.yaml", PARAM_POLICY)])
        .await;
    let mut n = 0;
    let refused = eventually(10, "the param policy is followed", || {
        n += 1;
        let name = format!("s{n}");
        let k = &k;
        async move {
            let (ok, _, err) = k
                .run(&["create", "secret", "generic", &name, "--from-literal=k=v"])
                .await;
            (!ok).then_some(err)
        }
    })
    .await;
    assert!(
        refused.contains("MutatingAdmissionPolicy 'owner-annotation' with binding 'owner-annotation' denied request"),
        "{refused}"
    );
    k.ok(&[
        "create",
        "configmap",
        "owners",
        "--from-literal=owner=alice",
    ])
    .await;
    k.ok(&[
        "create",
        "secret",
        "generic",
        "annotated",
        "--from-literal=k=v",
    ])
    .await;
    let owner = k
        .ok(&[
            "get",
            "secret",
            "annotated",
            "-o",
            "jsonpath={.metadata.annotations.example\\.com/owner}",
        ])
        .await;
    assert_eq!(owner, "alice");
}
