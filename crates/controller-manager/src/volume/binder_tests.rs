use super::*;
use minik8s_client::events::EventType;
use serde_json::json;

fn claim(size: &str, modes: &[&str], class: Option<&str>) -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {"name": "data", "namespace": "default", "uid": "u1"},
        "spec": {"accessModes": modes, "resources": {"requests": {"storage": size}}, "storageClassName": class}}))
    .unwrap()
}

fn volume(name: &str, size: &str, modes: &[&str], class: &str) -> Arc<PersistentVolume> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": modes, "storageClassName": class,
                     "hostPath": {"path": format!("/srv/{name}")}},
            "status": {"phase": "Available"}}))
        .unwrap(),
    )
}

fn class(mode: &str, provisioner: &str) -> StorageClass {
    serde_json::from_value(
        json!({"metadata": {"name": "fast"}, "provisioner": provisioner,
        "volumeBindingMode": mode, "reclaimPolicy": "Delete"}),
    )
    .unwrap()
}

#[test]
fn the_smallest_fitting_volume_is_bound() {
    let vols = vec![
        volume("big", "10Gi", &["ReadWriteOnce"], ""),
        volume("small", "2Gi", &["ReadWriteOnce", "ReadOnlyMany"], ""),
        volume("tiny", "512Mi", &["ReadWriteOnce"], ""),
        volume("other-class", "2Gi", &["ReadWriteOnce"], "fast"),
        volume("rwx", "1Gi", &["ReadWriteMany"], ""),
    ];
    let c = claim("1Gi", &["ReadWriteOnce"], None);
    assert_eq!(
        decide(&c, &vols, Class::None),
        ClaimStep::Bind("small".into())
    );
    let rwx = claim("1Gi", &["ReadWriteMany"], None);
    assert_eq!(
        decide(&rwx, &vols, Class::None),
        ClaimStep::Bind("rwx".into())
    );
}

#[test]
fn a_volume_pre_bound_to_the_claim_wins_and_one_bound_elsewhere_is_skipped() {
    let mut pre: PersistentVolume = (*volume("pre", "5Gi", &["ReadWriteOnce"], "")).clone();
    pre.spec.as_mut().unwrap().claim_ref =
        Some(serde_json::from_value(json!({"namespace": "default", "name": "data"})).unwrap());
    let mut taken: PersistentVolume = (*volume("taken", "1Gi", &["ReadWriteOnce"], "")).clone();
    taken.spec.as_mut().unwrap().claim_ref = Some(
        serde_json::from_value(json!({"namespace": "default", "name": "other", "uid": "u2"}))
            .unwrap(),
    );
    let vols = vec![
        Arc::new(taken),
        volume("free", "1Gi", &["ReadWriteOnce"], ""),
        Arc::new(pre),
    ];
    let c = claim("1Gi", &["ReadWriteOnce"], None);
    assert_eq!(
        decide(&c, &vols, Class::None),
        ClaimStep::Bind("pre".into())
    );
}

#[test]
fn without_a_volume_the_class_decides() {
    let c = claim("1Gi", &["ReadWriteOnce"], Some("fast"));
    assert_eq!(
        decide(&c, &[], Class::Missing("fast")),
        ClaimStep::Wait(
            EventType::Warning,
            "ProvisioningFailed",
            "storageclass.storage.k8s.io \"fast\" not found".into()
        )
    );
    let wffc = class("WaitForFirstConsumer", local_path::PROVISIONER);
    assert!(matches!(
        decide(&c, &[], Class::Found(&wffc)),
        ClaimStep::Wait(_, "WaitForFirstConsumer", _)
    ));
    let mut chosen = c.clone();
    chosen.metadata.annotations = Some([(SELECTED_NODE.to_string(), "node-2".to_string())].into());
    assert_eq!(
        decide(&chosen, &[], Class::Found(&wffc)),
        ClaimStep::Provision(Some("node-2".into()))
    );
    let immediate = class("Immediate", local_path::PROVISIONER);
    assert_eq!(
        decide(&c, &[], Class::Found(&immediate)),
        ClaimStep::Provision(None)
    );
    let external = class("Immediate", "example.com/nfs");
    assert!(matches!(
        decide(&c, &[], Class::Found(&external)),
        ClaimStep::Wait(EventType::Normal, "ExternalProvisioning", _)
    ));
    let rwx = claim("1Gi", &["ReadWriteMany"], Some("fast"));
    assert!(matches!(
        decide(&rwx, &[], Class::Found(&immediate)),
        ClaimStep::Wait(EventType::Warning, "ProvisioningFailed", _)
    ));
}

#[test]
fn delayed_binding_leaves_static_volumes_to_the_scheduler() {
    let vols = vec![volume("local-1", "5Gi", &["ReadWriteOnce"], "fast")];
    let c = claim("1Gi", &["ReadWriteOnce"], Some("fast"));
    let wffc = class("WaitForFirstConsumer", "kubernetes.io/no-provisioner");
    assert!(matches!(
        decide(&c, &vols, Class::Found(&wffc)),
        ClaimStep::Wait(_, "WaitForFirstConsumer", _)
    ));
    let immediate = class("Immediate", "kubernetes.io/no-provisioner");
    assert_eq!(
        decide(&c, &vols, Class::Found(&immediate)),
        ClaimStep::Bind("local-1".into())
    );
}

#[test]
fn a_bound_claim_grows_only_with_an_expandable_class() {
    let mut c = claim("3Gi", &["ReadWriteOnce"], Some("fast"));
    c.spec.as_mut().unwrap().volume_name = Some("v".into());
    let mut v: PersistentVolume = (*volume("v", "1Gi", &["ReadWriteOnce"], "fast")).clone();
    v.spec.as_mut().unwrap().claim_ref = Some(
        serde_json::from_value(json!({"namespace": "default", "name": "data", "uid": "u1"}))
            .unwrap(),
    );
    let vols = vec![Arc::new(v)];
    let mut sc = class("Immediate", local_path::PROVISIONER);
    assert_eq!(
        decide(&c, &vols, Class::Found(&sc)),
        ClaimStep::Bound {
            volume: "v".into(),
            grow_to: None
        }
    );
    sc.allow_volume_expansion = Some(true);
    assert_eq!(
        decide(&c, &vols, Class::Found(&sc)),
        ClaimStep::Bound {
            volume: "v".into(),
            grow_to: Some("3Gi".into())
        }
    );
    assert!(matches!(
        decide(&c, &[], Class::Found(&sc)),
        ClaimStep::Lost("ClaimLost", _)
    ));
}

#[test]
fn released_volumes_follow_their_reclaim_policy() {
    use super::super::reclaim::{decide as volume_decide, VolumeStep};
    let bound = |policy: &str, provisioned: bool| -> PersistentVolume {
        let mut v: PersistentVolume = (*volume("v", "1Gi", &["ReadWriteOnce"], "")).clone();
        let spec = v.spec.as_mut().unwrap();
        spec.claim_ref = Some(
            serde_json::from_value(json!({"namespace": "default", "name": "data", "uid": "u1"}))
                .unwrap(),
        );
        spec.persistent_volume_reclaim_policy = Some(policy.into());
        v.status.as_mut().unwrap().phase = Some("Bound".into());
        if provisioned {
            v.metadata.annotations = Some(
                [(
                    PROVISIONED_BY.to_string(),
                    local_path::PROVISIONER.to_string(),
                )]
                .into(),
            );
        }
        v
    };
    let mut c = claim("1Gi", &["ReadWriteOnce"], None);
    c.spec.as_mut().unwrap().volume_name = Some("v".into());
    assert_eq!(
        volume_decide(&bound("Retain", false), Some(&c)),
        VolumeStep::Nothing
    );
    assert_eq!(
        volume_decide(&bound("Retain", false), None),
        VolumeStep::Phase("Released", None)
    );
    assert_eq!(
        volume_decide(&bound("Delete", true), None),
        VolumeStep::Phase("Released", None)
    );
    let mut released = bound("Delete", true);
    released.status.as_mut().unwrap().phase = Some("Released".into());
    assert_eq!(volume_decide(&released, None), VolumeStep::Delete);
    // A new claim of the same name is not the old one.
    let mut recreated = c.clone();
    recreated.metadata.uid = Some("u9".into());
    assert_eq!(
        volume_decide(&released, Some(&recreated)),
        VolumeStep::Delete
    );
    let mut by_hand = bound("Delete", false);
    by_hand.status.as_mut().unwrap().phase = Some("Released".into());
    assert!(matches!(
        volume_decide(&by_hand, None),
        VolumeStep::Phase("Failed", Some(_))
    ));
}

#[test]
fn a_claim_is_in_use_until_its_pods_finish() {
    use super::super::protection::claim_in_use;
    let pod = |phase: &str| -> Arc<Pod> {
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}, "status": {"phase": phase}})).unwrap())
    };
    assert!(claim_in_use("data", &[pod("Running")]));
    assert!(claim_in_use("data", &[pod("Pending")]));
    assert!(!claim_in_use("data", &[pod("Succeeded")]));
    assert!(!claim_in_use("other", &[pod("Running")]));
}

#[test]
fn local_path_volumes_are_pinned_directories_pre_bound_to_their_claim() {
    let c = claim("1Gi", &["ReadWriteOnce"], Some("local-path"));
    let sc: StorageClass = serde_json::from_value(local_path::default_class()).unwrap();
    let v = local_path::volume_for(&c, &sc, "node-1", "/var/lib/minik8s/storage");
    assert_eq!(v["metadata"]["name"], "pvc-u1");
    assert_eq!(
        v["spec"]["hostPath"]["path"],
        "/var/lib/minik8s/storage/pvc-u1_default_data"
    );
    assert_eq!(v["spec"]["claimRef"]["uid"], "u1");
    assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    let pv: PersistentVolume = serde_json::from_value(v).unwrap();
    assert_eq!(pinned_node(&pv).as_deref(), Some("node-1"));
    let helper = local_path::cleanup_pod(&pv).unwrap();
    assert_eq!(helper["spec"]["nodeName"], "node-1");
    assert_eq!(
        helper["spec"]["containers"][0]["command"],
        json!(["rm", "-rf", "/data/pvc-u1_default_data"])
    );
    assert_eq!(
        helper["spec"]["volumes"][0]["hostPath"]["path"],
        "/var/lib/minik8s/storage"
    );
}
