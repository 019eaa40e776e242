//! Dynamic Resource Allocation (Kubernetes' DynamicResources plugin), as pure
//! functions: which devices a pod's claims can have on a node.
//!
//! ```text
//!  ResourceSlices ─▶ Inventory (devices per node; pools at their newest generation)
//!  pod's claims ──▶ prepare(): claims and classes looked up, selectors matched once per
//!                   inventory (class selectors AND request selectors, CEL over each device)
//!                   ─ a missing claim or class: unschedulable (pod-wide)
//!  per node ─────▶ allocate(): allocated claims must be usable on the node; the others get
//!                   free matching devices (ExactCount n, All, firstAvailable in order,
//!                   matchAttribute constraints) ─ else "cannot allocate all claims"
//!  chosen node ──▶ the allocation is written to each claim's status (PreBind) with reservedFor
//! ```

use k8s_openapi::api::core::v1::{Node, NodeSelector, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequest, DeviceSelector, ResourceClaim, ResourceSlice,
};
use minik8s_api::node_selection::term_matches;
use minik8s_cel::device::{device_value, Selector};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// A device: (driver, pool, name).
pub type DeviceId = (String, String, String);

/// One published device.
pub struct DeviceEntry {
    pub id: DeviceId,
    /// The selectors' `device` variable.
    value: minik8s_cel::device::DeviceValue,
    /// Attribute values by qualified name (`domain/id`), for matchAttribute.
    attributes: HashMap<String, Value>,
    /// Published for one node (its allocation is tied to that node).
    node_local: bool,
}

/// Every device the ResourceSlices publish, by where it can be used.
#[derive(Default)]
pub struct Inventory {
    pub devices: Vec<DeviceEntry>,
    node_local: HashMap<String, Vec<usize>>,
    everywhere: Vec<usize>,
    selected: Vec<(NodeSelector, Vec<usize>)>,
}

impl Inventory {
    /// Builds the inventory; of each pool only the slices of its newest
    /// generation count (a driver republishing a pool bumps it).
    pub fn new(slices: &[Arc<ResourceSlice>]) -> Inventory {
        let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
        for s in slices {
            let g = newest
                .entry((s.spec.driver.as_str(), s.spec.pool.name.as_str()))
                .or_insert(i64::MIN);
            *g = (*g).max(s.spec.pool.generation);
        }
        let mut inv = Inventory::default();
        let mut sorted: Vec<&Arc<ResourceSlice>> = slices.iter().collect();
        sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for s in sorted {
            let spec = &s.spec;
            if newest.get(&(spec.driver.as_str(), spec.pool.name.as_str()))
                != Some(&spec.pool.generation)
            {
                continue;
            }
            let node = spec.node_name.as_deref().filter(|n| !n.is_empty());
            let mut indices = Vec::new();
            for d in spec.devices.iter().flatten() {
                let attributes = d
                    .attributes
                    .iter()
                    .flatten()
                    .map(|(k, a)| {
                        let (domain, id) = minik8s_api::dra::qualify(&spec.driver, k);
                        (
                            format!("{domain}/{id}"),
                            serde_json::to_value(a).unwrap_or_default(),
                        )
                    })
                    .collect();
                indices.push(inv.devices.len());
                inv.devices.push(DeviceEntry {
                    id: (spec.driver.clone(), spec.pool.name.clone(), d.name.clone()),
                    value: device_value(&spec.driver, d),
                    attributes,
                    node_local: node.is_some(),
                });
            }
            match (node, &spec.node_selector, spec.all_nodes) {
                (Some(n), _, _) => inv
                    .node_local
                    .entry(n.to_string())
                    .or_default()
                    .extend(indices),
                (None, Some(sel), _) => inv.selected.push((sel.clone(), indices)),
                (None, None, Some(true)) => inv.everywhere.extend(indices),
                _ => {}
            }
        }
        inv
    }

    /// The devices usable on `node`.
    fn on_node(&self, node: &Node) -> Vec<usize> {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let mut out: Vec<usize> = self.node_local.get(name).cloned().unwrap_or_default();
        out.extend(&self.everywhere);
        for (sel, idx) in &self.selected {
            if sel
                .node_selector_terms
                .iter()
                .any(|t| term_matches(t, node))
            {
                out.extend(idx);
            }
        }
        out
    }
}

/// Which devices match a set of selectors, computed once per inventory.
pub struct Matching {
    pub matches: Vec<bool>,
    /// The first CEL runtime error, reported with the failure.
    pub error: Option<String>,
}

/// Compiled selectors and match results, kept across scheduling attempts
/// (dropped when the inventory changes).
#[derive(Default)]
pub struct MatchCache {
    compiled: HashMap<String, Arc<Selector>>,
    results: HashMap<String, Arc<Matching>>,
}

impl MatchCache {
    pub fn inventory_changed(&mut self) {
        self.results.clear();
    }

    fn selector(&mut self, source: &str) -> Result<Arc<Selector>, String> {
        if let Some(s) = self.compiled.get(source) {
            return Ok(s.clone());
        }
        let s = Arc::new(Selector::compile(source)?);
        self.compiled.insert(source.to_string(), s.clone());
        Ok(s)
    }

    /// Which devices match all of `sources`.
    fn matching(&mut self, inv: &Inventory, sources: &[String]) -> Result<Arc<Matching>, String> {
        let key = sources.join("\n&&\n");
        if let Some(m) = self.results.get(&key) {
            return Ok(m.clone());
        }
        let selectors: Vec<Arc<Selector>> = sources
            .iter()
            .map(|s| self.selector(s))
            .collect::<Result<_, _>>()?;
        let mut error = None;
        let matches = inv
            .devices
            .iter()
            .map(|d| {
                selectors.iter().all(|s| match s.matches(&d.value) {
                    Ok(b) => b,
                    Err(e) => {
                        error.get_or_insert(format!("device {}: {e}", d.id.2));
                        false
                    }
                })
            })
            .collect();
        let m = Arc::new(Matching { matches, error });
        self.results.insert(key, m.clone());
        Ok(m)
    }
}

/// One way to satisfy a request: `exactly`, or one of `firstAvailable`.
#[derive(Clone)]
pub struct Alternative {
    /// `req` or `req/sub`, as the allocation result names it.
    pub name: String,
    pub class: String,
    /// `All` (every matching device) or a count.
    pub all: bool,
    pub count: usize,
    pub admin: bool,
    pub matching: Arc<Matching>,
}

#[derive(Clone)]
pub struct Request {
    pub name: String,
    pub alternatives: Vec<Alternative>,
}

/// A claim to allocate.
#[derive(Clone)]
pub struct ToAllocate {
    pub key: String,
    pub claim: Arc<ResourceClaim>,
    pub requests: Vec<Request>,
    /// (qualified attribute, the requests it covers; empty: all).
    pub constraints: Vec<(String, Vec<String>)>,
    /// Config entries of the classes used, by class name.
    pub class_configs: HashMap<String, Vec<Value>>,
}

/// What a pod's claims need.
#[derive(Clone, Default)]
pub struct PodDevices {
    /// Allocated claims: where their allocation may be used.
    pub allocated: Vec<(String, Option<NodeSelector>)>,
    pub to_allocate: Vec<ToAllocate>,
    /// Every claim the pod uses (key, claim), to reserve.
    pub claims: Vec<(String, Arc<ResourceClaim>)>,
}

/// A claim's allocation for one node: its key and `status.allocation`.
pub type Allocation = (String, Value);

fn sources(selectors: Option<&Vec<DeviceSelector>>) -> Vec<String> {
    selectors
        .into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
        .collect()
}

/// The pod's claims, looked up and their selectors matched: Err(message)
/// when the pod cannot be placed anywhere yet.
pub fn prepare(
    pod: &Pod,
    claim: impl Fn(&str) -> Option<Arc<ResourceClaim>>,
    class: impl Fn(&str) -> Option<Arc<DeviceClass>>,
    inv: &Inventory,
    cache: &Mutex<MatchCache>,
) -> Result<Option<PodDevices>, String> {
    let entries = minik8s_api::dra::pod_claim_entries(pod);
    if entries.is_empty() {
        return Ok(None);
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let mut out = PodDevices::default();
    for (entry, _) in entries {
        let Some(name) = minik8s_api::dra::pod_claim_name(pod, &entry) else {
            return Err(format!(
                "pod \"{ns}/{pod_name}\": waiting for the resource claim of entry \"{entry}\" to be created"
            ));
        };
        let key = format!("{ns}/{name}");
        let Some(c) = claim(&key) else {
            return Err(format!(
                "resourceclaim.resource.k8s.io \"{name}\" not found"
            ));
        };
        if c.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim \"{name}\" is being deleted"));
        }
        let status = c.status.as_ref();
        let reserved = status
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or(&[]);
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or("");
        if !reserved.iter().any(|r| r.uid == pod_uid)
            && reserved.len() >= minik8s_api::dra::RESERVED_FOR_MAX
        {
            return Err(format!(
                "resourceclaim \"{name}\" is in use by too many pods"
            ));
        }
        out.claims.push((key.clone(), c.clone()));
        if let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) {
            out.allocated.push((key, allocation.node_selector.clone()));
            continue;
        }
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        out.to_allocate
            .push(to_allocate(key, &c, &class, inv, &mut cache)?);
    }
    Ok(Some(out))
}

/// One way a request may be met, as the claim asks it.
struct Asked<'a> {
    name: String,
    class: &'a str,
    all: bool,
    count: Option<i64>,
    admin: bool,
    selectors: Option<&'a Vec<DeviceSelector>>,
}

/// A request's ways: `exactly`, or each of `firstAvailable` (`req/sub`), in order.
fn asked(r: &DeviceRequest) -> Vec<Asked<'_>> {
    let mut out = Vec::new();
    if let Some(e) = &r.exactly {
        out.push(Asked {
            name: r.name.clone(),
            class: &e.device_class_name,
            all: e.allocation_mode.as_deref() == Some("All"),
            count: e.count,
            admin: e.admin_access == Some(true),
            selectors: e.selectors.as_ref(),
        });
    }
    for s in r.first_available.iter().flatten() {
        out.push(Asked {
            name: format!("{}/{}", r.name, s.name),
            class: &s.device_class_name,
            all: s.allocation_mode.as_deref() == Some("All"),
            count: s.count,
            admin: false,
            selectors: s.selectors.as_ref(),
        });
    }
    out
}

/// An unallocated claim's requests with the devices each way matches (its
/// class's selectors and its own), its constraints and its classes' configs.
fn to_allocate(
    key: String,
    claim: &Arc<ResourceClaim>,
    class: &impl Fn(&str) -> Option<Arc<DeviceClass>>,
    inv: &Inventory,
    cache: &mut MatchCache,
) -> Result<ToAllocate, String> {
    let devices = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.clone())
        .unwrap_or_default();
    let mut requests = Vec::new();
    let mut class_configs = HashMap::new();
    for r in devices.requests.iter().flatten() {
        let mut alternatives = Vec::new();
        for a in asked(r) {
            let Some(dc) = class(a.class) else {
                return Err(format!(
                    "request {}: device class {} does not exist",
                    a.name, a.class
                ));
            };
            let spec = dc.spec.clone().unwrap_or_default();
            let mut all_sources = sources(spec.selectors.as_ref());
            all_sources.extend(sources(a.selectors));
            let matching = cache
                .matching(inv, &all_sources)
                .map_err(|e| format!("request {}: {e}", a.name))?;
            class_configs.entry(a.class.to_string()).or_insert_with(|| {
                spec.config
                    .iter()
                    .flatten()
                    .filter_map(|c| serde_json::to_value(&c.opaque).ok())
                    .collect()
            });
            alternatives.push(Alternative {
                name: a.name,
                class: a.class.to_string(),
                all: a.all,
                count: a.count.unwrap_or(1).max(1) as usize,
                admin: a.admin,
                matching,
            });
        }
        requests.push(Request {
            name: r.name.clone(),
            alternatives,
        });
    }
    let constraints = devices
        .constraints
        .iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c.match_attribute.clone()?,
                c.requests.clone().unwrap_or_default(),
            ))
        })
        .collect();
    Ok(ToAllocate {
        key,
        claim: claim.clone(),
        requests,
        constraints,
        class_configs,
    })
}

/// What the filters need to check a pod's claims on each node.
pub struct NodeCheck<'a> {
    pub needs: &'a PodDevices,
    pub inventory: &'a Inventory,
    pub in_use: &'a dyn Fn(&DeviceId) -> bool,
}

impl NodeCheck<'_> {
    pub fn fits(&self, node: &Node) -> Result<(), &'static str> {
        allocate(self.needs, node, self.inventory, self.in_use).map(|_| ())
    }
}

/// Why the pod's claims do not fit a node.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
pub const NOT_ON_NODE: &str = "resourceclaim not available on the node";

/// One request's chosen devices.
struct Picked {
    alternative: String,
    class: String,
    admin: bool,
    devices: Vec<usize>,
}

/// Does the constraint `(attr, requests)` cover request `name`?
fn covers(c: &(String, Vec<String>), name: &str) -> bool {
    c.1.is_empty()
        || c.1
            .iter()
            .any(|r| r == name || name.starts_with(&format!("{r}/")))
}

/// Greedy allocation of one claim's requests on `candidates`, with each
/// constraint's attribute fixed to `values` (a device without the attribute
/// cannot serve a constrained request).
fn allocate_claim(
    claim: &ToAllocate,
    inv: &Inventory,
    candidates: &[usize],
    taken: &HashSet<usize>,
    values: &[Option<&Value>],
) -> Option<Vec<Picked>> {
    let mut used: HashSet<usize> = HashSet::new();
    let mut picked = Vec::new();
    for r in &claim.requests {
        let allowed = |i: usize, alt: &Alternative| {
            alt.matching.matches[i]
                && claim.constraints.iter().zip(values).all(|(c, v)| {
                    !covers(c, &alt.name) || inv.devices[i].attributes.get(&c.0) == *v
                })
        };
        let mut chosen = None;
        for alt in &r.alternatives {
            let free = |i: &usize| alt.admin || (!taken.contains(i) && !used.contains(i));
            let matching: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|i| allowed(*i, alt))
                .collect();
            let devices: Vec<usize> = if alt.all {
                // All: every matching device, and none may be taken.
                if matching.is_empty() || !matching.iter().all(free) {
                    continue;
                }
                matching
            } else {
                let free: Vec<usize> = matching.into_iter().filter(free).take(alt.count).collect();
                if free.len() < alt.count {
                    continue;
                }
                free
            };
            chosen = Some(Picked {
                alternative: alt.name.clone(),
                class: alt.class.clone(),
                admin: alt.admin,
                devices,
            });
            break;
        }
        let p = chosen?;
        if !p.admin {
            used.extend(&p.devices);
        }
        picked.push(p);
    }
    Some(picked)
}

/// The values a claim's constraints may take on `candidates` (each
/// constraint: every value some candidate has), as combinations to try.
fn constraint_choices<'a>(
    claim: &ToAllocate,
    inv: &'a Inventory,
    candidates: &[usize],
) -> Vec<Vec<Option<&'a Value>>> {
    let mut combos: Vec<Vec<Option<&Value>>> = vec![Vec::new()];
    for (attr, _) in &claim.constraints {
        let mut values: Vec<&Value> = candidates
            .iter()
            .filter_map(|i| inv.devices[*i].attributes.get(attr))
            .collect();
        values.sort_by_key(|v| v.to_string());
        values.dedup();
        let mut next = Vec::new();
        for combo in &combos {
            for v in &values {
                let mut c = combo.clone();
                c.push(Some(*v));
                next.push(c);
            }
        }
        combos = next;
        combos.truncate(1024);
    }
    combos
}

/// Allocates the pod's unallocated claims on `node`, with `in_use` devices
/// taken: each claim's `status.allocation`, or why it does not fit.
pub fn allocate(
    needs: &PodDevices,
    node: &Node,
    inv: &Inventory,
    in_use: &dyn Fn(&DeviceId) -> bool,
) -> Result<Vec<Allocation>, &'static str> {
    for (_, selector) in &needs.allocated {
        if let Some(sel) = selector {
            if !sel
                .node_selector_terms
                .iter()
                .any(|t| term_matches(t, node))
            {
                return Err(NOT_ON_NODE);
            }
        }
    }
    if needs.to_allocate.is_empty() {
        return Ok(Vec::new());
    }
    let candidates = inv.on_node(node);
    let mut taken: HashSet<usize> = candidates
        .iter()
        .copied()
        .filter(|i| in_use(&inv.devices[*i].id))
        .collect();
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for claim in &needs.to_allocate {
        let picked = constraint_choices(claim, inv, &candidates)
            .iter()
            .find_map(|values| allocate_claim(claim, inv, &candidates, &taken, values))
            .ok_or(CANNOT_ALLOCATE)?;
        for p in &picked {
            if !p.admin {
                taken.extend(&p.devices);
            }
        }
        out.push((
            claim.key.clone(),
            allocation_result(claim, &picked, inv, node_name),
        ));
    }
    Ok(out)
}

/// `status.allocation` for the picked devices: results, the configs of the
/// classes and the claim, and the node it is tied to.
fn allocation_result(claim: &ToAllocate, picked: &[Picked], inv: &Inventory, node: &str) -> Value {
    let mut results = Vec::new();
    let mut class_requests: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut node_local = false;
    for p in picked {
        class_requests
            .entry(&p.class)
            .or_default()
            .push(&p.alternative);
        for i in &p.devices {
            let d = &inv.devices[*i];
            node_local |= d.node_local;
            let mut r = json!({"request": p.alternative, "driver": d.id.0, "pool": d.id.1, "device": d.id.2});
            if p.admin {
                r["adminAccess"] = json!(true);
            }
            results.push(r);
        }
    }
    let mut config = Vec::new();
    for (class, requests) in class_requests {
        for opaque in claim.class_configs.get(class).into_iter().flatten() {
            config.push(json!({"source": "FromClass", "requests": requests, "opaque": opaque}));
        }
    }
    let claim_configs = claim
        .claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.config.as_ref());
    for c in claim_configs.into_iter().flatten() {
        let mut entry = json!({"source": "FromClaim", "opaque": c.opaque});
        if let Some(r) = &c.requests {
            entry["requests"] = json!(r);
        }
        config.push(entry);
    }
    let mut allocation = json!({"devices": {"results": results}});
    if !config.is_empty() {
        allocation["devices"]["config"] = json!(config);
    }
    if node_local {
        allocation["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]});
    }
    allocation
}

/// The devices an allocation takes (admin access takes none).
pub fn devices_of(claim: &ResourceClaim) -> Vec<DeviceId> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(|r| r.admin_access != Some(true))
        .map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone()))
        .collect()
}

/// The devices of an allocation decided here (its `status.allocation` JSON).
pub fn devices_of_allocation(allocation: &Value) -> Vec<DeviceId> {
    let results = allocation
        .pointer("/devices/results")
        .and_then(Value::as_array);
    results
        .into_iter()
        .flatten()
        .filter(|r| r.get("adminAccess") != Some(&json!(true)))
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            (s("driver"), s("pool"), s("device"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
