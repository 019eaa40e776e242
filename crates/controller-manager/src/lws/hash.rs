//! Hash groups (`spec.groupIdentity: Hash`, upstream LWS v0.11): the leaders
//! live in a Deployment named after the LWS instead of a StatefulSet, each
//! group is keyed by a random 40-hex key (set by pod admission), workers
//! reach their leader by pod IP, and a leader is Ready only once its whole
//! group is (the `group-ready` readiness gate), so the Deployment's rollout
//! and availability count groups.
//!
//! ```text
//!   LeaderWorkerSet demo (Hash, replicas 2, size 3)
//!     ├── Deployment demo ── ReplicaSet demo-<hash>
//!     │     ├── Pod demo-<hash>-x2k9q  group-key=3f2a…(40)  gates: group-ready, group-replacement
//!     │     │     └── owns StatefulSet demo-<hash>-x2k9q ── Pods …-x2k9q-1, …-x2k9q-2
//!     │     │            (LWS_LEADER_ADDRESS = the leader's pod IP)
//!     │     └── Pod demo-<hash>-h8m2p  group-key=9b71…
//!     ├── Service demo (headless; Shared subdomain policy)
//!     └── ControllerRevision demo-<hash>-<n>
//! ```
//!
//! `groupReplacementPolicy: PostTermination` (the default) holds a new
//! leader behind a scheduling gate while groups are still tearing down, so a
//! replacement never competes with the group it replaces for capacity.
//! Pure core: [`leader_deployment`], [`status_of_groups`],
//! [`leaders_to_admit`], [`group_ready`]; the shells are
//! `LwsController::sync_hash` and the group controller's Hash steps.

use super::restarts::{NOT_READY, READY};
use super::rollout::*;
use super::{headless_service, Applied, LwsController};
use crate::ns_of;
use crate::ownership::{controller_of, is_ready};
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use minik8s_api::lws::{LeaderWorkerSet, POST_TERMINATION};
use minik8s_api::lws_pod::*;
use minik8s_api::registry;
use minik8s_client::controller::Action;
use minik8s_client::events::EventType;
use minik8s_client::rest::content;
use minik8s_client::shared::NAMESPACE_INDEX;
use minik8s_client::ClientError;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often a held leader looks again while groups tear down (upstream's 10 s).
pub const REPLACEMENT_RETRY: Duration = Duration::from_secs(10);

/// The leader Deployment of a Hash LWS at revision `key`: the LWS's
/// maxSurge/maxUnavailable become the Deployment's; the pod template is the
/// leader template with the group annotations admission reads.
pub fn leader_deployment(lws: &LeaderWorkerSet, key: &str) -> Value {
    let name = lws.metadata.name.clone().unwrap_or_default();
    let lwt = &lws.spec.leader_worker_template;
    let Leaders {
        labels,
        annotations,
        mut template,
    } = leaders(lws, key);
    // Hash leaders are new pods: they carry the role label themselves, and
    // the replacement policy admission applies.
    let tmeta = template.metadata.get_or_insert_with(Default::default);
    tmeta
        .labels
        .get_or_insert_with(Default::default)
        .insert(ROLE.into(), "leader".into());
    if lws.spec.replaces_after_termination() {
        tmeta
            .annotations
            .get_or_insert_with(Default::default)
            .insert(GROUP_REPLACEMENT.into(), POST_TERMINATION.into());
    }
    let mut template = serde_json::to_value(&template).unwrap_or(json!({}));
    if !unique_per_replica(lws.spec.network_config.as_ref()) {
        // Leaders resolve as <pod>.<lws>.<ns> through the shared Service.
        template["spec"]["subdomain"] = json!(name);
    }
    let ru = lws
        .spec
        .rollout_strategy
        .as_ref()
        .and_then(|s| s.rolling_update_configuration.clone())
        .unwrap_or_default();
    let int_or = |v: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>, d: i32| {
        v.and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or(json!(d))
    };
    let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns_of(&lws.metadata), "labels": labels,
            "annotations": annotations, "ownerReferences": [owner_ref(lws)]},
        "spec": {"replicas": lws.spec.replicas.unwrap_or(1),
            "selector": {"matchLabels": {NAME: name, WORKER_INDEX: "0"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": int_or(ru.max_surge, 0), "maxUnavailable": int_or(ru.max_unavailable, 1)}},
            "template": template}});
    add_group_resource_claims(&mut deployment, lwt, &name, "group");
    deployment
}

/// A Hash group as the status sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashGroup {
    pub ready: bool,
    pub updated: bool,
}

/// `(readyReplicas, updatedReplicas, which conditions)` of Hash groups:
/// updating while a group of an older revision lives, available once
/// exactly `replicas` groups are all updated and ready.
pub fn status_of_groups(groups: &[HashGroup], replicas: i32) -> (i32, i32, Assert) {
    let ready = groups.iter().filter(|g| g.ready).count() as i32;
    let updated = groups.iter().filter(|g| g.updated).count() as i32;
    let updated_ready = groups.iter().filter(|g| g.updated && g.ready).count() as i32;
    let assert = if updated < groups.len() as i32 {
        Assert::Updating
    } else if groups.len() as i32 == replicas && updated_ready == replicas {
        Assert::Available
    } else {
        Assert::Progressing
    };
    (ready, updated, assert)
}

/// One pod of a Hash LWS, as the replacement policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SetPod {
    pub name: String,
    pub group: String,
    pub leader: bool,
    pub terminating: bool,
    /// Held by [`REPLACEMENT_GATE`].
    pub gated: bool,
    /// Creation time, nanoseconds since the epoch.
    pub created: i128,
}

/// PostTermination: the gated leaders that may go now, oldest first. With
/// T groups tearing down (a pod of the group exists while its leader is
/// terminating or gone) and G gated leaders, the oldest G − T go.
pub fn leaders_to_admit(pods: &[SetPod]) -> Vec<String> {
    use std::collections::BTreeSet;
    let live_leaders: BTreeSet<&str> = pods
        .iter()
        .filter(|p| p.leader && !p.terminating)
        .map(|p| p.group.as_str())
        .collect();
    let tearing_down = pods
        .iter()
        .filter(|p| !live_leaders.contains(p.group.as_str()))
        .map(|p| p.group.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let mut gated: Vec<&SetPod> = pods
        .iter()
        .filter(|p| p.leader && p.gated && !p.terminating)
        .collect();
    gated.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    let admit = gated.len().saturating_sub(tearing_down);
    gated
        .into_iter()
        .take(admit)
        .map(|p| p.name.clone())
        .collect()
}

/// The `group-ready` condition a Hash leader should carry: its workers'
/// StatefulSet is ready at the leader's revision (a group of one is ready
/// at once).
pub fn group_ready(size: i32, workers: Option<&StatefulSet>) -> bool {
    if size <= 1 {
        return true;
    }
    let Some(w) = workers else { return false };
    let st = w.status.clone().unwrap_or_default();
    st.observed_generation.is_some()
        && w.spec.replicas.unwrap_or(1) == st.ready_replicas.unwrap_or(0)
        && st.current_revision == st.update_revision
}

fn label<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(k).map(String::as_str)
}

/// The pods of Hash LWS `lws` in `ns`, for [`leaders_to_admit`].
pub fn set_pods(pods: &[Arc<Pod>], lws: &str) -> Vec<SetPod> {
    pods.iter()
        .filter(|p| label(p, NAME) == Some(lws))
        .filter_map(|p| {
            Some(SetPod {
                name: p.metadata.name.clone()?,
                group: label(p, GROUP_KEY)?.to_string(),
                leader: label(p, WORKER_INDEX) == Some("0"),
                terminating: p.metadata.deletion_timestamp.is_some(),
                gated: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.scheduling_gates.as_ref())
                    .is_some_and(|g| g.iter().any(|g| g.name == REPLACEMENT_GATE)),
                created: p
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.as_nanosecond())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

impl LwsController {
    /// Converges a Hash LWS at revision `rev_key`: its leader Deployment,
    /// the shared Service, the status, and the revisions once rolled.
    pub(super) async fn sync_hash(
        &self,
        lws: &LeaderWorkerSet,
        existing: Option<Arc<Deployment>>,
        rev_key: &str,
        revisions: &[Arc<ControllerRevision>],
        new_revision: bool,
    ) -> Result<Action, ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let desired = leader_deployment(lws, rev_key);
        let api = self.client.dynamic(registry::of::<Deployment>(), Some(&ns));
        let mut again = Action::Done;
        match &existing {
            None => match api.create(&desired).await {
                Ok(_) => {
                    let note = format!("Created leader deployment {name}");
                    self.recorder
                        .event(lws, EventType::Normal, "GroupsProgressing", &note)
                        .await;
                }
                Err(e) if e.api().is_some_and(|a| a.code == 409) => {}
                Err(e) => {
                    let note = format!("Failed to create leader deployment {name}: {e}");
                    self.recorder
                        .event(lws, EventType::Warning, "FailedCreate", &note)
                        .await;
                    return Err(e);
                }
            },
            Some(d) => {
                let current = serde_json::to_value(d.as_ref())
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                if self.apply_leader(&api, &current, &desired).await? == Applied::Stale {
                    again = Action::RequeueAfter(super::STALE_RETRY);
                }
            }
        }
        self.ensure_shared_service(lws).await?;

        // Status: one group per live leader.
        let groups = self.hash_groups(lws, rev_key);
        let replicas = lws.spec.replicas.unwrap_or(1).max(0);
        let (ready, updated, assert) = status_of_groups(&groups, replicas);
        let states: Vec<&str> = groups
            .iter()
            .map(|g| if g.ready { READY } else { NOT_READY })
            .collect();
        self.metrics
            .lws_status(&ns, &name, &states, replicas, updated, ready);
        let deployed = existing
            .as_ref()
            .and_then(|d| d.status.as_ref())
            .and_then(|s| s.replicas)
            .unwrap_or(0);
        let counts = Counts {
            ready,
            updated,
            replicas: deployed,
            wanted: replicas,
        };
        if !self.write_hash_status(lws, counts, assert).await? {
            return Ok(Action::Done);
        }
        if assert == Assert::Available && !new_revision {
            self.prune_revisions(&ns, revisions, rev_key).await?;
        }
        Ok(again)
    }

    /// One group per live leader: ready (the leader's Ready includes the
    /// group-ready gate) and updated (leader and workers at `rev_key`).
    fn hash_groups(&self, lws: &LeaderWorkerSet, rev_key: &str) -> Vec<HashGroup> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let size = size_of(&lws.spec.leader_worker_template);
        let revision_of = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.labels.as_ref().and_then(|l| l.get(REVISION_KEY)).cloned()
        };
        self.pods
            .by_index(NAMESPACE_INDEX, &ns)
            .iter()
            .filter(|p| {
                label(p, NAME) == Some(&name)
                    && label(p, WORKER_INDEX) == Some("0")
                    && p.metadata.deletion_timestamp.is_none()
            })
            .map(|leader| {
                let running =
                    leader.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let leader_name = leader.metadata.name.clone().unwrap_or_default();
                let workers = self
                    .statefulsets
                    .get(&format!("{ns}/{leader_name}"))
                    .filter(|s| controller_of(&s.metadata).map(|o| o.0) == leader.metadata.uid);
                let workers_updated = size <= 1
                    || workers
                        .as_ref()
                        .and_then(|w| revision_of(&w.metadata))
                        .as_deref()
                        == Some(rev_key);
                HashGroup {
                    // The leader's Ready includes the group-ready gate.
                    ready: running && is_ready(leader) && group_ready(size, workers.as_deref()),
                    updated: revision_of(&leader.metadata).as_deref() == Some(rev_key)
                        && workers_updated,
                }
            })
            .collect()
    }
}

/// What the status of a Hash LWS counts.
#[derive(Debug, Clone, Copy)]
struct Counts {
    ready: i32,
    updated: i32,
    /// Leader pods the Deployment has.
    replicas: i32,
    /// `spec.replicas`.
    wanted: i32,
}

impl LwsController {
    /// Writes the status (as the Ordinal path does, without per-group
    /// states: a Hash group has no index). False when the LWS is gone.
    async fn write_hash_status(
        &self,
        lws: &LeaderWorkerSet,
        c: Counts,
        assert: Assert,
    ) -> Result<bool, ClientError> {
        let ns = ns_of(&lws.metadata);
        let name = lws.metadata.name.clone().unwrap_or_default();
        let old = lws.status.clone().unwrap_or_default();
        let generation = lws.metadata.generation.unwrap_or(0);
        let now = minik8s_api::meta::time_now();
        let old_conditions = old.conditions.clone().unwrap_or_default();
        let (conditions, first_new) = set_conditions(&old_conditions, assert, generation, &now);
        let selector = format!("{NAME}={name},{WORKER_INDEX}=0");
        let changed = old.ready_replicas != c.ready
            || old.updated_replicas != c.updated
            || old.replicas != c.replicas
            || old.hpa_pod_selector.as_deref() != Some(selector.as_str())
            || old.observed_generation != Some(generation)
            || first_new.is_some()
            || conditions.len() != old_conditions.len()
            || conditions
                .iter()
                .zip(&old_conditions)
                .any(|(a, b)| a.status != b.status);
        if !changed {
            return Ok(true);
        }
        let status = json!({"status": {"readyReplicas": c.ready, "updatedReplicas": c.updated,
            "replicas": c.replicas, "hpaPodSelector": selector, "observedGeneration": generation,
            "conditions": conditions}});
        let api = self
            .client
            .dynamic(registry::of::<LeaderWorkerSet>(), Some(&ns));
        if !api
            .patch_status(&name, content::MERGE_PATCH, &status)
            .await?
        {
            return Ok(false);
        }
        if let Some(t) = first_new {
            let (reason, message) = condition_text(t);
            let note = format!(
                "{message}, with {} groups ready of total {} groups",
                c.ready, c.wanted
            );
            self.recorder
                .event(lws, EventType::Normal, reason, &note)
                .await;
        }
        Ok(true)
    }
}

/// A Hash leader held by the PostTermination scheduling gate.
pub(super) fn held_for_replacement(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == REPLACEMENT_GATE))
}

/// The held leaders of the Hash set `pod` belongs to (their keys), when a
/// pod of it comes or goes.
pub fn held_leaders(pods: &minik8s_client::Cache<Pod>, pod: &Pod) -> Vec<String> {
    let annotation = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_IDENTITY));
    let (Some(lws), Some(_)) = (label(pod, NAME), annotation) else {
        return Vec::new();
    };
    pods.by_index(NAMESPACE_INDEX, &ns_of(&pod.metadata))
        .into_iter()
        .filter(|p| label(p, NAME) == Some(lws) && held_for_replacement(p))
        .map(|p| minik8s_client::informer::object_key(&p.metadata))
        .collect()
}

/// The headless Service a Hash group's workers (UniquePerReplica) resolve
/// through, named from the group key.
pub fn group_service(lws: &str, leader: &Pod, owner: Value) -> Value {
    let key = label(leader, GROUP_KEY).unwrap_or_default();
    headless_service(
        &hash_group_service(lws, key),
        &ns_of(&leader.metadata),
        json!({NAME: lws, GROUP_KEY: key}),
        owner,
    )
}

/// The patch that sets a Hash leader's `group-ready` condition, if it differs.
pub fn group_ready_patch(leader: &Pod, ready: bool) -> Option<Value> {
    let status = if ready { "True" } else { "False" };
    let current = leader
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == GROUP_READY))
        .map(|c| c.status.as_str());
    if current == Some(status) {
        return None;
    }
    let (reason, message) = if ready {
        ("GroupReady", "all pods of the group are ready")
    } else {
        (
            "GroupNotReady",
            "waiting for the group's workers to be ready",
        )
    };
    Some(
        json!({"status": {"conditions": [{"type": GROUP_READY, "status": status,
        "reason": reason, "message": message,
        "lastTransitionTime": minik8s_api::meta::now_rfc3339()}]}}),
    )
}

/// How the group controller patches a leader's condition: strategic merge
/// (conditions merge by type), so the kubelet's conditions stay.
pub const CONDITION_PATCH: &str = content::STRATEGIC_MERGE_PATCH;

#[cfg(test)]
mod tests {
    use super::*;

    fn lws(spec: Value) -> LeaderWorkerSet {
        let mut o = json!({"apiVersion": minik8s_api::lws::API_VERSION, "kind": "LeaderWorkerSet",
            "metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "labels": {"team": "a"}},
            "spec": {"replicas": 3, "groupIdentity": "Hash", "leaderWorkerTemplate": {"size": 2,
                "workerTemplate": {"metadata": {"labels": {"app": "w"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}});
        json_patch::merge(&mut o, &json!({"spec": spec}));
        minik8s_validation::lws::default(&mut o);
        serde_json::from_value(o).unwrap()
    }

    #[test]
    fn the_leaders_are_a_deployment_with_the_lws_rollout_settings() {
        let d = leader_deployment(
            &lws(
                json!({"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": "50%", "maxUnavailable": 0}}}),
            ),
            "rev1",
        );
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["name"], "demo");
        assert_eq!(d["metadata"]["labels"][ROLE], "leader");
        assert_eq!(d["metadata"]["labels"]["team"], "a");
        assert_eq!(
            d["metadata"]["ownerReferences"][0]["kind"],
            "LeaderWorkerSet"
        );
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(
            d["spec"]["strategy"]["rollingUpdate"],
            json!({"maxSurge": "50%", "maxUnavailable": 0})
        );
        assert_eq!(
            d["spec"]["selector"]["matchLabels"],
            json!({NAME: "demo", WORKER_INDEX: "0"})
        );
        let t = &d["spec"]["template"];
        assert_eq!(t["metadata"]["labels"][REVISION_KEY], "rev1");
        assert_eq!(t["metadata"]["labels"]["app"], "w");
        assert_eq!(t["metadata"]["annotations"][GROUP_IDENTITY], "Hash");
        assert_eq!(
            t["metadata"]["annotations"][GROUP_REPLACEMENT],
            "PostTermination"
        );
        assert_eq!(t["metadata"]["annotations"][SIZE], "2");
        assert_eq!(t["spec"]["subdomain"], "demo");
        let immediate =
            leader_deployment(&lws(json!({"groupReplacementPolicy": "Immediate"})), "r");
        assert!(immediate["spec"]["template"]["metadata"]["annotations"]
            .get(GROUP_REPLACEMENT)
            .is_none());
    }

    #[test]
    fn status_counts_groups() {
        let g = |ready, updated| HashGroup { ready, updated };
        let all = [g(true, true), g(true, true), g(true, true)];
        assert_eq!(status_of_groups(&all, 3), (3, 3, Assert::Available));
        // A surge group still going: not yet available.
        let surge = [g(true, true), g(true, true), g(true, true), g(false, true)];
        assert_eq!(status_of_groups(&surge, 3).2, Assert::Progressing);
        // Groups still on the old revision: updating.
        let rolling = [g(true, true), g(true, false), g(true, false)];
        assert_eq!(status_of_groups(&rolling, 3), (3, 1, Assert::Updating));
        // A fresh LWS whose groups are not ready yet: progressing.
        let fresh = [g(false, true), g(false, true), g(false, true)];
        assert_eq!(status_of_groups(&fresh, 3), (0, 3, Assert::Progressing));
        assert_eq!(status_of_groups(&[], 3).2, Assert::Progressing);
    }

    fn pod(
        name: &str,
        group: &str,
        leader: bool,
        terminating: bool,
        gated: bool,
        t: i128,
    ) -> SetPod {
        SetPod {
            name: name.into(),
            group: group.into(),
            leader,
            terminating,
            gated,
            created: t,
        }
    }

    #[test]
    fn a_replacement_waits_for_the_group_it_replaces() {
        // Group a's leader is terminating while its worker remains; the new
        // leader c (gated) waits; b runs untouched.
        let mut pods = vec![
            pod("l-a", "a", true, true, false, 1),
            pod("l-a-1", "a", false, false, false, 1),
            pod("l-b", "b", true, false, false, 1),
            pod("l-b-1", "b", false, false, false, 1),
            pod("l-c", "c", true, false, true, 3),
        ];
        assert!(leaders_to_admit(&pods).is_empty());
        // The worker of group a is gone too (the leader is gone): c goes.
        pods.retain(|p| p.group != "a");
        assert_eq!(leaders_to_admit(&pods), vec!["l-c"]);
        // Two gated leaders and one group tearing down: only the oldest goes.
        pods.push(pod("l-d", "d", true, false, true, 2));
        pods.push(pod("l-e-1", "e", false, true, false, 1));
        assert_eq!(leaders_to_admit(&pods), vec!["l-d"]);
    }

    #[test]
    fn a_group_is_ready_once_its_workers_are() {
        assert!(group_ready(1, None));
        assert!(!group_ready(3, None));
        let sts = |ready: i32, cur: &str, upd: &str| -> StatefulSet {
            serde_json::from_value(
                json!({"spec": {"replicas": 2, "selector": {}, "serviceName": "s", "template": {}},
                "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": ready,
                    "currentRevision": cur, "updateRevision": upd}}),
            )
            .unwrap()
        };
        assert!(group_ready(3, Some(&sts(2, "r", "r"))));
        assert!(!group_ready(3, Some(&sts(1, "r", "r"))));
        assert!(!group_ready(3, Some(&sts(2, "r", "s"))));
        let leader: Pod = serde_json::from_value(json!({"metadata": {"name": "l"},
            "status": {"conditions": [{"type": GROUP_READY, "status": "False"}]}}))
        .unwrap();
        assert!(group_ready_patch(&leader, false).is_none());
        let p = group_ready_patch(&leader, true).unwrap();
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
    }
}
