//! The HPA decisions against worked examples of Kubernetes' behaviour.
use super::*;
use chrono::TimeZone;
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscaler};
use serde_json::json;
use std::time::Duration;

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

/// A running, long-ready pod using `usage` milli-units of a `request`.
fn pod(name: &str, usage: Option<i64>, request: i64) -> PodSample {
    PodSample {
        name: name.into(),
        phase: "Running".into(),
        deleting: false,
        ready: Some(("True".into(), t(-3600))),
        start_time: Some(t(-3600)),
        request: Some(request),
        usage: usage.map(|u| (u, t(0))),
    }
}

fn grouping(cpu: bool) -> Grouping {
    Grouping {
        cpu,
        now: t(0),
        window: Duration::from_secs(10),
        cpu_initialization_period: Duration::from_secs(300),
        initial_readiness_delay: Duration::from_secs(30),
    }
}

fn replicas(pods: &[PodSample], current: i32, target: Target) -> i32 {
    replicas_for_metric(
        pods,
        current,
        target,
        Tolerance::uniform(0.1),
        grouping(true),
    )
    .unwrap()
    .replicas
}

#[test]
fn desired_replicas_math() {
    // 3 pods at 90 % of 100m against 50 %: ceil(3 × 1.8) = 6.
    let p: Vec<_> = (0..3)
        .map(|i| pod(&format!("p{i}"), Some(90), 100))
        .collect();
    assert_eq!(replicas(&p, 3, Target::Utilization(50)), 6);
    let r = replicas_for_metric(
        &p,
        3,
        Target::Utilization(50),
        Tolerance::uniform(0.1),
        grouping(true),
    )
    .unwrap();
    assert_eq!((r.utilization, r.average), (Some(90), 90));
    // Within the tolerance (ratio 1.08): no change.
    let p: Vec<_> = (0..3)
        .map(|i| pod(&format!("p{i}"), Some(54), 100))
        .collect();
    assert_eq!(replicas(&p, 3, Target::Utilization(50)), 3);
    // Just outside (ratio 1.12): ceil(3 × 1.12) = 4.
    let p: Vec<_> = (0..3)
        .map(|i| pod(&format!("p{i}"), Some(56), 100))
        .collect();
    assert_eq!(replicas(&p, 3, Target::Utilization(50)), 4);
    // Scale down: 4 pods at 10 % against 50 %: ceil(4 × 0.2) = 1.
    let p: Vec<_> = (0..4)
        .map(|i| pod(&format!("p{i}"), Some(10), 100))
        .collect();
    assert_eq!(replicas(&p, 4, Target::Utilization(50)), 1);
    // AverageValue: 2 pods at 300m against 100m: ceil(2 × 3) = 6.
    let p: Vec<_> = (0..2)
        .map(|i| pod(&format!("p{i}"), Some(300), 100))
        .collect();
    assert_eq!(replicas(&p, 2, Target::AverageValue(100)), 6);
}

#[test]
fn missing_and_unready_pods_are_pessimistic() {
    // Scale up: the missing pod counts as 0 → ratio (200+0)/(2×100)/0.5 = 2 → ceil(2 × 2) = 4.
    let p = vec![pod("a", Some(200), 100), pod("b", None, 100)];
    assert_eq!(replicas(&p, 2, Target::Utilization(50)), 4);
    // Scale down: the missing pod counts as using its request (100 %) → ratio
    // (10+100)/200/0.5 = 1.1 flips direction → keep 2.
    let p = vec![pod("a", Some(10), 100), pod("b", None, 100)];
    assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
    // An unready pod counts as 0 when scaling up.
    let mut starting = pod("b", Some(500), 100);
    starting.ready = Some(("False".into(), t(-5)));
    starting.start_time = Some(t(-20));
    let p = vec![pod("a", Some(100), 100), starting];
    // ratio of the ready pod: 2 → with b at 0: 100/200/0.5 = 1 → within tolerance → keep 2.
    assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
    // A pending pod is unready; a deleting or failed pod is ignored.
    let mut pending = pod("c", None, 100);
    pending.phase = "Pending".into();
    let mut deleting = pod("d", Some(1000), 100);
    deleting.deleting = true;
    let p = vec![pod("a", Some(50), 100), pending, deleting];
    assert_eq!(replicas(&p, 2, Target::Utilization(50)), 2);
    // Missing requests are an error for Utilization.
    let mut no_request = pod("a", Some(50), 100);
    no_request.request = None;
    assert!(replicas_for_metric(
        &[no_request],
        1,
        Target::Utilization(50),
        Tolerance::uniform(0.1),
        grouping(true)
    )
    .is_err());
    assert!(replicas_for_metric(
        &[],
        1,
        Target::Utilization(50),
        Tolerance::uniform(0.1),
        grouping(true)
    )
    .is_err());
}

#[test]
fn cpu_samples_right_after_readiness_are_distrusted() {
    // Ready 5 s ago, sample taken now: less than one 10 s window → unready for cpu.
    let mut fresh = pod("a", Some(500), 100);
    fresh.start_time = Some(t(-30));
    fresh.ready = Some(("True".into(), t(-5)));
    assert!(replicas_for_metric(
        &[fresh.clone()],
        1,
        Target::Utilization(50),
        Tolerance::uniform(0.1),
        grouping(true)
    )
    .is_err());
    // Memory does not care.
    assert_eq!(
        replicas_for_metric(
            &[fresh],
            1,
            Target::Utilization(50),
            Tolerance::uniform(0.1),
            grouping(false)
        )
        .unwrap()
        .replicas,
        10
    );
}

fn rules(window: i32, select: &str, policies: &[(&str, i32, i32)]) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: Some(select.into()),
        tolerance: None,
        policies: Some(
            policies
                .iter()
                .map(
                    |(ty, v, p)| k8s_openapi::api::autoscaling::v2::HPAScalingPolicy {
                        type_: ty.to_string(),
                        value: *v,
                        period_seconds: *p,
                    },
                )
                .collect(),
        ),
    }
}

fn default_up() -> HPAScalingRules {
    rules(0, "Max", &[("Pods", 4, 15), ("Percent", 100, 15)])
}

fn default_down(window: i32) -> HPAScalingRules {
    rules(window, "Max", &[("Percent", 100, 15)])
}

#[test]
fn behavior_rate_policies() {
    let mut r = Recommender::default();
    // Max of (1 + 4 pods, 1 × 200 %) = 5.
    let (n, c) = r.normalize_with_behavior(t(0), 1, 20, (1, 100), &default_up(), &default_down(0));
    assert_eq!(n, 5);
    assert_eq!(
        c[1],
        (
            "ScalingLimited",
            "True",
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate"
        )
    );
    // Min picks the smaller: min(5, 2) = 2.
    let up_min = rules(0, "Min", &[("Pods", 4, 15), ("Percent", 100, 15)]);
    let (n, _) = Recommender::default().normalize_with_behavior(
        t(0),
        1,
        20,
        (1, 100),
        &up_min,
        &default_down(0),
    );
    assert_eq!(n, 2);
    // Disabled: no scale-up at all.
    let up_off = rules(0, "Disabled", &[("Pods", 4, 15)]);
    let (n, _) = Recommender::default().normalize_with_behavior(
        t(0),
        3,
        20,
        (1, 100),
        &up_off,
        &default_down(0),
    );
    assert_eq!(n, 3);
    // Events within the period count against the limit: scaled 1 → 5 at t0;
    // at t10 the period started at 1, so at most 5 still.
    let mut r = Recommender::default();
    r.scaled(t(0), 1, 5);
    let (n, _) = r.normalize_with_behavior(t(10), 5, 20, (1, 100), &default_up(), &default_down(0));
    assert_eq!(n, 5);
    // After the period: 5 + 4 = 9 vs 5 × 2 = 10 → 10.
    let (n, _) = r.normalize_with_behavior(t(20), 5, 20, (1, 100), &default_up(), &default_down(0));
    assert_eq!(n, 10);
    // Max replicas wins over the rate.
    let (n, c) = Recommender::default().normalize_with_behavior(
        t(0),
        4,
        20,
        (1, 6),
        &default_up(),
        &default_down(0),
    );
    assert_eq!(n, 6);
    assert_eq!(c[1].2, "TooManyReplicas");
}

#[test]
fn behavior_scale_down_policies_and_min() {
    // Pods policy: at most 1 pod per 60 s.
    let down = rules(0, "Max", &[("Pods", 1, 60)]);
    let mut r = Recommender::default();
    let (n, c) = r.normalize_with_behavior(t(0), 5, 1, (1, 10), &default_up(), &down);
    assert_eq!(n, 4);
    assert_eq!(c[1].2, "ScaleDownLimit");
    r.scaled(t(0), 5, 4);
    let (n, _) = r.normalize_with_behavior(t(30), 4, 1, (1, 10), &default_up(), &down);
    assert_eq!(n, 4, "the period's pod is spent");
    // Percent 50 % vs Pods 1, selectPolicy Max (biggest change) → 10 × 0.5 = 5.
    let down = rules(0, "Max", &[("Pods", 1, 60), ("Percent", 50, 60)]);
    let (n, _) =
        Recommender::default().normalize_with_behavior(t(0), 10, 1, (1, 10), &default_up(), &down);
    assert_eq!(n, 5);
    // selectPolicy Min (smallest change) → 9.
    let down = rules(0, "Min", &[("Pods", 1, 60), ("Percent", 50, 60)]);
    let (n, _) =
        Recommender::default().normalize_with_behavior(t(0), 10, 1, (1, 10), &default_up(), &down);
    assert_eq!(n, 9);
    // The minimum holds.
    let (n, c) = Recommender::default().normalize_with_behavior(
        t(0),
        4,
        0,
        (2, 10),
        &default_up(),
        &default_down(0),
    );
    assert_eq!(n, 2);
    assert_eq!(c[1].2, "TooFewReplicas");
}

#[test]
fn stabilization_windows() {
    let mut r = Recommender::default();
    let down = default_down(60);
    // Recommendations 5 then 2 within 60 s: stay at the highest (5).
    let (n, _) = r.normalize_with_behavior(t(0), 5, 5, (1, 10), &default_up(), &down);
    assert_eq!(n, 5);
    let (n, c) = r.normalize_with_behavior(t(30), 5, 2, (1, 10), &default_up(), &down);
    assert_eq!(n, 5);
    assert_eq!(c[0].2, "ScaleDownStabilized");
    // Once the 5 is older than the window, 2 applies.
    let (n, _) = r.normalize_with_behavior(t(61), 5, 2, (1, 10), &default_up(), &down);
    assert_eq!(n, 2);
    // A scale-up window holds back to the lowest recent recommendation.
    let mut r = Recommender::default();
    let up = rules(60, "Max", &[("Pods", 100, 15)]);
    r.normalize_with_behavior(t(0), 2, 2, (1, 10), &up, &default_down(0));
    let (n, c) = r.normalize_with_behavior(t(10), 2, 8, (1, 10), &up, &default_down(0));
    assert_eq!(n, 2);
    assert_eq!(c[0].2, "ScaleUpStabilized");
}

#[test]
fn without_behavior() {
    let mut r = Recommender::default();
    let w = Duration::from_secs(300);
    // Scale-up limit max(2 × 1, 4) = 4.
    let (n, c) = r.normalize(t(0), 1, 10, (1, 20), w);
    assert_eq!(n, 4);
    assert_eq!(c[1].2, "ScaleUpLimit");
    // Downscale window keeps the highest of the last 5 min.
    let mut r = Recommender::default();
    r.normalize(t(0), 4, 4, (1, 20), w);
    let (n, _) = r.normalize(t(100), 4, 1, (1, 20), w);
    assert_eq!(n, 4);
    let (n, _) = r.normalize(t(301), 4, 1, (1, 20), w);
    assert_eq!(n, 1);
    let (n, c) = Recommender::default().normalize(t(0), 3, 0, (2, 20), w);
    assert_eq!((n, c[1].2), (2, "TooFewReplicas"));
}

#[test]
fn decide_handles_bounds_and_disabled_targets() {
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({"metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"kind": "ReplicaSet", "name": "r", "apiVersion": "apps/v1"}, "minReplicas": 2, "maxReplicas": 5}})).unwrap();
    let mut r = Recommender::default();
    let w = Duration::from_secs(300);
    assert_eq!(
        decide(&mut r, &hpa, 0, &[], t(0), w).conditions[0].2,
        "ScalingDisabled"
    );
    assert_eq!(decide(&mut r, &hpa, 7, &[], t(0), w).desired, 5);
    assert_eq!(decide(&mut r, &hpa, 1, &[], t(0), w).desired, 2);
    let d = decide(
        &mut r,
        &hpa,
        3,
        &[
            ("cpu resource utilization (percentage of request)".into(), 4),
            ("memory resource".into(), 2),
        ],
        t(0),
        w,
    );
    assert_eq!(d.desired, 4);
    assert_eq!(
        d.reason,
        "cpu resource utilization (percentage of request) above target"
    );
}

#[test]
fn tolerances_apply_per_direction() {
    // Usage ratio 1.08: kept with the default 10 %, scaled up with a 5 % scale-up tolerance.
    let p = vec![pod("a", Some(54), 100), pod("b", Some(54), 100)];
    let up_5 = Tolerance {
        down: 0.1,
        up: 0.05,
    };
    let r = replicas_for_metric(&p, 2, Target::Utilization(50), up_5, grouping(true)).unwrap();
    assert_eq!(r.replicas, 3);
    // Ratio 0.92 over 20 pods: a 5 % scale-down tolerance scales down to
    // ceil(18.4) = 19, the default 10 % keeps 20.
    let p: Vec<_> = (0..20)
        .map(|i| pod(&format!("p{i}"), Some(46), 100))
        .collect();
    let down_5 = Tolerance {
        down: 0.05,
        up: 0.1,
    };
    let scaled = replicas_for_metric(&p, 20, Target::Utilization(50), down_5, grouping(true));
    assert_eq!(scaled.unwrap().replicas, 19);
    let kept = replicas_for_metric(
        &p,
        20,
        Target::Utilization(50),
        Tolerance::uniform(0.1),
        grouping(true),
    );
    assert_eq!(kept.unwrap().replicas, 20);
    // Read from the HPA's behavior (a Quantity), each direction on its own.
    let mut hpa = HorizontalPodAutoscaler::default();
    hpa.spec.behavior = Some(
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior {
            scale_up: Some(HPAScalingRules {
                tolerance: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    "0.05".into(),
                )),
                ..Default::default()
            }),
            scale_down: None,
        },
    );
    assert_eq!(
        Tolerance::of(&hpa, 0.1),
        Tolerance {
            down: 0.1,
            up: 0.05
        }
    );
}
