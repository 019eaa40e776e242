//! What upstream LWS's pod webhook does, built into pod admission: every pod
//! carrying `leaderworkerset.sigs.k8s.io/name` gets its group labels, its
//! exclusive-placement affinity and the `LWS_*` environment at creation.
//!
//! ```text
//!   leader  L-1     worker-index=0  group-index=1  group-key=sha1(ns/L-1)
//!   worker  L-1-2   worker-index=2  (group-index, group-key from its StatefulSet)
//!   every container: LWS_LEADER_ADDRESS=L-1.<subdomain>.<ns>, LWS_GROUP_SIZE, LWS_WORKER_INDEX
//! ```
//!
//! The names it writes are `minik8s_api::lws_pod`'s, shared with the controllers.

use minik8s_api::field::FieldError;
use minik8s_api::lws_pod::*;
use minik8s_api::lws_scheduling::GangScope;
use serde_json::{json, Map, Value};

const TPU_DEFAULT_PORT: i64 = 8476;

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
        if ann(GROUP_REPLACEMENT).as_deref() == Some(minik8s_api::lws::POST_TERMINATION) {
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
        || str_at(pod, "/spec/schedulerName") == Some(minik8s_api::podgroup::VOLCANO_SCHEDULER);
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
    let hash = ann(GROUP_IDENTITY).as_deref() == Some(minik8s_api::lws::HASH);
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
    let scope = annotations[minik8s_api::lws_scheduling::GANG_SCOPE]
        .as_str()
        .map(str::to_string);
    let revision = pod["metadata"]["labels"][REVISION_KEY]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let volcano =
        str_at(pod, "/spec/schedulerName") == Some(minik8s_api::podgroup::VOLCANO_SCHEDULER);
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
mod tests;
