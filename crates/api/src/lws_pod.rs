//! The labels, annotations and names of an LWS's pods: what its controllers
//! write and the pod admission reads (`minik8s_validation::lws_pod`, upstream
//! LWS's pod webhook), and the scheduler's gang keys.
//!
//! ```text
//!   leader  L-1     worker-index=0  group-index=1  group-key=sha1(ns/L-1)
//!   worker  L-1-2   worker-index=2  (group-index, group-key from its StatefulSet)
//! ```

use crate::hash::sha1_hex;
use serde_json::Value;

pub const PREFIX: &str = "leaderworkerset.sigs.k8s.io/";
pub const NAME: &str = "leaderworkerset.sigs.k8s.io/name";
pub const WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
pub const GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
pub const GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// `leader` or `worker` on the managed StatefulSets and their pods (upstream
/// v0.11). Pods get it at admission, not from the StatefulSets' templates,
/// so adding it rolled no running pod.
pub const ROLE: &str = "leaderworkerset.sigs.k8s.io/role";
pub const REVISION_KEY: &str = "leaderworkerset.sigs.k8s.io/template-revision-hash";
pub const SUBGROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/subgroup-index";
pub const SUBGROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/subgroup-key";

pub const SIZE: &str = "leaderworkerset.sigs.k8s.io/size";
pub const REPLICAS: &str = "leaderworkerset.sigs.k8s.io/replicas";
pub const LEADER_NAME: &str = "leaderworkerset.sigs.k8s.io/leader-name";
pub const SUBGROUP_SIZE: &str = "leaderworkerset.sigs.k8s.io/subgroup-size";
pub const SUBGROUP_POLICY_TYPE: &str = "leaderworkerset.sigs.k8s.io/subgroup-policy-type";
pub const SUBDOMAIN_POLICY: &str = "leaderworkerset.sigs.k8s.io/subdomainPolicy";
pub const LEADER_REQUESTS_TPUS: &str = "leaderworkerset.sigs.k8s.io/leader-requests-tpus";
pub use crate::lws::{EXCLUSIVE_TOPOLOGY, SUBGROUP_EXCLUSIVE_TOPOLOGY};

/// Gang scheduling (minik8s, beyond upstream): the pod group a pod belongs
/// to, as Volcano's provider names it (`L-i-<revision>`).
pub const GANG_GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// Gang scheduling: how many pods of the group must fit before any is bound.
pub const GANG_MIN_MEMBER: &str = "minik8s.io/gang-min-member";

/// On an LWS pod template (minik8s, lws#444): the claim entries whose
/// ResourceClaim is the group's own, `name,name`; admission points them at
/// [`group_claim_name`].
pub const GROUP_RESOURCE_CLAIMS: &str = "minik8s.io/lws-group-resource-claims";

/// Readiness gate of Hash leaders (upstream v0.11): True once the whole
/// group is ready, so a leader (and the Deployment's availability) counts groups.
pub const GROUP_READY: &str = "leaderworkerset.sigs.k8s.io/group-ready";
/// Scheduling gate of Hash leaders under `groupReplacementPolicy:
/// PostTermination`: lifted once the group being replaced is gone.
pub const REPLACEMENT_GATE: &str = "leaderworkerset.sigs.k8s.io/group-replacement";
/// On Hash pod templates (minik8s): `Hash`, so admission keys the group.
pub const GROUP_IDENTITY: &str = "minik8s.io/lws-group-identity";
/// On Hash leader templates (minik8s): `PostTermination` when a new leader
/// must wait for [`REPLACEMENT_GATE`].
pub const GROUP_REPLACEMENT: &str = "minik8s.io/lws-group-replacement";
/// On a Hash group's worker template (minik8s): the leader's pod IP.
pub const LEADER_ADDRESS: &str = "minik8s.io/lws-leader-address";

/// A new Hash group key: 40 hex characters, random (process-seeded hash
/// state, the clock and a counter, through SHA-1; no secret depends on it).
pub fn new_group_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    let a = h.finish();
    h.write_u64(a);
    sha1_hex(&format!("{a:016x}{:016x}{nanos}", h.finish()))
}

/// The headless Service (and subdomain) of a Hash group under
/// `subdomainPolicy: UniquePerReplica`: `<lws>-<first 12 of the key>`, a
/// DNS label of at most 63 characters (the key itself is 40).
pub fn hash_group_service(lws: &str, key: &str) -> String {
    let short: String = key.chars().take(12).collect();
    let head: String = lws.chars().take(63 - 1 - short.len()).collect();
    format!("{}-{short}", head.trim_end_matches('-'))
}

/// The ResourceClaim group `group` of LWS `lws` shares for entry `entry`.
pub fn group_claim_name(lws: &str, group: &str, entry: &str) -> String {
    format!("{lws}-{group}-{entry}")
}

pub const TPU_RESOURCE: &str = "google.com/tpu";

/// The trailing `-<n>` of a pod name.
pub fn trailing_ordinal(name: &str) -> Option<i64> {
    name.rsplit_once('-')?.1.parse().ok()
}

/// The subgroup of worker `j` in groups of `size` with subgroups of `s`.
pub fn subgroup_of_worker(j: i64, size: i64, s: i64) -> i64 {
    if s <= 0 {
        return 0;
    }
    if (size - 1) % s == 0 && size % s != 0 {
        (j - 1) / s
    } else {
        j / s
    }
}

/// `group-key`: stable per namespace and group, across group recreation.
pub fn group_key(namespace: &str, leader_name: &str) -> String {
    sha1_hex(&format!("{namespace}/{leader_name}"))
}

/// `subgroup-key` (upstream hashes no namespace here).
pub fn subgroup_key(leader_name: &str, subgroup: i64) -> String {
    sha1_hex(&format!("{leader_name}/{subgroup}"))
}

/// Whether a container asks for TPUs (limits, else requests).
pub fn requests_tpu(c: &Value) -> bool {
    let amount = |kind: &str| {
        c.pointer(&format!(
            "/resources/{kind}/{}",
            TPU_RESOURCE.replace('/', "~1")
        ))
        .and_then(|q| match q {
            Value::String(s) => s.parse::<f64>().ok(),
            Value::Number(n) => n.as_f64(),
            _ => None,
        })
    };
    amount("limits")
        .or_else(|| amount("requests"))
        .unwrap_or(0.0)
        > 0.0
}

/// Whether a pod spec asks for TPUs in any container or init container.
pub fn pod_requests_tpus(spec: &Value) -> bool {
    ["containers", "initContainers"].iter().any(|k| {
        spec[*k]
            .as_array()
            .is_some_and(|cs| cs.iter().any(requests_tpu))
    })
}
