//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`) with the exact upstream
//! JSON; its defaults and validation (upstream's admission webhook) are the
//! apiserver's, in minik8s-validation (`crates/validation/src/lws.rs`).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const GROUP: &str = "leaderworkerset.x-k8s.io";
pub const API_VERSION: &str = "leaderworkerset.x-k8s.io/v1";
pub const KIND: &str = "LeaderWorkerSet";
/// Annotation: exclusive 1 group ↔ 1 topology domain placement.
pub const EXCLUSIVE_TOPOLOGY: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
pub const SUBGROUP_EXCLUSIVE_TOPOLOGY: &str =
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology";
/// Annotation (minik8s): opt an LWS into gang scheduling (`"true"`).
pub const GANG_SCHEDULING_ANNOTATION: &str = "minik8s.io/gang-scheduling";

/// Annotations (minik8s): the backoff between a group's recreations and
/// how many it may have (Ordinal groups: a Hash group's key is new each time).
pub const RESTART_BACKOFF: &str = "minik8s.io/group-restart-backoff";
pub const MAX_RESTARTS: &str = "minik8s.io/max-group-restarts";

/// `spec.groupIdentity`: groups `<lws>-<i>` in a leader StatefulSet (the default).
pub const ORDINAL: &str = "Ordinal";
/// `spec.groupIdentity`: groups keyed by random 40-hex keys, leaders in a Deployment.
pub const HASH: &str = "Hash";
/// `spec.groupReplacementPolicy` (Hash): a replacement group is scheduled
/// once the group it replaces is gone (the default).
pub const POST_TERMINATION: &str = "PostTermination";
/// `spec.groupReplacementPolicy` (Hash): a replacement group is scheduled at once.
pub const IMMEDIATE: &str = "Immediate";

fn default_api_version() -> String {
    API_VERSION.to_string()
}
fn default_kind() -> String {
    KIND.to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSet {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: LeaderWorkerSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LeaderWorkerSetStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub leader_worker_template: LeaderWorkerTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<NetworkConfig>,
    /// How groups are identified (upstream v0.11): `Ordinal` (`<lws>-<i>`,
    /// leaders in a StatefulSet) or `Hash` (random keys, leaders in a Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_identity: Option<String>,
    /// When a Hash group's replacement may be scheduled (upstream v0.11):
    /// `PostTermination` or `Immediate`; only with `groupIdentity: Hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_replacement_policy: Option<String>,
    /// Workload-aware gang scheduling (KEP-666, proposed upstream), see
    /// `crate::lws_scheduling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_template: Option<PodTemplateSpec>,
    #[serde(default)]
    pub worker_template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy: Option<SubGroupPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_templates: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_retention_policy: Option<Value>,
    /// minik8s, beyond upstream (kubernetes-sigs/lws#444): one
    /// ResourceClaim per group from each template, shared by the group's
    /// leader and workers (Dynamic Resource Allocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_templates: Option<Vec<GroupResourceClaim>>,
}

/// A claim every group gets (`leaderWorkerTemplate.resourceClaimTemplates`):
/// the pods' claim entry `name` (what containers name in
/// `resources.claims`), made from the ResourceClaimTemplate named.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResourceClaim {
    // Defaulted as Go decodes a left-out field (its zero value), so
    // validation names what is missing (422 Required) instead of the
    // decoder refusing the whole body (400).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub resource_claim_template_name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_size: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update_configuration: Option<RollingUpdateConfiguration>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain_policy: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa_pod_selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// minik8s (KEP-820 and beyond): each group's state, restarts and backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_statuses: Option<Vec<GroupStatus>>,
}

/// One group in `status.groupStatuses` (minik8s; upstream has none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    pub index: i32,
    /// `Ready`, `NotReady`, `Restarting` (backing off before a recreation) or `Failed`.
    pub state: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_restart_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

namespaced_resource!(
    LeaderWorkerSet,
    API_VERSION,
    GROUP,
    "v1",
    "LeaderWorkerSet",
    "leaderworkersets"
);

impl LeaderWorkerSetSpec {
    /// Whether the groups are Hash groups (leaders in a Deployment).
    pub fn is_hash(&self) -> bool {
        self.group_identity.as_deref() == Some(HASH)
    }

    /// Whether a Hash group's replacement waits for the old group to go.
    pub fn replaces_after_termination(&self) -> bool {
        self.is_hash() && self.group_replacement_policy.as_deref() != Some(IMMEDIATE)
    }
}

// ---------------------------------------------------------------- validation

/// Scales an int-or-percent against `total`, rounding up or down (as intstr does).
pub fn scaled_value(v: &Value, total: i64, round_up: bool) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let p: i64 = s.strip_suffix('%')?.parse().ok()?;
            let x = p * total;
            Some(if round_up { (x + 99) / 100 } else { x / 100 })
        }
        _ => None,
    }
}
