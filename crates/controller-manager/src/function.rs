//! The function controller: a serverless Function becomes a Deployment of its
//! runtime and a Service in front of it. The serverless gateway, not this
//! controller, sets the Deployment's replicas (from and to zero); this
//! controller only keeps them within [minScale, maxScale].
//!
//! ```text
//!   Function hello ─▶ reconcile ─▶ check the source (python3 ast / sh -n)  ─▶ SourceReady
//!                              ─▶ ConfigMap hello-fn-source  (inline source)
//!                              ─▶ Deployment hello-fn        (runtime image, /function/source)
//!                              ─▶ Service hello-fn :80       (the gateway reads its endpoints)
//!                              ─▶ status: url, desired/ready instances, Ready
//! ```
//!
//! [`children`] and [`status`] are pure (desired state from observed state).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use minik8s_api::registry;
use minik8s_api::serverless::{self as fns, Function, FUNCTION_LABEL, RUNTIME_PORT};
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::rest::content;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The template annotation that changes with the source, so an edit rolls out.
pub const SOURCE_HASH: &str = "serverless.minik8s.io/source-hash";
/// The Deployment annotation with a hash of what this controller wants of
/// it (template and strategy): equal means nothing to write.
pub const TEMPLATE_HASH: &str = "serverless.minik8s.io/template-hash";

pub struct FunctionController {
    client: Client,
    functions: Cache<Function>,
    deployments: Cache<Deployment>,
    configmaps: Cache<ConfigMap>,
    services: Cache<Service>,
    /// Where the gateway serves functions (status.url is this + /function/NS/NAME).
    gateway_url: String,
    /// Source hash → the check's verdict, so a source is parsed once.
    checked: Mutex<HashMap<String, Result<(), String>>>,
}

/// The code of `f`, or why it cannot be read.
pub fn source_of(f: &Function, configmaps: &Cache<ConfigMap>) -> Result<String, (String, String)> {
    if let Some(s) = &f.spec.source {
        return Ok(s.clone());
    }
    let r = f
        .spec
        .source_from
        .as_ref()
        .map(|s| s.config_map_key_ref.clone())
        .unwrap_or_default();
    let ns = crate::ns_of(&f.metadata);
    let cm = configmaps.get(&format!("{ns}/{}", r.name)).ok_or_else(|| {
        (
            "ConfigMapNotFound".to_string(),
            format!("configmap \"{}\" not found", r.name),
        )
    })?;
    cm.data
        .as_ref()
        .and_then(|d| d.get(&r.key))
        .cloned()
        .ok_or_else(|| {
            (
                "KeyNotFound".to_string(),
                format!("configmap \"{}\" has no key \"{}\"", r.name, r.key),
            )
        })
}

/// Parses the source as the runtime would (Python's own parser, `sh -n`):
/// Err is the parser's message, e.g. "line 2: '(' was never closed".
pub async fn check_source(runtime: &str, source: &str) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = match runtime {
        "shell" => {
            let mut c = tokio::process::Command::new("sh");
            c.arg("-n");
            c
        }
        _ => {
            let mut c = tokio::process::Command::new("python3");
            c.args(["-c", "import ast, sys\ntry:\n    ast.parse(sys.stdin.read(), 'source')\nexcept SyntaxError as e:\n    sys.exit(f'line {e.lineno}: {e.msg}')"]);
            c
        }
    };
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run the {runtime} parser: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(source.as_bytes()).await;
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .map_err(|_| "the syntax check timed out".to_string())?
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&out.stderr);
        let text = text.trim().trim_start_matches("sh: ");
        // dash says "3: Syntax error: ..."; say it as Python's check does.
        match text.split_once(": ") {
            Some((n, rest)) if n.parse::<u32>().is_ok() => Err(format!("line {n}: {rest}")),
            _ => Err(text.to_string()),
        }
    }
}

/// The ConfigMap (inline source only), Deployment and Service of `f`.
pub fn children(f: &Function, source: &str) -> (Option<Value>, Value, Value) {
    let name = f.metadata.name.clone().unwrap_or_default();
    let ns = crate::ns_of(&f.metadata);
    let child = Function::child_name(&name);
    let owner = json!([{"apiVersion": fns::API_VERSION, "kind": "Function", "name": name,
        "uid": f.metadata.uid, "controller": true, "blockOwnerDeletion": true}]);
    let labels = json!({ FUNCTION_LABEL: name });
    let meta =
        |n: &str| json!({"name": n, "namespace": ns, "labels": labels, "ownerReferences": owner});
    let source_cm = format!("{child}-source");
    let (configmap, volume) = match &f.spec.source_from {
        Some(from) => (
            None,
            json!({"name": "source", "configMap": {"name": from.config_map_key_ref.name,
                "items": [{"key": from.config_map_key_ref.key, "path": "source"}]}}),
        ),
        None => (
            Some(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(&source_cm),
                "data": {"source": source}}),
            ),
            json!({"name": "source", "configMap": {"name": source_cm}}),
        ),
    };
    let mut env = vec![
        json!({"name": "FUNCTION_RUNTIME", "value": f.runtime()}),
        json!({"name": "FUNCTION_SOURCE", "value": "/function/source"}),
        json!({"name": "FUNCTION_HANDLER", "value": f.spec.handler.as_deref().unwrap_or("handler")}),
        json!({"name": "FUNCTION_TIMEOUT", "value": f.timeout().as_secs().to_string()}),
    ];
    env.extend(f.spec.env.iter().flatten().map(|e| json!(e)));
    let mut container = json!({"name": "function",
        "image": f.spec.image.as_deref().unwrap_or(fns::RUNTIME_IMAGE),
        "imagePullPolicy": "IfNotPresent",
        "env": env,
        "ports": [{"name": "http", "containerPort": RUNTIME_PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": RUNTIME_PORT},
            "periodSeconds": 1, "failureThreshold": 1},
        "volumeMounts": [{"name": "source", "mountPath": "/function", "readOnly": true}]});
    if let Some(r) = &f.spec.resources {
        container["resources"] = json!(r);
    }
    let hash = minik8s_api::hash::safe_encode(minik8s_api::hash::fnv32a(source.as_bytes()));
    let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(&child),
        "spec": {"replicas": f.scaling().min,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": labels, "annotations": {SOURCE_HASH: hash}},
                "spec": {"containers": [container], "volumes": [volume],
                    "terminationGracePeriodSeconds": f.timeout().as_secs() + 5}}}});
    let wanted = json!([
        deployment["spec"]["template"],
        deployment["spec"]["strategy"]
    ]);
    let template_hash = minik8s_api::hash::revision_hash(&wanted);
    deployment["metadata"]["annotations"] = json!({ TEMPLATE_HASH: template_hash });
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(&child),
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}});
    (configmap, deployment, service)
}

/// The Function's status from its Deployment and the source check.
pub fn status(
    f: &Function,
    url: &str,
    deployment: Option<&Deployment>,
    source: &Result<(), (String, String)>,
) -> Value {
    let desired = deployment.and_then(|d| d.spec.replicas).unwrap_or(0);
    let ready = deployment
        .and_then(|d| d.status.as_ref()?.ready_replicas)
        .unwrap_or(0);
    let min = f.scaling().min as i32;
    let (source_ok, reason, message) = match source {
        Ok(()) => (true, "Parsed".to_string(), String::new()),
        Err((reason, message)) => (false, reason.clone(), message.clone()),
    };
    let (ready_ok, ready_reason, ready_message) = if !source_ok {
        (false, reason.clone(), message.clone())
    } else if deployment.is_none() {
        (
            false,
            "Deploying".into(),
            "the Deployment is being created".into(),
        )
    } else if ready < min {
        (
            false,
            "MinScaleNotReady".into(),
            format!("{ready} of minScale {min} instances ready"),
        )
    } else {
        (true, "Ready".into(), String::new())
    };
    let old: Vec<Value> = f
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .iter()
        .map(|c| json!(c))
        .collect();
    let condition = |type_: &str, ok: bool, reason: &str, message: &str| {
        let status = if ok { "True" } else { "False" };
        let prev = old.iter().find(|c| c["type"] == type_);
        let since = match prev {
            Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
            _ => json!(chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        };
        json!({"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": f.metadata.generation})
    };
    json!({"observedGeneration": f.metadata.generation, "url": url,
        "desiredInstances": desired, "readyInstances": ready,
        "conditions": [condition("SourceReady", source_ok, &reason, &message),
                       condition("Ready", ready_ok, &ready_reason, &ready_message)]})
}

impl FunctionController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        gateway_url: String,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let functions: Cache<Function> = informers.cache();
        let ctl = Arc::new(FunctionController {
            client,
            functions: functions.clone(),
            deployments: informers.cache(),
            configmaps: informers.cache(),
            services: informers.cache(),
            gateway_url: gateway_url.trim_end_matches('/').to_string(),
            checked: Mutex::default(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Function>(informers)?
            .owns::<Deployment>(informers, "Function")?
            .owns::<Service>(informers, "Function")?
            // A ConfigMap a function takes its source from.
            .watches::<ConfigMap, _>(informers, move |_, ev| {
                let cm = ev.object();
                let ns = crate::ns_of(&cm.metadata);
                functions
                    .list()
                    .iter()
                    .filter(|f| crate::ns_of(&f.metadata) == ns)
                    .filter(|f| {
                        f.spec
                            .source_from
                            .as_ref()
                            .map(|s| &s.config_map_key_ref.name)
                            == cm.metadata.name.as_ref()
                    })
                    .map(|f| format!("{ns}/{}", f.metadata.name.as_deref().unwrap_or("")))
                    .collect()
            })
    }

    async fn checked(&self, runtime: &str, source: &str) -> Result<(), String> {
        let key = format!(
            "{runtime}:{}",
            minik8s_api::hash::safe_encode(minik8s_api::hash::fnv32a(source.as_bytes()))
        );
        if let Some(v) = crate::lock(&self.checked).get(&key) {
            return v.clone();
        }
        let verdict = check_source(runtime, source).await;
        let mut cache = crate::lock(&self.checked);
        if cache.len() > 1000 {
            cache.clear();
        }
        cache.insert(key, verdict.clone());
        verdict
    }

    /// Creates `want`, or patches the fields this controller owns.
    async fn ensure(
        &self,
        info: &'static registry::ResourceInfo,
        ns: &str,
        want: &Value,
        exists: bool,
        patch: Value,
    ) -> Result<(), ClientError> {
        let api = self.client.dynamic(info, Some(ns));
        let name = want["metadata"]["name"].as_str().unwrap_or_default();
        let result = if exists {
            api.patch(name, None, content::MERGE_PATCH, &patch).await
        } else {
            api.create(want).await
        };
        match result {
            Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl Reconciler for FunctionController {
    const NAME: &'static str = "function";

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(f) = self.functions.get(key) else {
            return Ok(Action::Done);
        };
        if f.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let ns = crate::ns_of(&f.metadata);
        let name = f.metadata.name.clone().unwrap_or_default();
        let child = Function::child_name(&name);
        let child_key = format!("{ns}/{child}");
        let source = source_of(&f, &self.configmaps);
        let verdict = match &source {
            Ok(s) => self
                .checked(f.runtime(), s)
                .await
                .map_err(|m| ("SyntaxError".to_string(), m)),
            Err(e) => Err(e.clone()),
        };
        let deployment = self.deployments.get(&child_key);
        if let (Ok(source), Ok(())) = (&source, &verdict) {
            let (cm, mut want, svc) = children(&f, source);
            if let Some(cm) = &cm {
                let exists = self
                    .configmaps
                    .get(&format!("{child_key}-source"))
                    .is_some();
                let patch = json!({"data": cm["data"]});
                self.ensure(registry::of::<ConfigMap>(), &ns, cm, exists, patch)
                    .await?;
            }
            // Replicas are the gateway's; only bring them within the bounds.
            let s = f.scaling();
            let current = deployment.as_ref().and_then(|d| d.spec.replicas);
            let replicas = current.map(|r| (r as u32).clamp(s.min, s.max));
            let mut patch = json!({"spec": {"template": want["spec"]["template"], "strategy": want["spec"]["strategy"]}});
            if let Some(r) = replicas.filter(|r| Some(*r as i32) != current) {
                patch["spec"]["replicas"] = json!(r);
            }
            if let Some(r) = replicas {
                want["spec"]["replicas"] = json!(r);
            }
            let unchanged = deployment.as_ref().is_some_and(|d| {
                d.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(TEMPLATE_HASH))
                    == want["metadata"]["annotations"][TEMPLATE_HASH]
                        .as_str()
                        .map(String::from)
                        .as_ref()
            }) && patch["spec"].get("replicas").is_none();
            patch["metadata"] = json!({"annotations": want["metadata"]["annotations"]});
            if !unchanged {
                self.ensure(
                    registry::of::<Deployment>(),
                    &ns,
                    &want,
                    deployment.is_some(),
                    patch,
                )
                .await?;
            }
            if self.services.get(&child_key).is_none() {
                self.ensure(registry::of::<Service>(), &ns, &svc, false, json!({}))
                    .await?;
            }
        }
        let url = format!("{}/function/{ns}/{name}", self.gateway_url);
        let new = status(&f, &url, deployment.as_deref(), &verdict);
        let old = json!(f.status);
        let same = old["url"] == new["url"]
            && old["desiredInstances"] == new["desiredInstances"]
            && old["readyInstances"] == new["readyInstances"]
            && old["observedGeneration"] == new["observedGeneration"]
            && (0..2).all(|i| {
                ["status", "reason", "message"]
                    .iter()
                    .all(|k| old["conditions"][i][k] == new["conditions"][i][k])
            });
        if !same {
            let api = self.client.dynamic(registry::of::<Function>(), Some(&ns));
            match api
                .patch(
                    &name,
                    Some("status"),
                    content::MERGE_PATCH,
                    &json!({"status": new}),
                )
                .await
            {
                Err(e) if e.api().is_some_and(|a| a.is_not_found()) => {}
                other => {
                    other?;
                }
            }
        }
        Ok(Action::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(spec: Value) -> Function {
        let mut obj = json!({"metadata": {"name": "hello", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": spec});
        fns::default(&mut obj);
        serde_json::from_value(obj).unwrap()
    }

    #[test]
    fn an_inline_function_gets_its_source_a_deployment_and_a_service() {
        let f = function(json!({"source": "def handler(e):\n  return e\n",
            "env": [{"name": "GREETING", "value": "hi"}], "scale": {"minScale": 1}}));
        let (cm, d, svc) = children(&f, f.spec.source.as_deref().unwrap());
        let cm = cm.expect("inline source in a ConfigMap");
        assert_eq!(cm["metadata"]["name"], "hello-fn-source");
        assert_eq!(cm["data"]["source"], "def handler(e):\n  return e\n");
        assert_eq!(d["metadata"]["name"], "hello-fn");
        assert_eq!(d["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(d["spec"]["replicas"], 1, "minScale at creation");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], fns::RUNTIME_IMAGE);
        let env: Vec<&str> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            env,
            [
                "FUNCTION_RUNTIME",
                "FUNCTION_SOURCE",
                "FUNCTION_HANDLER",
                "FUNCTION_TIMEOUT",
                "GREETING"
            ]
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"],
            "hello-fn-source"
        );
        assert_eq!(
            d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "updates never drop an instance"
        );
        assert_eq!(svc["spec"]["selector"][FUNCTION_LABEL], "hello");
        // Another source, another template: the edit rolls out.
        let (_, d2, _) = children(&f, "def handler(e):\n  return 1\n");
        assert_ne!(
            d["spec"]["template"]["metadata"]["annotations"][SOURCE_HASH],
            d2["spec"]["template"]["metadata"]["annotations"][SOURCE_HASH]
        );
        assert_ne!(
            d["metadata"]["annotations"][TEMPLATE_HASH],
            d2["metadata"]["annotations"][TEMPLATE_HASH],
            "what the controller compares before writing"
        );
    }

    #[test]
    fn a_configmap_source_is_mounted_directly() {
        let f = function(
            json!({"runtime": "shell", "sourceFrom": {"configMapKeyRef": {"name": "scripts", "key": "hello.sh"}}}),
        );
        let (cm, d, _) = children(&f, "echo hi");
        assert!(cm.is_none());
        assert_eq!(
            d["spec"]["template"]["spec"]["volumes"][0]["configMap"],
            json!({"name": "scripts", "items": [{"key": "hello.sh", "path": "source"}]})
        );
    }

    #[test]
    fn status_says_why_a_function_cannot_serve() {
        let f = function(json!({"source": "x"}));
        let bad = Err((
            "SyntaxError".to_string(),
            "line 1: invalid syntax".to_string(),
        ));
        let s = status(&f, "http://gw/function/ns/hello", None, &bad);
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][0]["reason"], "SyntaxError");
        assert_eq!(s["conditions"][0]["message"], "line 1: invalid syntax");
        assert_eq!(s["conditions"][1]["status"], "False");
        let d: Deployment = serde_json::from_value(
            json!({"spec": {"replicas": 0, "selector": {}, "template": {}}}),
        )
        .unwrap();
        let s = status(&f, "http://gw/function/ns/hello", Some(&d), &Ok(()));
        assert_eq!(
            s["conditions"][1]["status"], "True",
            "scaled to zero is still Ready"
        );
        assert_eq!(s["url"], "http://gw/function/ns/hello");
        assert_eq!(
            (s["desiredInstances"].clone(), s["readyInstances"].clone()),
            (json!(0), json!(0))
        );
    }

    #[tokio::test]
    async fn the_parsers_report_the_line() {
        assert_eq!(
            check_source("python", "def handler(e):\n  return e\n").await,
            Ok(())
        );
        let err = check_source("python", "def handler(e:\n  pass\n")
            .await
            .unwrap_err();
        assert!(err.starts_with("line 1: "), "{err}");
        assert_eq!(check_source("shell", "echo hi").await, Ok(()));
        let err = check_source("shell", "echo ok\nif then fi")
            .await
            .unwrap_err();
        assert!(
            err.starts_with("line 2: ") && err.to_lowercase().contains("syntax error"),
            "{err}"
        );
    }
}
