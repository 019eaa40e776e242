//! Serverless functions (`serverless.minik8s.io/v1alpha1`, built in): a
//! Function is source code plus scaling bounds; the function controller makes
//! it a Deployment and a Service, the serverless gateway calls it over HTTP
//! and scales it from and to zero (Knative's autoscaler is the model).
//!
//! ```text
//!   Function hello ──controller──▶ ConfigMap hello-fn-source (the code)
//!     spec.source                  Deployment hello-fn (runtime image, replicas by the gateway)
//!     spec.scale                   Service hello-fn ──▶ pods (ready endpoints)
//!   caller ─▶ gateway /function/<ns>/hello ─▶ a ready pod (held while 0 → 1)
//! ```

pub mod triggers;

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const GROUP: &str = "serverless.minik8s.io";
pub const API_VERSION: &str = "serverless.minik8s.io/v1alpha1";
/// The label on everything made for a function (its name).
pub const FUNCTION_LABEL: &str = "serverless.minik8s.io/function";
/// The image scripts/images.sh builds: Debian's python3 plus the runtime server.
pub const RUNTIME_IMAGE: &str = "minik8s/function-runtime:latest";
/// The runtime server's port in the pod.
pub const RUNTIME_PORT: i32 = 8080;
pub const RUNTIMES: &[&str] = &["python", "shell"];

fn default_api_version() -> String {
    API_VERSION.to_string()
}
fn default_kind() -> String {
    "Function".to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Function {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: FunctionSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<FunctionStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionSpec {
    /// `python` (a `def handler(event)`) or `shell` (the event on stdin and in $EVENT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The code, inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Or the code from a ConfigMap key (e.g. made by `kubectl create configmap --from-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_from: Option<SourceFrom>,
    /// The Python function called (default `handler`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// Default: [`RUNTIME_IMAGE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// How long one call may run (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Calls made without an HTTP caller: a schedule, changes of API objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<Vec<triggers::Trigger>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFrom {
    pub config_map_key_ref: ConfigMapKey,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    pub name: String,
    pub key: String,
}

/// Scaling bounds and targets (Knative's autoscaling annotations as fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    /// Instances kept when idle (default 0: scale to zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_scale: Option<i32>,
    /// Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_scale: Option<i32>,
    /// Calls in flight per instance the autoscaler aims at (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_concurrency: Option<i32>,
    /// Averaging window of the autoscaler (default "60s"; the panic window is a tenth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_window: Option<String>,
    /// With no call for this long, scale to minScale (default "60s").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_window: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Where the gateway serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Instances the autoscaler asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_instances: Option<i32>,
    /// Instances ready for calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_instances: Option<i32>,
    /// SourceReady (the code parses), Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

namespaced_resource!(
    Function,
    API_VERSION,
    GROUP,
    "v1alpha1",
    "Function",
    "functions"
);

/// The effective scaling settings of a function, defaults applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaling {
    pub min: u32,
    pub max: u32,
    pub target: f64,
    pub stable_window: std::time::Duration,
    pub idle_window: std::time::Duration,
}

impl Function {
    pub fn runtime(&self) -> &str {
        self.spec.runtime.as_deref().unwrap_or("python")
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.spec.timeout_seconds.unwrap_or(30).max(1) as u64)
    }

    pub fn scaling(&self) -> Scaling {
        let s = self.spec.scale.clone().unwrap_or_default();
        let window = |w: &Option<String>| {
            w.as_deref()
                .and_then(|w| crate::meta::parse_duration(w).ok())
                .unwrap_or(std::time::Duration::from_secs(60))
        };
        let min = s.min_scale.unwrap_or(0).max(0) as u32;
        Scaling {
            min,
            max: (s.max_scale.unwrap_or(10).max(1) as u32).max(min),
            target: s.target_concurrency.unwrap_or(10).max(1) as f64,
            stable_window: window(&s.stable_window),
            idle_window: window(&s.idle_window),
        }
    }

    /// The name of the Deployment, Service and source ConfigMap made for it.
    pub fn child_name(name: &str) -> String {
        format!("{name}-fn")
    }
}

/// Fills the defaults in a stored Function.
pub fn default(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("runtime").or_insert(json!("python"));
    if spec["runtime"] == "python" {
        spec.entry("handler").or_insert(json!("handler"));
    }
    spec.entry("timeoutSeconds").or_insert(json!(30));
    let scale = spec.entry("scale").or_insert(json!({}));
    if let Some(scale) = scale.as_object_mut() {
        scale.entry("minScale").or_insert(json!(0));
        scale.entry("maxScale").or_insert(json!(10));
        scale.entry("targetConcurrency").or_insert(json!(10));
        scale.entry("stableWindow").or_insert(json!("60s"));
        scale.entry("idleWindow").or_insert(json!("60s"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_effective_scaling() {
        let mut obj = json!({"spec": {"source": "def handler(event):\n  return event\n"}});
        default(&mut obj);
        assert_eq!(obj["spec"]["runtime"], "python");
        assert_eq!(obj["spec"]["handler"], "handler");
        assert_eq!(obj["spec"]["scale"]["idleWindow"], "60s");
        let f: Function = serde_json::from_value(obj).unwrap();
        let s = f.scaling();
        assert_eq!((s.min, s.max, s.target), (0, 10, 10.0));
        assert_eq!(s.idle_window, std::time::Duration::from_secs(60));
        let mut shell = json!({"spec": {"runtime": "shell", "source": "cat"}});
        default(&mut shell);
        assert!(shell["spec"].get("handler").is_none());
    }
}
