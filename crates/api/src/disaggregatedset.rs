//! DisaggregatedSet and DisaggregatedSetRoleScaler
//! (`disaggregatedset.x-k8s.io/v1`, upstream kubernetes-sigs/lws): several
//! LeaderWorkerSet *roles* (e.g. prefill and decode servers of one LLM)
//! deployed, scaled and rolled together. The JSON is upstream's; defaults
//! are its CRD's, validation (`minik8s_validation::disaggregatedset`) its webhook's.
//!
//! ```text
//!   DisaggregatedSet D (slices 2, roles prefill, decode)
//!     ├── LeaderWorkerSet D-0-<rev>-prefill   D-0-<rev>-decode   (slice 0)
//!     ├── LeaderWorkerSet D-1-<rev>-prefill   D-1-<rev>-decode   (slice 1)
//!     ├── Service D-<s>-<rev>-<role>-prv (headless, once every role has a ready group)
//!     └── DisaggregatedSetRoleScaler D-<role> (External roles only; /scale for an HPA)
//! ```

use crate::hash::{canonical_json, sha1_hex};
use crate::lws::LeaderWorkerSetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

pub const GROUP: &str = "disaggregatedset.x-k8s.io";
pub const API_VERSION: &str = "disaggregatedset.x-k8s.io/v1";
pub const KIND: &str = "DisaggregatedSet";
pub const SCALER_KIND: &str = "DisaggregatedSetRoleScaler";

/// Labels every child carries.
pub const NAME_LABEL: &str = "disaggregatedset.x-k8s.io/name";
pub const ROLE_LABEL: &str = "disaggregatedset.x-k8s.io/role";
pub const SLICE_LABEL: &str = "disaggregatedset.x-k8s.io/slice";
pub const REVISION_LABEL: &str = "disaggregatedset.x-k8s.io/revision";
/// On an old LWS during a rollout: its replicas when the rollout began.
pub const INITIAL_REPLICAS: &str = "disaggregatedset.x-k8s.io/initial-replicas";

pub const MODE_STATIC: &str = "Static";
pub const MODE_EXTERNAL: &str = "External";

fn default_api_version() -> String {
    API_VERSION.to_string()
}
fn default_kind() -> String {
    KIND.to_string()
}
fn default_scaler_kind() -> String {
    SCALER_KIND.to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedSet {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DisaggregatedSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DisaggregatedSetStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedSetSpec {
    #[serde(default)]
    pub roles: Vec<DisaggregatedRoleSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_policy: Option<PlacementPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedRoleSpec {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<RoleScaling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<LeaderWorkerSetSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleScaling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPolicy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_statuses: Vec<RoleStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_replicas: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedSetRoleScaler {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_scaler_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RoleScalerSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RoleScalerStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleScalerSpec {
    #[serde(default)]
    pub replicas: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleScalerStatus {
    #[serde(default)]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

namespaced_resource!(
    DisaggregatedSet,
    API_VERSION,
    GROUP,
    "v1",
    "DisaggregatedSet",
    "disaggregatedsets"
);
namespaced_resource!(
    DisaggregatedSetRoleScaler,
    API_VERSION,
    GROUP,
    "v1",
    "DisaggregatedSetRoleScaler",
    "disaggregatedsetrolescalers"
);

impl DisaggregatedRoleSpec {
    /// Whether an external scaler (the role's DisaggregatedSetRoleScaler)
    /// sets this role's replicas.
    pub fn is_external(&self) -> bool {
        self.scaling.as_ref().and_then(|s| s.mode.as_deref()) == Some(MODE_EXTERNAL)
    }
}

impl DisaggregatedSet {
    /// The number of slices (copies of the whole topology).
    pub fn slices(&self) -> i32 {
        self.spec.slices.unwrap_or(1)
    }
}

/// The revision of the roles' templates, 8 hex characters over the
/// names, leaderWorkerTemplates (and a Hash group identity) in spec order (upstream hashes with
/// SHA-256, we with SHA-1: the reference allows any stable digest).
pub fn revision(spec: &DisaggregatedSetSpec) -> String {
    let items: Vec<Value> = spec
        .roles
        .iter()
        .map(|r| {
            let template = r
                .spec
                .as_ref()
                .map(|s| serde_json::to_value(&s.leader_worker_template).unwrap_or(Value::Null))
                .unwrap_or(Value::Null);
            let mut item = json!({"name": r.name, "template": template});
            // Only Hash enters the digest: an empty identity and the CRD
            // default Ordinal hash alike, so defaulting rolls nothing.
            if r.spec.as_ref().is_some_and(|s| s.is_hash()) {
                item["groupIdentity"] = json!(crate::lws::HASH);
            }
            item
        })
        .collect();
    sha1_hex(&canonical_json(&Value::Array(items)))[..8].to_string()
}

/// The scaler of an External role: `<ds>-<role>`.
pub fn scaler_name(ds: &str, role: &str) -> String {
    format!("{ds}-{role}")
}

/// The selector a role's scaler publishes: its leader pods, any revision.
pub fn scaler_selector(ds: &str, role: &str) -> String {
    format!(
        "{NAME_LABEL}={ds},{ROLE_LABEL}={role},{}=0",
        crate::lws_pod::WORKER_INDEX
    )
}

// ---------------------------------------------------------------- defaulting

fn object<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn set_default(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

/// The LeaderWorkerSet CRD's own schema defaults, which an embedded role
/// spec gets (not the LWS webhook's: that runs when the child is created).
pub fn default_lws_spec_schema(spec: &mut Map<String, Value>) {
    set_default(spec, "replicas", json!(1));
    set_default(spec, "groupIdentity", json!(crate::lws::ORDINAL));
    set_default(spec, "startupPolicy", json!("LeaderCreated"));
    if let Some(t) = object(spec, "leaderWorkerTemplate") {
        set_default(t, "size", json!(1));
        if let Some(sg) = object(t, "subGroupPolicy") {
            set_default(sg, "subGroupPolicyType", json!("LeaderWorker"));
        }
    }
    if let Some(ru) =
        object(spec, "rolloutStrategy").and_then(|rs| object(rs, "rollingUpdateConfiguration"))
    {
        set_default(ru, "partition", json!(0));
        set_default(ru, "maxUnavailable", json!(1));
        set_default(ru, "maxSurge", json!(0));
    }
}

/// The DisaggregatedSet CRD's defaults: `slices` 1, `scaling.mode`
/// Static, `placementPolicy.type` None, and each role spec the LWS schema's.
pub fn default(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "slices", json!(1));
    if let Some(p) = object(spec, "placementPolicy") {
        set_default(p, "type", json!("None"));
    }
    if let Some(roles) = spec.get_mut("roles").and_then(Value::as_array_mut) {
        for role in roles.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(s) = object(role, "scaling") {
                set_default(s, "mode", json!(MODE_STATIC));
            }
            if let Some(s) = object(role, "spec") {
                default_lws_spec_schema(s);
            }
        }
    }
}

/// The role scaler's CRD defaults: `spec.replicas` is always there (0), so
/// GET /scale answers before anything wrote it.
pub fn default_scaler(obj: &mut Value) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    if let Some(spec) = obj["spec"].as_object_mut() {
        set_default(spec, "replicas", json!(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_crds() {
        let mut o = json!({"spec": {"roles": [
            {"name": "a", "scaling": {}, "spec": {"leaderWorkerTemplate": {"workerTemplate": {}},
                "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 1}}}},
            {"name": "b"}], "placementPolicy": {"topology": "zone"}}});
        default(&mut o);
        assert_eq!(o["spec"]["slices"], 1);
        assert_eq!(o["spec"]["placementPolicy"]["type"], "None");
        let a = &o["spec"]["roles"][0];
        assert_eq!(a["scaling"]["mode"], "Static");
        assert_eq!(a["spec"]["replicas"], 1);
        assert_eq!(a["spec"]["leaderWorkerTemplate"]["size"], 1);
        assert_eq!(
            a["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"],
            json!({"maxSurge": 1, "maxUnavailable": 1, "partition": 0})
        );
        assert!(o["spec"]["roles"][1].get("spec").is_none());
        let mut s = json!({"metadata": {"name": "x"}});
        default_scaler(&mut s);
        assert_eq!(s["spec"]["replicas"], 0);
    }

    #[test]
    fn revision_follows_templates_and_role_names_only() {
        let ds = |names: &[&str], size: i32, replicas: i32| -> DisaggregatedSetSpec {
            serde_json::from_value(json!({"roles": names.iter().map(|n| json!({"name": n,
                "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {}}}})).collect::<Vec<_>>()}))
            .unwrap()
        };
        let r = revision(&ds(&["p", "d"], 1, 1));
        assert_eq!(r.len(), 8);
        assert!(r
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_uppercase()));
        assert_eq!(r, revision(&ds(&["p", "d"], 1, 5)), "replicas roll nothing");
        assert_ne!(r, revision(&ds(&["p", "d"], 2, 1)), "size rolls");
        assert_ne!(r, revision(&ds(&["d", "p"], 1, 1)), "order rolls");
        assert_ne!(r, revision(&ds(&["p", "e"], 1, 1)), "renames roll");
        let with_identity = |identity: &str| {
            let mut spec = ds(&["p", "d"], 1, 1);
            for role in &mut spec.roles {
                if let Some(s) = role.spec.as_mut() {
                    s.group_identity = Some(identity.into());
                }
            }
            revision(&spec)
        };
        assert_eq!(
            r,
            with_identity("Ordinal"),
            "the default identity rolls nothing"
        );
        assert_eq!(r, with_identity(""), "empty is Ordinal");
        assert_ne!(r, with_identity("Hash"), "Ordinal to Hash rolls");
    }

    #[test]
    fn scaler_names_and_selector() {
        assert_eq!(scaler_name("ds", "decode"), "ds-decode");
        assert_eq!(
            scaler_selector("ds", "decode"),
            "disaggregatedset.x-k8s.io/name=ds,disaggregatedset.x-k8s.io/role=decode,leaderworkerset.sigs.k8s.io/worker-index=0"
        );
    }
}
