//! What upstream LWS's pod webhook does, built into pod admission: every pod
//! carrying `leaderworkerset.sigs.k8s.io/name` gets its group labels, its
//! exclusive-placement affinity and the `LWS_*` environment at creation.
//!
//! ```text
//!   leader  L-1     worker-index=0  group-index=1  group-key=sha1(ns/L-1)
//!   worker  L-1-2   worker-index=2  (group-index, group-key from its StatefulSet)
//!   every container: LWS_LEADER_ADDRESS=L-1.<subdomain>.<ns>, LWS_GROUP_SIZE, LWS_WORKER_INDEX
//! ```

use crate::field::FieldError;
use crate::hash::sha1_hex;
use crate::lws_scheduling::GangScope;
use serde_json::{json, Map, Value};

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
const TPU_DEFAULT_PORT: i64 = 8476;

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

fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

fn map_at<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let e = &mut v[key];
    if !e.is_object() {
        *e = json!({});
    }
    e.as_object_mut().expect("object")
}

/// Appends the exclusive affinity of `key` (group-key or subgroup-key) over
/// `topology` to a pod spec, unless terms with that topology are there already.
/// The anti-affinity is scoped to pods of the same LWS (`name`), so two LWS
/// objects never block each other's domains (the fix for upstream lws#539).
fn add_exclusive_affinity(spec: &mut Value, topology: &str, key_label: &str, key: &str, lws: &str) {
    let has = |spec: &Value, kind: &str| {
        spec.pointer(&format!(
            "/affinity/{kind}/requiredDuringSchedulingIgnoredDuringExecution"
        ))
        .and_then(Value::as_array)
        .is_some_and(|ts| ts.iter().any(|t| t["topologyKey"] == topology))
    };
    if has(spec, "podAffinity") && has(spec, "podAntiAffinity") {
        return;
    }
    let affinity = map_at(spec, "affinity");
    let mut push = |kind: &str, term: Value| {
        let k = affinity.entry(kind).or_insert_with(|| json!({}));
        if !k.is_object() {
            *k = json!({});
        }
        let list = k
            .as_object_mut()
            .expect("object")
            .entry("requiredDuringSchedulingIgnoredDuringExecution")
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        list.as_array_mut().expect("array").push(term);
    };
    push(
        "podAffinity",
        json!({"labelSelector": {"matchExpressions": [{"key": key_label, "operator": "In", "values": [key]}]},
               "topologyKey": topology}),
    );
    push(
        "podAntiAffinity",
        json!({"labelSelector": {"matchExpressions": [
                   {"key": key_label, "operator": "Exists"},
                   {"key": key_label, "operator": "NotIn", "values": [key]},
                   {"key": NAME, "operator": "In", "values": [lws]}]},
               "topologyKey": topology}),
    );
}

fn requests_tpu(c: &Value) -> bool {
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

fn env_of(c: &Value, name: &str) -> Option<String> {
    c["env"].as_array()?.iter().find_map(|e| {
        (e["name"] == name)
            .then(|| e["value"].as_str().map(str::to_string))
            .flatten()
    })
}

/// The TPU environment: host list, worker id, name, process addresses.
fn add_tpu_env(pod: &mut Value, size: i64) {
    let place = TpuPlace::of(pod);
    let spec = &mut pod["spec"];
    // The TPU containers, containers first, as (list key, index).
    let mut tpu: Vec<(&str, usize)> = Vec::new();
    for key in ["containers", "initContainers"] {
        for (i, c) in spec[key].as_array().into_iter().flatten().enumerate() {
            if requests_tpu(c) {
                tpu.push((key, i));
            }
        }
    }
    let Some(&(key, index)) = tpu.first() else {
        return;
    };
    let first = &spec[key][index];
    if env_of(first, "TPU_WORKER_HOSTNAMES").is_some() || env_of(first, "TPU_WORKER_ID").is_some() {
        return;
    }
    match place.subgroup_size.filter(|s| *s > 0) {
        Some(s) => place.subgroup_env(s, &mut spec[key][index]),
        None => place.group_env(size, spec, &tpu),
    }
}

/// Where a TPU pod sits in its group, read from its name, labels and
/// annotations.
struct TpuPlace {
    leader: String,
    subdomain: String,
    is_leader: bool,
    /// Whether the leader has TPUs of its own (it counts as a host).
    leader_tpus: bool,
    worker_index: i64,
    subgroup_index: i64,
    subgroup_size: Option<i64>,
}

impl TpuPlace {
    fn of(pod: &Value) -> TpuPlace {
        let name = str_at(pod, "/metadata/name").unwrap_or_default();
        let labels = &pod["metadata"]["labels"];
        let annotations = &pod["metadata"]["annotations"];
        let number = |v: &Value| v.as_str().and_then(|s| s.parse::<i64>().ok());
        let is_leader = labels[WORKER_INDEX] == "0";
        let leader = match is_leader {
            true => name.to_string(),
            false => name
                .rsplit_once('-')
                .map(|(l, _)| l.to_string())
                .unwrap_or_default(),
        };
        TpuPlace {
            leader,
            subdomain: str_at(pod, "/spec/subdomain")
                .unwrap_or_default()
                .to_string(),
            is_leader,
            leader_tpus: is_leader || annotations[LEADER_REQUESTS_TPUS] == "true",
            worker_index: number(&labels[WORKER_INDEX]).unwrap_or(0),
            subgroup_index: number(&labels[SUBGROUP_INDEX]).unwrap_or(0),
            subgroup_size: number(&annotations[SUBGROUP_SIZE]),
        }
    }

    /// The DNS name of the group's pod `k` (0: the leader).
    fn host(&self, k: i64) -> String {
        let (leader, subdomain) = (&self.leader, &self.subdomain);
        match k {
            0 => format!("{leader}.{subdomain}"),
            k => format!("{leader}-{k}.{subdomain}"),
        }
    }

    /// Subgroups of `s` pods: only the first TPU container, with the hosts
    /// of this pod's subgroup.
    fn subgroup_env(&self, s: i64, c: &mut Value) {
        let (mut g, mut id) = (self.subgroup_index, self.worker_index % s);
        if !self.is_leader && !self.leader_tpus {
            id = (self.worker_index - 1) % s;
            g = (self.worker_index - 1) / s;
        }
        let (mut lo, mut hi) = (s * g + 1, s * (g + 1));
        let mut hosts = Vec::new();
        if self.is_leader {
            hosts.push(self.host(0));
            hi -= 1;
        } else if self.leader_tpus {
            if g == 0 {
                hosts.push(self.host(0));
                hi -= 1;
            } else {
                lo -= 1;
                hi -= 1;
            }
        }
        hosts.extend((lo..=hi).map(|k| self.host(k)));
        let port = env_of(c, "TPU_PROCESS_PORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or(TPU_DEFAULT_PORT);
        let addresses: Vec<String> = hosts.iter().map(|h| format!("{h}:{port}")).collect();
        let mut vars = vec![
            ("TPU_WORKER_HOSTNAMES", hosts.join(",")),
            ("TPU_WORKER_ID", id.to_string()),
            ("TPU_NAME", self.leader.clone()),
            ("TPU_PROCESS_ADDRESSES", addresses.join(",")),
        ];
        if env_of(c, "TPU_PROCESS_PORT").is_none() {
            vars.push(("TPU_PROCESS_PORT", port.to_string()));
        }
        append_env(c, vars);
    }

    /// The whole group of `size` pods: every TPU container (`tpu`) of the
    /// pod, each with its own worker id and port.
    fn group_env(&self, size: i64, spec: &mut Value, tpu: &[(&str, usize)]) {
        let m = tpu.len() as i64;
        let w = if self.is_leader {
            0
        } else if self.leader_tpus {
            self.worker_index
        } else {
            self.worker_index - 1
        };
        let ports: Vec<i64> = tpu
            .iter()
            .enumerate()
            .map(|(i, (k, ci))| {
                env_of(&spec[*k][*ci], "TPU_PROCESS_PORT")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(TPU_DEFAULT_PORT + i as i64)
            })
            .collect();
        let mut hosts = Vec::new();
        let mut addresses = Vec::new();
        let first_host = if self.leader_tpus { 0 } else { 1 };
        for k in first_host..size {
            for p in &ports {
                hosts.push(self.host(k));
                addresses.push(format!("{}:{p}", self.host(k)));
            }
        }
        for (i, (k, ci)) in tpu.iter().enumerate() {
            let c = &mut spec[*k][*ci];
            let mut vars = vec![
                ("TPU_WORKER_HOSTNAMES", hosts.join(",")),
                ("TPU_WORKER_ID", (w * m + i as i64).to_string()),
                ("TPU_NAME", self.leader.clone()),
                ("TPU_PROCESS_ADDRESSES", addresses.join(",")),
            ];
            if env_of(c, "TPU_PROCESS_PORT").is_none() {
                vars.push(("TPU_PROCESS_PORT", ports[i].to_string()));
            }
            append_env(c, vars);
        }
    }
}

/// `vars` added at the end of the container's env.
fn append_env(c: &mut Value, vars: Vec<(&str, String)>) {
    let mut env = c["env"].as_array().cloned().unwrap_or_default();
    for (n, v) in vars {
        env.push(json!({"name": n, "value": v}));
    }
    c["env"] = Value::Array(env);
}

/// The group's claims (lws#444): the template's entries listed in
/// `entries` name the group's ResourceClaim.
fn point_at_group_claims(pod: &mut Value, entries: Option<String>, lws: &str, group: &str) {
    let Some(entries) = entries else {
        return;
    };
    let names: Vec<&str> = entries.split(',').filter(|e| !e.is_empty()).collect();
    for c in pod["spec"]["resourceClaims"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let Some(entry) = c["name"].as_str().map(str::to_string) else {
            continue;
        };
        if names.contains(&entry.as_str()) {
            c["resourceClaimName"] = json!(group_claim_name(lws, group, &entry));
        }
    }
}

/// Appends `{field: value}` to the list `list` of a pod spec unless there.
fn add_gate(spec: &mut Value, list: &str, field: &str, value: &str) {
    if !spec[list].is_array() {
        spec[list] = json!([]);
    }
    let gates = spec[list].as_array_mut().expect("array");
    if !gates.iter().any(|g| g[field] == value) {
        gates.push(json!({field: value}));
    }
}

/// A leader's labels (its group's index and key; a Hash group's key is
/// new), its subdomain with UniquePerReplica, a Hash group's gates, the
/// group's exclusive affinity, and subgroup 0 unless the leader is
/// excluded from subgroups.
fn label_leader(
    pod: &mut Value,
    lws: &str,
    name: &str,
    ns: &str,
    hash: bool,
    subgroup_size: Option<i64>,
    annotations: &Value,
) {
    let ann = |k: &str| annotations[k].as_str().map(str::to_string);
    let labels = map_at(&mut pod["metadata"], "labels");
    if hash && !labels.contains_key(GROUP_KEY) {
        // A Hash group is its key: in both labels (upstream v0.11).
        let key = new_group_key();
        labels.insert(GROUP_INDEX.into(), json!(key));
        labels.insert(GROUP_KEY.into(), json!(key));
    }
    if !labels.contains_key(GROUP_INDEX) {
        if let Some(i) = trailing_ordinal(name) {
            labels.insert(GROUP_INDEX.into(), json!(i.to_string()));
        }
    }
    if !labels.contains_key(GROUP_KEY) {
        labels.insert(GROUP_KEY.into(), json!(group_key(ns, name)));
    }
    let key = pod["metadata"]["labels"][GROUP_KEY]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if ann(SUBDOMAIN_POLICY).as_deref() == Some("UniquePerReplica") {
        pod["spec"]["subdomain"] = json!(if hash {
            hash_group_service(lws, &key)
        } else {
            name.to_string()
        });
    }
    if hash {
        add_gate(
            &mut pod["spec"],
            "readinessGates",
            "conditionType",
            GROUP_READY,
        );
        if ann(GROUP_REPLACEMENT).as_deref() == Some(crate::lws::POST_TERMINATION) {
            add_gate(
                &mut pod["spec"],
                "schedulingGates",
                "name",
                REPLACEMENT_GATE,
            );
        }
    }
    if let Some(topology) = ann(EXCLUSIVE_TOPOLOGY) {
        add_exclusive_affinity(&mut pod["spec"], &topology, GROUP_KEY, &key, lws);
    }
    let labels = &pod["metadata"]["labels"];
    if subgroup_size.is_some()
        && labels.get(SUBGROUP_INDEX).is_none()
        && ann(SUBGROUP_POLICY_TYPE).as_deref() != Some("LeaderExcluded")
    {
        // Hash groups derive subgroup identity from the key.
        let sk = subgroup_key(if hash { &key } else { name }, 0);
        let labels = map_at(&mut pod["metadata"], "labels");
        labels.insert(SUBGROUP_INDEX.into(), json!("0"));
        labels.insert(SUBGROUP_KEY.into(), json!(sk.clone()));
        if let Some(topology) = ann(SUBGROUP_EXCLUSIVE_TOPOLOGY) {
            add_exclusive_affinity(&mut pod["spec"], &topology, SUBGROUP_KEY, &sk, lws);
        }
    }
}

/// A worker's labels (its index from its name, its subgroup's index and
/// key) and, inside a gang, the group's exclusive affinity.
fn label_worker(
    pod: &mut Value,
    lws: &str,
    name: &str,
    size_n: i64,
    hash: bool,
    subgroup_size: Option<i64>,
    annotations: &Value,
) -> Result<(), FieldError> {
    let ann = |k: &str| annotations[k].as_str().map(str::to_string);
    let j = trailing_ordinal(name).ok_or_else(|| {
        FieldError::invalid(
            "metadata.name",
            &json!(name),
            "a leaderworkerset worker's name must end in -<worker index>",
        )
    })?;
    let labels = map_at(&mut pod["metadata"], "labels");
    labels.insert(WORKER_INDEX.into(), json!(j.to_string()));
    if let Some(s) = subgroup_size.filter(|s| *s > 0) {
        let g = subgroup_of_worker(j, size_n, s);
        let leader = if hash {
            labels
                .get(GROUP_KEY)
                .and_then(Value::as_str)
                .map(str::to_string)
        } else {
            ann(LEADER_NAME)
        };
        let sk = subgroup_key(&leader.unwrap_or_default(), g);
        labels.insert(SUBGROUP_INDEX.into(), json!(g.to_string()));
        labels.insert(SUBGROUP_KEY.into(), json!(sk.clone()));
        if let Some(topology) = ann(SUBGROUP_EXCLUSIVE_TOPOLOGY) {
            add_exclusive_affinity(&mut pod["spec"], &topology, SUBGROUP_KEY, &sk, lws);
        }
    }
    // A gang's workers are placed with their leader in one go, so they
    // carry the group's exclusive affinity themselves (outside a gang
    // they get a nodeSelector for the leader's domain instead).
    let in_gang = ann(GANG_MIN_MEMBER).is_some()
        || str_at(pod, "/spec/schedulerName") == Some(crate::podgroup::VOLCANO_SCHEDULER);
    if let (Some(topology), true) = (ann(EXCLUSIVE_TOPOLOGY), in_gang) {
        let key = str_at(
            pod,
            "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-key",
        )
        .unwrap_or_default()
        .to_string();
        add_exclusive_affinity(&mut pod["spec"], &topology, GROUP_KEY, &key, lws);
    }
    Ok(())
}

/// Admits an LWS pod at creation: returns `Err(message)` for a pod that carries
/// the name label but not the size annotation; otherwise stamps labels,
/// affinity and env. Pods without the name label are left alone.
pub fn admit_pod(pod: &mut Value) -> Result<(), FieldError> {
    let Some(lws) =
        str_at(pod, "/metadata/labels/leaderworkerset.sigs.k8s.io~1name").map(str::to_string)
    else {
        return Ok(());
    };
    let Some(size) = str_at(
        pod,
        "/metadata/annotations/leaderworkerset.sigs.k8s.io~1size",
    )
    .map(str::to_string) else {
        return Err(FieldError::required(
            format!("metadata.annotations[{SIZE}]"),
            "a leaderworkerset pod must carry the group size annotation",
        ));
    };
    let size_n: i64 = size.parse().map_err(|_| {
        FieldError::invalid(
            format!("metadata.annotations[{SIZE}]"),
            &json!(size),
            "must be an integer",
        )
    })?;
    let name = str_at(pod, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let ns = str_at(pod, "/metadata/namespace")
        .unwrap_or("default")
        .to_string();
    let annotations = pod["metadata"]["annotations"].clone();
    let ann = |k: &str| annotations[k].as_str().map(str::to_string);
    let is_leader = str_at(
        pod,
        "/metadata/labels/leaderworkerset.sigs.k8s.io~1worker-index",
    ) == Some("0");
    let role = if is_leader { "leader" } else { "worker" };
    map_at(&mut pod["metadata"], "labels")
        .entry(ROLE)
        .or_insert_with(|| json!(role));
    let subgroup_size: Option<i64> = ann(SUBGROUP_SIZE).and_then(|s| s.parse().ok());
    let hash = ann(GROUP_IDENTITY).as_deref() == Some(crate::lws::HASH);
    if is_leader {
        label_leader(pod, &lws, &name, &ns, hash, subgroup_size, &annotations);
    } else {
        label_worker(pod, &lws, &name, size_n, hash, subgroup_size, &annotations)?;
    }
    let labels = pod["metadata"]["labels"].clone();
    let group_index = labels[GROUP_INDEX].as_str().unwrap_or_default().to_string();
    name_gang(pod, &lws, &group_index, is_leader);
    point_at_group_claims(pod, ann(GROUP_RESOURCE_CLAIMS), &lws, &group_index);
    if pod_requests_tpus(&pod["spec"]) {
        add_tpu_env(pod, size_n);
    }
    let worker_index = labels[WORKER_INDEX].as_str().unwrap_or("0").to_string();
    let leader_address = leader_address(pod, &lws, &group_index, hash, is_leader)?;
    let lws_env = [
        ("LWS_LEADER_ADDRESS", leader_address),
        ("LWS_GROUP_SIZE", json!({"value": size})),
        ("LWS_WORKER_INDEX", json!({"value": worker_index})),
    ];
    prepend_env(pod, &lws_env);
    Ok(())
}

/// The gang a pod joins: by spec.scheduling's scope (a Workload API
/// PodGroup named in `spec.schedulingGroup`), else one per group for the
/// minik8s annotation and for Volcano (whose webhook names it so).
fn name_gang(pod: &mut Value, lws: &str, group_index: &str, is_leader: bool) {
    let annotations = &pod["metadata"]["annotations"];
    let scope = annotations[crate::lws_scheduling::GANG_SCOPE]
        .as_str()
        .map(str::to_string);
    let revision = pod["metadata"]["labels"][REVISION_KEY]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let volcano = str_at(pod, "/spec/schedulerName") == Some(crate::podgroup::VOLCANO_SCHEDULER);
    let annotated = annotations
        .get(GANG_MIN_MEMBER)
        .is_some_and(Value::is_string);
    let gang = match scope.as_deref() {
        Some("lws") => GangScope::Lws.group_name(lws, group_index, &revision, is_leader),
        Some("worker") => GangScope::Worker.group_name(lws, group_index, &revision, is_leader),
        Some(_) => GangScope::Group.group_name(lws, group_index, &revision, is_leader),
        None if volcano || annotated => {
            GangScope::Group.group_name(lws, group_index, &revision, is_leader)
        }
        None => None,
    };
    match gang {
        // spec.scheduling's gangs are the Workload API's PodGroups.
        Some(g) if scope.is_some() => {
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": g});
        }
        Some(g) => {
            map_at(&mut pod["metadata"], "annotations").insert(GANG_GROUP_NAME.into(), json!(g));
        }
        None => {}
    }
}

/// `LWS_LEADER_ADDRESS`: the leader's DNS name. Hash groups have no stable
/// leader name: workers get the leader's pod IP (their StatefulSet is made
/// once the leader has one), the leader its own through the downward API.
fn leader_address(
    pod: &Value,
    lws: &str,
    group_index: &str,
    hash: bool,
    is_leader: bool,
) -> Result<Value, FieldError> {
    let subdomain = str_at(pod, "/spec/subdomain").unwrap_or_default();
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    match (hash, is_leader) {
        (false, _) => Ok(json!({"value": format!("{lws}-{group_index}.{subdomain}.{ns}")})),
        (true, true) => Ok(json!({"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})),
        (true, false) => match pod["metadata"]["annotations"][LEADER_ADDRESS].as_str() {
            Some(ip) => Ok(json!({"value": ip})),
            None => Err(FieldError::required(
                format!("metadata.annotations[{LEADER_ADDRESS}]"),
                "a Hash group's worker is created once its leader has a pod IP",
            )),
        },
    }
}

/// The LWS variables first in every container's env, replacing any the
/// user set under the same names.
fn prepend_env(pod: &mut Value, lws_env: &[(&str, Value)]) {
    for key in ["containers", "initContainers"] {
        for c in pod["spec"][key].as_array_mut().into_iter().flatten() {
            let user: Vec<Value> = c["env"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|e| !lws_env.iter().any(|(n, _)| e["name"] == *n))
                .collect();
            let mut env: Vec<Value> = lws_env
                .iter()
                .map(|(n, v)| {
                    let mut e = v.clone();
                    e["name"] = json!(n);
                    e
                })
                .collect();
            env.extend(user);
            c["env"] = Value::Array(env);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(name: &str, ann: Value) -> Value {
        let mut a = json!({SIZE: "3"});
        json_patch::merge(&mut a, &ann);
        json!({"metadata": {"name": name, "namespace": "ns",
                "labels": {NAME: "demo", WORKER_INDEX: "0", REVISION_KEY: "abc"}, "annotations": a},
               "spec": {"subdomain": "demo", "containers": [{"name": "c", "image": "i",
                        "env": [{"name": "A", "value": "1"}, {"name": "LWS_GROUP_SIZE", "value": "user"}]}],
                        "initContainers": [{"name": "init", "image": "i"}]}})
    }

    fn worker(name: &str, leader: &str, ann: Value) -> Value {
        let mut a = json!({SIZE: "3", LEADER_NAME: leader});
        json_patch::merge(&mut a, &ann);
        json!({"metadata": {"name": name, "namespace": "ns",
                "labels": {NAME: "demo", GROUP_INDEX: "1", GROUP_KEY: group_key("ns", leader), REVISION_KEY: "abc"},
                "annotations": a},
               "spec": {"subdomain": "demo", "containers": [{"name": "c", "image": "i"}]}})
    }

    fn env(pod: &Value, c: usize) -> Vec<(String, String)> {
        pod["spec"]["containers"][c]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().into(),
                    e["value"].as_str().unwrap().into(),
                )
            })
            .collect()
    }

    #[test]
    fn leader_gets_group_labels_and_env_first() {
        let mut p = leader("demo-1", json!({}));
        admit_pod(&mut p).unwrap();
        let l = &p["metadata"]["labels"];
        assert_eq!(l[GROUP_INDEX], "1");
        assert_eq!(l[ROLE], "leader");
        assert_eq!(l[GROUP_KEY], sha1_hex("ns/demo-1"));
        assert_eq!(l[GROUP_KEY].as_str().unwrap().len(), 40);
        assert_eq!(
            env(&p, 0),
            vec![
                ("LWS_LEADER_ADDRESS".into(), "demo-1.demo.ns".into()),
                ("LWS_GROUP_SIZE".into(), "3".into()),
                ("LWS_WORKER_INDEX".into(), "0".into()),
                ("A".into(), "1".into()),
            ]
        );
        assert_eq!(p["spec"]["initContainers"][0]["env"][2]["value"], "0");
    }

    #[test]
    fn group_claims_point_at_the_groups_own_claim() {
        let entries = json!([{"name": "gpu", "resourceClaimName": "demo-group-gpu"},
                             {"name": "mine", "resourceClaimName": "own"}]);
        let mut l = leader("demo-3", json!({GROUP_RESOURCE_CLAIMS: "gpu"}));
        l["spec"]["resourceClaims"] = entries.clone();
        admit_pod(&mut l).unwrap();
        assert_eq!(
            l["spec"]["resourceClaims"][0]["resourceClaimName"],
            "demo-3-gpu"
        );
        assert_eq!(l["spec"]["resourceClaims"][1]["resourceClaimName"], "own");
        let mut w = worker("demo-1-2", "demo-1", json!({GROUP_RESOURCE_CLAIMS: "gpu"}));
        w["spec"]["resourceClaims"] = entries;
        admit_pod(&mut w).unwrap();
        assert_eq!(
            w["spec"]["resourceClaims"][0]["resourceClaimName"],
            "demo-1-gpu"
        );
    }

    #[test]
    fn worker_index_comes_from_the_name() {
        let mut p = worker("demo-1-2", "demo-1", json!({}));
        admit_pod(&mut p).unwrap();
        assert_eq!(p["metadata"]["labels"][WORKER_INDEX], "2");
        let e = env(&p, 0);
        assert_eq!(e[0].1, "demo-1.demo.ns");
        assert_eq!(e[2].1, "2");
    }

    #[test]
    fn unique_per_replica_leader_is_its_own_subdomain() {
        let mut p = leader("demo-0", json!({SUBDOMAIN_POLICY: "UniquePerReplica"}));
        admit_pod(&mut p).unwrap();
        assert_eq!(p["spec"]["subdomain"], "demo-0");
        assert_eq!(env(&p, 0)[0].1, "demo-0.demo-0.ns");
    }

    #[test]
    fn size_annotation_is_required_and_others_pass_untouched() {
        let mut p = leader("demo-0", json!({}));
        p["metadata"]["annotations"] = json!({});
        assert!(admit_pod(&mut p).unwrap_err().field.contains(SIZE));
        let mut plain =
            json!({"metadata": {"name": "x", "labels": {"app": "a"}}, "spec": {"containers": []}});
        let before = plain.clone();
        admit_pod(&mut plain).unwrap();
        assert_eq!(plain, before);
    }

    #[test]
    fn exclusive_topology_is_scoped_to_the_lws() {
        let mut p = leader("demo-0", json!({EXCLUSIVE_TOPOLOGY: "zone"}));
        admit_pod(&mut p).unwrap();
        let key = p["metadata"]["labels"][GROUP_KEY].clone();
        let aff = &p["spec"]["affinity"];
        let pa = &aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(pa["topologyKey"], "zone");
        assert_eq!(pa["labelSelector"]["matchExpressions"][0]["values"][0], key);
        let anti = &aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        let exprs = anti["labelSelector"]["matchExpressions"]
            .as_array()
            .unwrap();
        assert_eq!(exprs[0], json!({"key": GROUP_KEY, "operator": "Exists"}));
        assert_eq!(exprs[1]["operator"], "NotIn");
        assert_eq!(
            exprs[2],
            json!({"key": NAME, "operator": "In", "values": ["demo"]})
        );
        // Admitting twice does not add the terms twice.
        admit_pod(&mut p).unwrap();
        assert_eq!(
            p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn subgroups_follow_the_reference_examples() {
        // n=4, s=2: {L, w1} = 0, {w2, w3} = 1. n=5, s=2: {L, w1, w2} = 0, {w3, w4} = 1.
        assert_eq!(
            (1..4)
                .map(|j| subgroup_of_worker(j, 4, 2))
                .collect::<Vec<_>>(),
            vec![0, 1, 1]
        );
        assert_eq!(
            (1..5)
                .map(|j| subgroup_of_worker(j, 5, 2))
                .collect::<Vec<_>>(),
            vec![0, 0, 1, 1]
        );
        assert_eq!(
            (1..3)
                .map(|j| subgroup_of_worker(j, 3, 1))
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        let mut l = leader("demo-0", json!({SUBGROUP_SIZE: "2", SIZE: "4"}));
        admit_pod(&mut l).unwrap();
        assert_eq!(l["metadata"]["labels"][SUBGROUP_INDEX], "0");
        assert_eq!(l["metadata"]["labels"][SUBGROUP_KEY], sha1_hex("demo-0/0"));
        let mut excluded = leader(
            "demo-0",
            json!({SUBGROUP_SIZE: "2", SUBGROUP_POLICY_TYPE: "LeaderExcluded"}),
        );
        admit_pod(&mut excluded).unwrap();
        assert!(excluded["metadata"]["labels"].get(SUBGROUP_INDEX).is_none());
        let mut w = worker("demo-0-3", "demo-0", json!({SUBGROUP_SIZE: "2", SIZE: "4"}));
        admit_pod(&mut w).unwrap();
        assert_eq!(w["metadata"]["labels"][SUBGROUP_INDEX], "1");
        assert_eq!(w["metadata"]["labels"][SUBGROUP_KEY], sha1_hex("demo-0/1"));
    }

    #[test]
    fn tpu_env_lists_the_group_hosts() {
        // size 2, 2 TPU containers each: hosts L-0.sub,L-0.sub,L-0-1.sub,L-0-1.sub.
        let tpu = json!({"limits": {TPU_RESOURCE: "4"}});
        let mut p = leader("demo-0", json!({SIZE: "2"}));
        p["spec"]["containers"] = json!([{"name": "a", "image": "i", "resources": tpu},
                                         {"name": "b", "image": "i", "resources": tpu}]);
        admit_pod(&mut p).unwrap();
        let e: std::collections::HashMap<_, _> = env(&p, 1).into_iter().collect();
        assert_eq!(
            e["TPU_WORKER_HOSTNAMES"],
            "demo-0.demo,demo-0.demo,demo-0-1.demo,demo-0-1.demo"
        );
        assert_eq!(e["TPU_WORKER_ID"], "1");
        assert_eq!(e["TPU_NAME"], "demo-0");
        assert_eq!(e["TPU_PROCESS_PORT"], "8477");
        // A worker whose leader has no TPUs: size 11, s=5, worker 7 → L-1-6…L-1-10.
        let mut w = worker(
            "demo-1-7",
            "demo-1",
            json!({SIZE: "11", SUBGROUP_SIZE: "5"}),
        );
        w["spec"]["containers"][0]["resources"] = tpu;
        admit_pod(&mut w).unwrap();
        let e: std::collections::HashMap<_, _> = env(&w, 0).into_iter().collect();
        assert_eq!(
            e["TPU_WORKER_HOSTNAMES"],
            "demo-1-6.demo,demo-1-7.demo,demo-1-8.demo,demo-1-9.demo,demo-1-10.demo"
        );
        assert_eq!(e["TPU_WORKER_ID"], "1");
    }

    #[test]
    fn gang_pods_are_named_after_their_group_and_revision() {
        let mut p = worker("demo-1-1", "demo-1", json!({GANG_MIN_MEMBER: "3"}));
        admit_pod(&mut p).unwrap();
        assert_eq!(p["metadata"]["annotations"][GANG_GROUP_NAME], "demo-1-abc");
    }

    #[test]
    fn hash_leaders_get_a_random_key_both_gates_and_their_own_ip() {
        let hash = json!({GROUP_IDENTITY: "Hash", GROUP_REPLACEMENT: "PostTermination",
            SUBDOMAIN_POLICY: "UniquePerReplica", SUBGROUP_SIZE: "3"});
        let mut a = leader("demo-7c9f8d6b4-x2k9q", hash.clone());
        let mut b = leader("demo-7c9f8d6b4-h8m2p", hash);
        admit_pod(&mut a).unwrap();
        admit_pod(&mut b).unwrap();
        let key = |p: &Value| {
            p["metadata"]["labels"][GROUP_KEY]
                .as_str()
                .unwrap()
                .to_string()
        };
        let (ka, kb) = (key(&a), key(&b));
        assert_eq!(ka.len(), 40);
        assert!(ka.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(ka, kb, "each group its own key");
        assert_eq!(a["metadata"]["labels"][GROUP_INDEX], ka);
        assert_eq!(
            a["spec"]["readinessGates"],
            json!([{"conditionType": GROUP_READY}])
        );
        assert_eq!(
            a["spec"]["schedulingGates"],
            json!([{"name": REPLACEMENT_GATE}])
        );
        assert_eq!(a["spec"]["subdomain"], hash_group_service("demo", &ka));
        assert_eq!(
            a["metadata"]["labels"][SUBGROUP_KEY],
            subgroup_key(&ka, 0),
            "subgroups follow the key, not the pod name"
        );
        let addr = &a["spec"]["containers"][0]["env"][0];
        assert_eq!(addr["name"], "LWS_LEADER_ADDRESS");
        assert_eq!(addr["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
        // Immediate replacement: no scheduling gate.
        let mut c = leader("demo-1", json!({GROUP_IDENTITY: "Hash"}));
        admit_pod(&mut c).unwrap();
        assert!(c["spec"].get("schedulingGates").is_none());
        assert_eq!(c["spec"]["readinessGates"][0]["conditionType"], GROUP_READY);
    }

    #[test]
    fn hash_workers_reach_their_leader_by_ip() {
        let key = new_group_key();
        let mut w = worker(
            "demo-7c9f8d6b4-x2k9q-2",
            "demo-7c9f8d6b4-x2k9q",
            json!({GROUP_IDENTITY: "Hash", LEADER_ADDRESS: "10.0.3.7", SUBGROUP_SIZE: "3"}),
        );
        w["metadata"]["labels"][GROUP_KEY] = json!(key);
        w["metadata"]["labels"][GROUP_INDEX] = json!(key);
        admit_pod(&mut w).unwrap();
        assert_eq!(
            env(&w, 0)[0],
            ("LWS_LEADER_ADDRESS".into(), "10.0.3.7".into())
        );
        assert_eq!(env(&w, 0)[2], ("LWS_WORKER_INDEX".into(), "2".into()));
        assert_eq!(w["metadata"]["labels"][SUBGROUP_KEY], subgroup_key(&key, 0));
        assert!(
            w["spec"].get("readinessGates").is_none(),
            "only leaders wait for the group"
        );
        // Without the leader's address the worker is refused, never started wrong.
        let mut w = worker("demo-x-1", "demo-x", json!({GROUP_IDENTITY: "Hash"}));
        let err = admit_pod(&mut w).unwrap_err();
        assert_eq!(err.field, format!("metadata.annotations[{LEADER_ADDRESS}]"));
    }

    #[test]
    fn hash_group_services_are_dns_labels() {
        let key = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(hash_group_service("demo", key), "demo-0123456789ab");
        let long = "a".repeat(70);
        let svc = hash_group_service(&long, key);
        assert_eq!(svc.len(), 63);
        assert!(svc.ends_with("-0123456789ab"));
    }

    #[test]
    fn spec_scheduling_pods_name_their_workload_pod_group() {
        let mut l = leader(
            "demo-1",
            json!({crate::lws_scheduling::GANG_SCOPE: "group"}),
        );
        admit_pod(&mut l).unwrap();
        assert_eq!(
            l["spec"]["schedulingGroup"],
            json!({"podGroupName": "demo-1-abc"})
        );
        assert!(l["metadata"]["annotations"].get(GANG_GROUP_NAME).is_none());
        let mut w = worker(
            "demo-1-2",
            "demo-1",
            json!({crate::lws_scheduling::GANG_SCOPE: "worker"}),
        );
        admit_pod(&mut w).unwrap();
        assert_eq!(
            w["spec"]["schedulingGroup"]["podGroupName"],
            "demo-1-abc-worker"
        );
    }
}
