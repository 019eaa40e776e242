//! Victim selection against worked examples of Kubernetes' behaviour
//! (`default_preemption_test.go`'s cases, restated).

use super::*;
use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

/// A pod of `priority` that started at minute `started`, with `cpu` millicores.
fn pod(name: &str, prio: i32, started: u32, labels: serde_json::Value) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"priority": prio, "containers": []},
            "status": {"startTime": format!("2026-11-29T00:{started:02}:00Z")},
        }))
        .unwrap(),
    )
}

fn single(p: Arc<Pod>) -> Unit {
    Unit::new(vec![(p, "n1".into())])
}

fn names(v: &Victims) -> Vec<String> {
    v.pods()
        .map(|(p, _)| p.metadata.name.clone().unwrap())
        .collect()
}

/// Fits once the units gone free at least `need` cores (each pod's `cores` label).
fn frees(need: u32) -> impl FnMut(&[&Unit]) -> Result<(), Unfit> {
    move |gone| {
        let freed: u32 = gone
            .iter()
            .flat_map(|u| u.pods.iter())
            .map(|(p, _)| cores(p))
            .sum();
        if freed >= need {
            Ok(())
        } else {
            Err(Unfit::Insufficient("cpu"))
        }
    }
}

fn cores(p: &Pod) -> u32 {
    p.metadata.labels.as_ref().unwrap()["cores"]
        .parse()
        .unwrap()
}

fn budget(selector: serde_json::Value, allowed: i32) -> Budget {
    let pdb = PodDisruptionBudget {
        metadata: serde_json::from_value(json!({"name": "b", "namespace": "default"})).unwrap(),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(serde_json::from_value::<LabelSelector>(selector).unwrap()),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            ..Default::default()
        }),
    };
    Budget::of(&pdb).unwrap()
}

#[test]
fn the_least_important_pods_go_first_and_only_as_many_as_needed() {
    // Three pods of one core each; the preemptor needs one core.
    let units = vec![
        single(pod("a", 10, 1, json!({"cores": "1"}))),
        single(pod("b", 5, 1, json!({"cores": "1"}))),
        single(pod("c", 5, 2, json!({"cores": "1"}))),
    ];
    let v = select_victims(units.clone(), &[], frees(1)).unwrap();
    // b and c share the lowest priority; c started later, so it is the least important.
    assert_eq!(names(&v), ["c"]);
    assert_eq!(v.budget_violations, 0);
    // Two cores: the two least important.
    let v = select_victims(units.clone(), &[], frees(2)).unwrap();
    assert_eq!(names(&v), ["b", "c"]);
}

#[test]
fn a_budget_protected_pod_is_spared_when_another_victim_suffices() {
    // The guarded pod is the less important one, yet the budget keeps it.
    let units = vec![
        single(pod("guarded", 1, 5, json!({"cores": "1", "app": "db"}))),
        single(pod("free", 2, 1, json!({"cores": "1"}))),
    ];
    let budgets = [budget(json!({"matchLabels": {"app": "db"}}), 0)];
    let v = select_victims(units.clone(), &budgets, frees(1)).unwrap();
    assert_eq!(names(&v), ["free"]);
    assert_eq!(v.budget_violations, 0);
    // When both must go, the budget is broken and counted.
    let v = select_victims(units.clone(), &budgets, frees(2)).unwrap();
    assert_eq!(names(&v), ["free", "guarded"]);
    assert_eq!(v.budget_violations, 1);
    // An allowance of one lets one guarded pod go without a violation.
    let budgets = [budget(json!({"matchLabels": {"app": "db"}}), 1)];
    let v = select_victims(units.clone(), &budgets, frees(2)).unwrap();
    assert_eq!(v.budget_violations, 0);
}

#[test]
fn a_gang_goes_whole() {
    let gang = Unit::new(vec![
        (pod("g-0", 1, 1, json!({"cores": "1"})), "n1".into()),
        (pod("g-1", 1, 1, json!({"cores": "1"})), "n2".into()),
    ]);
    let units = vec![gang, single(pod("solo", 3, 1, json!({"cores": "2"})))];
    // Two cores: the gang (less important) frees them together.
    let v = select_victims(units.clone(), &[], frees(2)).unwrap();
    assert_eq!(names(&v), ["g-0", "g-1"]);
}

#[test]
fn no_candidate_without_lower_pods_or_when_removing_all_is_not_enough() {
    let none: Result<Victims, NotCandidate<Unfit>> = select_victims(vec![], &[], |_| Ok(()));
    assert_eq!(none.unwrap_err(), NotCandidate::NoVictims);
    let units = vec![single(pod("a", 1, 1, json!({"cores": "1"})))];
    let err = select_victims(units.clone(), &[], frees(4)).unwrap_err();
    assert_eq!(err, NotCandidate::StillUnfit(Unfit::Insufficient("cpu")));
}

fn victims(pods: Vec<Arc<Pod>>, violations: usize) -> Victims {
    Victims {
        units: pods.into_iter().map(single).collect(),
        budget_violations: violations,
    }
}

#[test]
fn the_node_losing_least_is_picked() {
    let p = |n: &str, prio, start| pod(n, prio, start, json!({"cores": "1"}));
    // Fewer budget violations beat everything else.
    let c = vec![
        ("n1".to_string(), victims(vec![p("a", 1, 1)], 1)),
        (
            "n2".to_string(),
            victims(vec![p("b", 9, 1), p("c", 9, 1)], 0),
        ),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
    // Then the lowest highest-priority victim.
    let c = vec![
        ("n1".to_string(), victims(vec![p("a", 7, 1)], 0)),
        (
            "n2".to_string(),
            victims(vec![p("b", 3, 1), p("c", 3, 1)], 0),
        ),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
    // Then the lowest sum of priorities (offset, so fewer pods weigh less).
    let c = vec![
        (
            "n1".to_string(),
            victims(vec![p("a", 3, 1), p("b", 3, 1)], 0),
        ),
        (
            "n2".to_string(),
            victims(vec![p("c", 3, 1), p("d", 1, 1)], 0),
        ),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
    // Then the fewest victims.
    let c = vec![
        (
            "n1".to_string(),
            victims(vec![p("a", 3, 1), p("b", -5, 1)], 0),
        ),
        ("n2".to_string(), victims(vec![p("c", 3, 1)], 0)),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
    // Then the latest-started most important victims; then the first node.
    let c = vec![
        ("n1".to_string(), victims(vec![p("a", 3, 1)], 0)),
        ("n2".to_string(), victims(vec![p("b", 3, 9)], 0)),
        ("n3".to_string(), victims(vec![p("c", 3, 9)], 0)),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
    // A node that needs no victim at all wins at once.
    let c = vec![
        ("n1".to_string(), victims(vec![p("a", 3, 1)], 0)),
        ("n2".to_string(), victims(vec![], 0)),
    ];
    assert_eq!(pick_candidate(&c), Some(1));
}

#[test]
fn eligibility_and_messages_are_kubernetes_words() {
    let mut never = (*pod("p", 100, 1, json!({}))).clone();
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    assert_eq!(
        ineligible(&never, false),
        Some("not eligible due to preemptionPolicy=Never.")
    );
    let p = pod("p", 100, 1, json!({}));
    assert_eq!(ineligible(&p, false), None);
    assert_eq!(
        ineligible(&p, true),
        Some("not eligible due to a terminating pod on the nominated node.")
    );
    let why = [
        NotCandidate::NoVictims,
        NotCandidate::NotHelpful,
        NotCandidate::NoVictims,
        NotCandidate::StillUnfit(Unfit::Insufficient("cpu")),
    ];
    assert_eq!(
        failure_message(4, &why),
        "preemption: 0/4 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
    );
    assert!(resolvable(&Unfit::Insufficient("memory")));
    assert!(!resolvable(&Unfit::Selector));
}
