use super::*;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": "a"}}})).unwrap()
}

/// A node's slice of GPUs: (name, model, numa).
fn slice(node: &str, gpus: &[(&str, &str, i64)]) -> Arc<ResourceSlice> {
    let devices: Vec<Value> = gpus
        .iter()
        .map(|(n, model, numa)| {
            json!({"name": n, "attributes": {"model": {"string": model}, "numa": {"int": numa}},
                                        "capacity": {"memory": {"value": "40Gi"}}})
        })
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{node}-gpu")},
        "spec": {"driver": "gpu.minik8s.io", "nodeName": node,
                 "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                 "devices": devices}}))
        .unwrap(),
    )
}

fn class() -> Arc<DeviceClass> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.minik8s.io'"}}]}}))
        .unwrap(),
    )
}

fn claim(name: &str, devices: Value) -> Arc<ResourceClaim> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": devices}}))
        .unwrap(),
    )
}

fn pod(claims: &[&str]) -> Pod {
    let rc: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "resourceClaimName": c}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [], "resourceClaims": rc}}),
    )
    .unwrap()
}

fn needs(
    pod: &Pod,
    claims: &[Arc<ResourceClaim>],
    inv: &Inventory,
) -> Result<Option<PodDevices>, String> {
    let cache = Mutex::new(MatchCache::default());
    prepare(
        pod,
        |k| {
            claims
                .iter()
                .find(|c| format!("ns/{}", c.metadata.name.as_deref().unwrap()) == k)
                .cloned()
        },
        |n| (n == "gpu").then(class),
        inv,
        &cache,
    )
}

fn devices(allocation: &Value) -> Vec<String> {
    devices_of_allocation(allocation)
        .into_iter()
        .map(|d| d.2)
        .collect()
}

#[test]
fn two_of_one_model_land_where_two_are_free() {
    let inv = Inventory::new(&[
        slice(
            "n1",
            &[
                ("gpu-0", "a100", 0),
                ("gpu-1", "a100", 0),
                ("gpu-2", "t4", 0),
            ],
        ),
        slice("n2", &[("gpu-0", "a100", 0), ("gpu-1", "a100", 0)]),
    ]);
    let c = claim(
        "two",
        json!({"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.minik8s.io'].model == 'a100'"}}]}}]}),
    );
    let needs = needs(&pod(&["two"]), &[c], &inv).unwrap().unwrap();
    let taken: HashSet<DeviceId> = [("gpu.minik8s.io".into(), "n1".into(), "gpu-1".into())].into();
    assert_eq!(
        allocate(&needs, &node("n1"), &inv, &|d| taken.contains(d)),
        Err(CANNOT_ALLOCATE)
    );
    let got = allocate(&needs, &node("n2"), &inv, &|d| taken.contains(d)).unwrap();
    assert_eq!(got[0].0, "ns/two");
    assert_eq!(devices(&got[0].1), ["gpu-0", "gpu-1"]);
    assert_eq!(got[0].1["devices"]["results"][0]["request"], "gpus");
    assert_eq!(
        got[0].1["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
        "n2"
    );
}

#[test]
fn all_first_available_and_match_attribute() {
    let inv = Inventory::new(&[slice(
        "n1",
        &[
            ("gpu-0", "a100", 0),
            ("gpu-1", "t4", 1),
            ("gpu-2", "t4", 1),
            ("gpu-3", "a100", 1),
        ],
    )]);
    let none: HashSet<DeviceId> = HashSet::new();
    // All: every device the class matches.
    let all = claim(
        "all",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    let n = needs(&pod(&["all"]), &[all], &inv).unwrap().unwrap();
    assert_eq!(
        devices(&allocate(&n, &node("n1"), &inv, &|d| none.contains(d)).unwrap()[0].1).len(),
        4
    );
    // firstAvailable: three h100 are not there, two t4 are.
    let first = claim(
        "first",
        json!({"requests": [{"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "count": 3, "selectors": [{"cel": {"expression": "device.attributes['gpu.minik8s.io'].model == 'h100'"}}]},
        {"name": "small", "deviceClassName": "gpu", "count": 2, "selectors": [{"cel": {"expression": "device.attributes['gpu.minik8s.io'].model == 't4'"}}]}]}]}),
    );
    let n = needs(&pod(&["first"]), &[first], &inv).unwrap().unwrap();
    let got = allocate(&n, &node("n1"), &inv, &|d| none.contains(d)).unwrap();
    assert_eq!(got[0].1["devices"]["results"][0]["request"], "r/small");
    assert_eq!(devices(&got[0].1), ["gpu-1", "gpu-2"]);
    // Two devices on one NUMA node: numa 0 has one, numa 1 has three.
    let same = claim(
        "same",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}],
        "constraints": [{"matchAttribute": "gpu.minik8s.io/numa"}]}),
    );
    let n = needs(&pod(&["same"]), &[same], &inv).unwrap().unwrap();
    assert_eq!(
        devices(&allocate(&n, &node("n1"), &inv, &|d| none.contains(d)).unwrap()[0].1),
        ["gpu-1", "gpu-2"]
    );
}

#[test]
fn two_claims_of_one_pod_take_different_devices_and_admin_access_takes_none() {
    let inv = Inventory::new(&[slice("n1", &[("gpu-0", "a100", 0), ("gpu-1", "a100", 0)])]);
    let one = json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]});
    let claims = [claim("a", one.clone()), claim("b", one)];
    let n = needs(&pod(&["a", "b"]), &claims, &inv).unwrap().unwrap();
    let got = allocate(&n, &node("n1"), &inv, &|_| false).unwrap();
    assert_eq!(
        (devices(&got[0].1), devices(&got[1].1)),
        (vec!["gpu-0".to_string()], vec!["gpu-1".to_string()])
    );
    let all_taken: HashSet<DeviceId> = inv.devices.iter().map(|d| d.id.clone()).collect();
    let admin = claim(
        "admin",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "adminAccess": true}}]}),
    );
    let n = needs(&pod(&["admin"]), &[admin], &inv).unwrap().unwrap();
    let got = allocate(&n, &node("n1"), &inv, &|d| all_taken.contains(d)).unwrap();
    assert_eq!(got[0].1["devices"]["results"][0]["adminAccess"], true);
    assert!(
        devices_of_allocation(&got[0].1).is_empty(),
        "admin access holds no device"
    );
}

#[test]
fn allocated_claims_hold_their_node_and_missing_objects_stop_the_pod() {
    let inv = Inventory::new(&[slice("n1", &[("gpu-0", "a100", 0)])]);
    let mut allocated: ResourceClaim = (*claim(
        "held",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}),
    ))
    .clone();
    allocated.status = serde_json::from_value(
        json!({"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}),
    )
    .unwrap();
    let n = needs(&pod(&["held"]), &[Arc::new(allocated)], &inv)
        .unwrap()
        .unwrap();
    assert!(allocate(&n, &node("n1"), &inv, &|_| false)
        .unwrap()
        .is_empty());
    assert_eq!(
        allocate(&n, &node("n2"), &inv, &|_| false),
        Err(NOT_ON_NODE)
    );
    assert_eq!(
        needs(&pod(&["gone"]), &[], &inv).err().unwrap(),
        "resourceclaim.resource.k8s.io \"gone\" not found"
    );
    let other = claim(
        "other",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "fpga"}}]}),
    );
    assert_eq!(
        needs(&pod(&["other"]), &[other], &inv).err().unwrap(),
        "request r: device class fpga does not exist"
    );
    assert!(needs(&pod(&[]), &[], &inv).unwrap().is_none());
}

#[test]
fn only_a_pools_newest_generation_counts() {
    let old = slice("n1", &[("gpu-0", "a100", 0)]);
    let mut newer = (*slice("n1", &[("gpu-9", "a100", 0)])).clone();
    newer.metadata.name = Some("n1-gpu-2".into());
    newer.spec.pool.generation = 1;
    let inv = Inventory::new(&[old, Arc::new(newer)]);
    let names: Vec<&str> = inv.devices.iter().map(|d| d.id.2.as_str()).collect();
    assert_eq!(names, ["gpu-9"]);
}
