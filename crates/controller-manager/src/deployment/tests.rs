//! The naming and matching rules of the Deployment controller.

use super::*;

#[test]
fn new_replica_sets_are_found_by_template_whatever_their_hash_label() {
    let template: PodTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    .unwrap();
    let mut labelled = template.clone();
    labelled
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(TEMPLATE_HASH.into(), "abc".into());
    assert_eq!(
        template_without_hash(Some(&template)),
        template_without_hash(Some(&labelled))
    );
    let mut other = template.clone();
    other.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    assert_ne!(
        template_without_hash(Some(&template)),
        template_without_hash(Some(&other))
    );
}

#[test]
fn template_hashes_are_stable_and_a_collision_moves_them() {
    let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let h = template_hash(&t, 0);
    assert_eq!(h, template_hash(&t, 0));
    assert_ne!(h, template_hash(&t, 1));
    assert!(h.chars().all(|c| c.is_ascii_alphanumeric()), "{h}");
}

#[test]
fn strategy_numbers_follow_the_defaults_and_recreate() {
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    assert_eq!(strategy_numbers(&d), (true, 3, 2));
    let mut r = d.clone();
    r.spec.strategy = serde_json::from_value(json!({"type": "Recreate"})).unwrap();
    assert_eq!(strategy_numbers(&r), (false, 0, 0));
}
