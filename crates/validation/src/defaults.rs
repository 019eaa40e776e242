//! Defaulting: the values Kubernetes fills in when a field is left out, applied
//! on the JSON form before validation (as the real apiserver does at decode).
//!
//! On the JSON form rather than the typed object, on purpose: between the
//! defaults and validation come the mutating webhooks and policies, which
//! work on JSON (a webhook gets and patches the object as JSON, as in
//! Kubernetes). Typed defaults would decode each write twice (to default it,
//! and again after mutation to validate it), where now it is decoded once,
//! for validation and the stored form together (doc/benchmarks.md, "One
//! decode per write": 11 % less CPU per write). Each function names the
//! `SetDefaults_*` it follows; the tests pin the values.

use serde_json::{json, Map, Value};

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let m = v.as_object_mut().expect("defaulting works on objects");
    let entry = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

fn set_default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

/// SetDefaults_NetworkPolicy: ports are TCP unless said; `policyTypes`
/// unset means Ingress, plus Egress when egress rules are given.
fn default_network_policy(spec: &mut Map<String, Value>) {
    for (dir, _) in [("ingress", ()), ("egress", ())] {
        for rule in spec
            .get_mut(dir)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for port in rule
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                set_default(port, "protocol", json!("TCP"));
            }
        }
    }
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(|t| t.is_empty())
    {
        let mut types = vec![json!("Ingress")];
        if spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty())
        {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
    set_default(spec, "podSelector", json!({}));
}

/// Pod's defaults.
pub fn pod(obj: &mut Value) {
    default_pod_spec(obj_mut(obj, "spec"));
}

/// IngressClass's defaults.
pub fn ingress_class(obj: &mut Value) {
    // SetDefaults_IngressClass: parameters are cluster-scoped unless said.
    if let Some(p) = obj
        .pointer_mut("/spec/parameters")
        .and_then(Value::as_object_mut)
    {
        set_default(p, "scope", json!("Cluster"));
    }
}

/// Service's defaults.
pub fn service(obj: &mut Value) {
    default_service(obj_mut(obj, "spec"));
}

/// NetworkPolicy's defaults.
pub fn network_policy(obj: &mut Value) {
    default_network_policy(obj_mut(obj, "spec"));
}

/// ReplicaSet's defaults.
pub fn replica_set(obj: &mut Value) {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "replicas", json!(1));
    default_template(spec);
}

/// Deployment's defaults.
pub fn deployment(obj: &mut Value) {
    default_deployment(obj_mut(obj, "spec"));
}

/// DaemonSet's defaults.
pub fn daemon_set(obj: &mut Value) {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
    if let Some(us) = spec
        .get_mut("updateStrategy")
        .and_then(Value::as_object_mut)
    {
        if us.get("type") == Some(&json!("RollingUpdate")) {
            set_default(us, "rollingUpdate", json!({}));
            if let Some(ru) = us.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
        }
    }
    default_template(spec);
}

/// ReplicationController's defaults.
pub fn replication_controller(obj: &mut Value) {
    default_replication_controller(obj);
}

/// PriorityClass's defaults.
pub fn priority_class(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        set_default(m, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

/// LimitRange's defaults.
pub fn limit_range(obj: &mut Value) {
    let items = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut);
    for item in items.into_iter().flatten() {
        if let Some(item) = item.as_object_mut() {
            crate::limitrange::default_item(item);
        }
    }
}

/// PodTemplate's defaults.
pub fn pod_template(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        default_template(m);
    }
}

/// Job's defaults.
pub fn job(obj: &mut Value) {
    default_job(obj_mut(obj, "spec"));
}

/// CronJob's defaults.
pub fn cron_job(obj: &mut Value) {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "concurrencyPolicy", json!("Allow"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(t) = spec.get_mut("jobTemplate").filter(|t| t.is_object()) {
        default_template(obj_mut(t, "spec"));
    }
}

/// Secret's defaults.
pub fn secret(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        set_default(m, "type", json!("Opaque"));
    }
}

/// StatefulSet's defaults.
pub fn stateful_set(obj: &mut Value) {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "updateStrategy", json!({"type": "RollingUpdate"}));
    if let Some(us) = spec
        .get_mut("updateStrategy")
        .and_then(Value::as_object_mut)
    {
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            set_default(us, "rollingUpdate", json!({"partition": 0}));
            if let Some(ru) = us.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                set_default(ru, "partition", json!(0));
            }
        }
    }
    set_default(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    // Each claim template is defaulted as a claim (Kubernetes shows
    // them with their apiVersion and kind, volumeMode and a Pending
    // status): an update that sends them without (Helm's three-way
    // patch of a chart's templates) changes nothing.
    if let Some(templates) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for t in templates.iter_mut().filter(|t| t.is_object()) {
            if let Some(m) = t.as_object_mut() {
                set_default(m, "apiVersion", json!("v1"));
                set_default(m, "kind", json!("PersistentVolumeClaim"));
            }
            set_default(obj_mut(t, "spec"), "volumeMode", json!("Filesystem"));
            set_default(obj_mut(t, "status"), "phase", json!("Pending"));
        }
    }
    default_template(spec);
}

/// HorizontalPodAutoscaler's defaults.
pub fn horizontal_pod_autoscaler(obj: &mut Value) {
    default_hpa(obj_mut(obj, "spec"));
}

/// PersistentVolume's defaults.
pub fn persistent_volume(obj: &mut Value) {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    set_default(spec, "volumeMode", json!("Filesystem"));
}

/// PersistentVolumeClaim's defaults.
pub fn persistent_volume_claim(obj: &mut Value) {
    set_default(obj_mut(obj, "spec"), "volumeMode", json!("Filesystem"));
}

/// StorageClass's defaults.
pub fn storage_class(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        set_default(m, "reclaimPolicy", json!("Delete"));
        set_default(m, "volumeBindingMode", json!("Immediate"));
    }
}

/// Namespace's defaults.
pub fn namespace(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(name) = name {
        let meta = obj_mut(obj, "metadata");
        let labels = meta.entry("labels").or_insert(json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    let spec = obj_mut(obj, "spec");
    set_default(spec, "finalizers", json!(["kubernetes"]));
}

/// EndpointSlice's defaults.
pub fn endpoint_slice(obj: &mut Value) {
    if let Some(ports) = obj.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

/// Endpoints's defaults.
pub fn endpoints(obj: &mut Value) {
    if let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) {
        for s in subsets {
            if let Some(ports) = s.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(p, "protocol", json!("TCP"));
                }
            }
        }
    }
}

/// apps/v1 Deployment defaults: RollingUpdate with 25 % surge and 25 %
/// unavailable, 10 old ReplicaSets kept, a 600 s progress deadline.
fn default_deployment(spec: &mut Map<String, Value>) {
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(spec, "strategy", json!({"type": "RollingUpdate"}));
    if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            set_default(strategy, "rollingUpdate", json!({}));
            if let Some(ru) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
            {
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    default_template(spec);
}

/// v1 ReplicationController defaults: one replica; the selector and the
/// object's labels default to the template's labels.
fn default_replication_controller(obj: &mut Value) {
    let template_labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = template_labels {
        let empty =
            |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_none_or(|m| m.is_empty()));
        if empty(obj.pointer("/spec/selector")) {
            obj_mut(obj, "spec").insert("selector".into(), labels.clone());
        }
        if empty(obj.pointer("/metadata/labels")) {
            obj_mut(obj, "metadata").insert("labels".into(), labels);
        }
    }
    let spec = obj_mut(obj, "spec");
    set_default(spec, "replicas", json!(1));
    default_template(spec);
}

/// batch/v1 Job defaults: one pod at a time to one completion, six retries.
fn default_job(spec: &mut Map<String, Value>) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    set_default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    if spec.get("podFailurePolicy").is_none_or(Value::is_null) {
        set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    }
    default_template(spec);
}

fn default_template(spec: &mut Map<String, Value>) {
    if let Some(t) = spec.get_mut("template").filter(|t| t.is_object()) {
        default_pod_spec(obj_mut(t, "spec"));
    }
}

/// PodSpec defaults (also used for every pod template).
pub fn default_pod_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c);
            }
        }
    }
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            // A volume with no source is an emptyDir, as in Kubernetes.
            let has_source = v.keys().any(|k| k != "name");
            if !has_source {
                v.insert("emptyDir".into(), json!({}));
            }
        }
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // `:latest` or no tag means Always, as in Kubernetes.
    let last = image.rsplit('/').next().unwrap_or("");
    let untagged_or_latest =
        !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"));
    set_default(
        c,
        "imagePullPolicy",
        json!(if untagged_or_latest {
            "Always"
        } else {
            "IfNotPresent"
        }),
    );
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    // Requests default to limits for each resource that has a limit.
    if let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) {
        if let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() {
            let req = res.entry("requests").or_insert(json!({}));
            if let Some(req) = req.as_object_mut() {
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        for e in env {
            if let Some(fr) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                set_default(fr, "apiVersion", json!("v1"));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_default(p, "timeoutSeconds", json!(1));
            set_default(p, "periodSeconds", json!(10));
            set_default(p, "successThreshold", json!(1));
            set_default(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
                set_default(h, "path", json!("/"));
                set_default(h, "scheme", json!("HTTP"));
            }
        }
    }
}

fn default_service(spec: &mut Map<String, Value>) {
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity") == Some(&json!("ClientIP")) {
        let config = spec
            .entry("sessionAffinityConfig")
            .or_insert_with(|| json!({}));
        if let Some(config) = config.as_object_mut() {
            let client = config.entry("clientIP").or_insert_with(|| json!({}));
            if let Some(client) = client.as_object_mut() {
                // Kubernetes' DefaultClientIPServiceAffinitySeconds: 3 hours.
                set_default(client, "timeoutSeconds", json!(10800));
            }
        }
    }
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if ty != "ExternalName" {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                set_default(p, "targetPort", port);
            }
        }
    }
}

fn default_hpa(spec: &mut Map<String, Value>) {
    set_default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    // Behavior defaults apply only when a behavior is given (autoscaling/v2 defaulting).
    if let Some(b) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        let up = b.entry("scaleUp").or_insert(json!({}));
        if let Some(up) = up.as_object_mut() {
            set_default(up, "stabilizationWindowSeconds", json!(0));
            set_default(up, "selectPolicy", json!("Max"));
            set_default(
                up,
                "policies",
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
        let down = b.entry("scaleDown").or_insert(json!({}));
        if let Some(down) = down.as_object_mut() {
            set_default(down, "stabilizationWindowSeconds", json!(300));
            set_default(down, "selectPolicy", json!("Max"));
            set_default(
                down,
                "policies",
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "100m"}}}, {"name": "d", "image": "x:1.2"}]}});
        crate::default::<k8s_openapi::api::core::v1::Pod>(&mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            pod["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "100m"
        );
    }

    #[test]
    fn service_and_namespace_defaults() {
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        crate::default::<k8s_openapi::api::core::v1::Service>(&mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        let mut ns = json!({"metadata": {"name": "team-a"}});
        crate::default::<k8s_openapi::api::core::v1::Namespace>(&mut ns);
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team-a"})
        );
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    }

    #[test]
    fn hpa_defaults() {
        let mut hpa = json!({"spec": {"maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}}}});
        crate::default::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(&mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            10
        );
        assert_eq!(
            hpa["spec"]["behavior"]["scaleUp"]["policies"][0]["value"],
            4
        );
    }

    /// Helm's upgrade patches a StatefulSet with its chart's claim templates,
    /// which name no apiVersion or kind; the stored ones have them (as on
    /// Kubernetes). Defaulted alike, only the replicas differ: allowed.
    #[test]
    fn claim_templates_default_alike_so_a_replicas_change_is_allowed() {
        let sts = |replicas: i64| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "nb"},
                "spec": {"replicas": replicas, "serviceName": "nb",
                    "selector": {"matchLabels": {"app": "nb"}},
                    "template": {"metadata": {"labels": {"app": "nb"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Mi"}}}}]}})
        };
        // As stored: the typed round trip of a create writes them.
        let mut old = sts(1);
        old["spec"]["volumeClaimTemplates"][0]["apiVersion"] = json!("v1");
        old["spec"]["volumeClaimTemplates"][0]["kind"] = json!("PersistentVolumeClaim");
        crate::default::<k8s_openapi::api::apps::v1::StatefulSet>(&mut old);
        let claim = &old["spec"]["volumeClaimTemplates"][0];
        assert_eq!(
            (
                &claim["apiVersion"],
                &claim["kind"],
                &claim["status"]["phase"]
            ),
            (
                &json!("v1"),
                &json!("PersistentVolumeClaim"),
                &json!("Pending")
            )
        );
        let mut new = sts(2);
        crate::default::<k8s_openapi::api::apps::v1::StatefulSet>(&mut new);
        let errs = crate::validate::<k8s_openapi::api::apps::v1::StatefulSet>(&new, Some(&old));
        assert!(errs.is_empty(), "{errs:?}");
        // A different claim template is still refused.
        new["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
            json!("1Gi");
        let errs = crate::validate::<k8s_openapi::api::apps::v1::StatefulSet>(&new, Some(&old));
        assert!(!errs.is_empty());
    }
}
