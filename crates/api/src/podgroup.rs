//! Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`), built in so that
//! manifests written for upstream LWS with Volcano are gang-scheduled by the
//! minik8s scheduler with no Volcano installed. A pod joins a group with the
//! annotation `scheduling.k8s.io/group-name: <podgroup>`; the scheduler binds
//! none of the group's pods until `spec.minMember` of them fit together.
//! minik8s also keeps its own gangs (LWS `spec.scheduling`) as PodGroups.
//!
//! ```text
//!   PodGroup demo-1-<rev>  minMember 4
//!     ▲ scheduling.k8s.io/group-name
//!   Pods demo-1, demo-1-1, demo-1-2, demo-1-3 ──▶ scheduler: all 4 fit? bind all : bind none
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const GROUP: &str = "scheduling.volcano.sh";
pub const API_VERSION: &str = "scheduling.volcano.sh/v1beta1";
pub const KIND: &str = "PodGroup";
/// The pod annotation naming a pod's group (Volcano's, which upstream LWS stamps).
pub const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// The scheduler name Volcano serves; minik8s' scheduler serves it too.
pub const VOLCANO_SCHEDULER: &str = "volcano";

fn default_api_version() -> String {
    API_VERSION.to_string()
}
fn default_kind() -> String {
    KIND.to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroup {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodGroupStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

namespaced_resource!(
    PodGroup,
    API_VERSION,
    GROUP,
    "v1beta1",
    "PodGroup",
    "podgroups"
);

impl PodGroup {
    /// How many of the group's pods must fit before any is bound (at least 1).
    pub fn min_member(&self) -> usize {
        self.spec.min_member.unwrap_or(1).max(1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn min_member_is_at_least_one() {
        let pg: PodGroup = serde_json::from_value(json!({"metadata": {"name": "g"},
            "spec": {"minMember": 4, "minResources": {"cpu": "2"}, "queue": "default"}}))
        .unwrap();
        assert_eq!(pg.min_member(), 4);
        assert_eq!(PodGroup::default().min_member(), 1);
    }
}
