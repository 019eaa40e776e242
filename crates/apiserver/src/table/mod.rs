//! Server-side printing: `meta.k8s.io/v1` Table responses with the columns
//! kubectl users know (the registry lists the columns, this file the cells).

mod extensions;
mod networking;
mod pod;
mod resource;
pub mod storage;
mod workloads;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::Resource as _;
use minik8s_api::meta::{human_age, human_duration};
use minik8s_api::registry::ResourceInfo;
use minik8s_api::selector::Selector;
use serde_json::{json, Value};

/// Does the `Accept` header ask for a Table?
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .any(|part| part.contains("as=Table") && part.contains("g=meta.k8s.io"))
}

pub(super) fn s(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<none>".into(),
    }
}

pub(super) fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn age(obj: &Value) -> String {
    obj.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map(human_age)
        .unwrap_or_else(|| "<unknown>".into())
}

/// How long something ran: status.startTime to completionTime, or to now (Job's DURATION).
fn duration(o: &Value) -> String {
    let time = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => {
            human_duration((chrono::Utc::now() - start.with_timezone(&chrono::Utc)).num_seconds())
        }
        (Some(start), Some(end)) => human_duration((end - start).num_seconds()),
    }
}

fn join_field(items: &[Value], field: &str) -> String {
    let v: Vec<&str> = items
        .iter()
        .filter_map(|c| c.get(field).and_then(Value::as_str))
        .collect();
    if v.is_empty() {
        "<none>".into()
    } else {
        v.join(",")
    }
}

/// A label selector as kubectl prints it (a plain label map, as
/// ReplicationControllers and Services have, reads as matchLabels).
fn selector_string(sel: Option<&Value>) -> String {
    let plain = |v: &Value| v.get("matchLabels").is_none() && v.get("matchExpressions").is_none();
    sel.map(|v| {
        if plain(v) {
            json!({"matchLabels": v})
        } else {
            v.clone()
        }
    })
    .and_then(|v| serde_json::from_value(v).ok())
    .and_then(|ls| Selector::from_label_selector(&ls).ok())
    .map(|s| s.to_string())
    .filter(|s| !s.is_empty())
    .unwrap_or_else(|| "<none>".into())
}

pub use pod::pod_cells;

/// A kind's table cells after NAME (all of them when the kind places Name itself).
pub type Row = fn(&Value) -> Vec<Value>;

/// What makes one object's cells after NAME: a [`Row`] or a strategy's `cells`.
pub type Cells<'a> = &'a dyn Fn(&Value) -> Vec<Value>;

/// NAME, then the kind's cells.
fn cells(info: &ResourceInfo, row: Cells, o: &Value) -> Vec<Value> {
    if places_name(info) {
        return row(o);
    }
    let name = json!(o
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(""));
    let mut out = vec![name];
    out.extend(row(o));
    out
}

/// A kind whose columns list "Name" puts it where it wants (Events: last,
/// `-o wide` only); every other table starts with NAME.
fn places_name(info: &ResourceInfo) -> bool {
    info.columns.iter().any(|c| c.name == "Name")
}

/// The cells after NAME of one object, per kind (kubectl's printers): each
/// kind's strategy names its function.
pub mod rows {
    pub use super::extensions::*;
    pub use super::networking::{ingress, ingress_class, ip_address, service, service_cidr};
    pub use super::resource::{resource_claim, resource_slice};
    pub use super::storage::{
        csi_storage_capacity, persistent_volume, persistent_volume_claim, storage_class,
    };
    pub use super::workloads::{function, pod_group, role_scaler, workflow, workflow_run};
    use super::*;

    /// Pod.
    pub fn pod(o: &Value) -> Vec<Value> {
        let (ready, status, restarts) = pod_cells(o);
        vec![
            json!(ready),
            json!(status),
            json!(restarts),
            json!(age(o)),
            json!(s(o.pointer("/status/podIP"))),
            json!(s(o.pointer("/spec/nodeName"))),
            json!(s(o.pointer("/status/nominatedNodeName"))),
            json!(readiness_gates(o)),
        ]
    }

    /// READINESS GATES: how many of the pod's gates are True, of how many.
    fn readiness_gates(o: &Value) -> String {
        let gates = arr(o, "/spec/readinessGates");
        if gates.is_empty() {
            return "<none>".into();
        }
        let conditions = arr(o, "/status/conditions");
        let met = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    }

    /// Node.
    pub fn node(o: &Value) -> Vec<Value> {
        let ready = arr(o, "/status/conditions")
            .iter()
            .find(|c| c.get("type") == Some(&json!("Ready")))
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str);
        let mut status = match ready {
            Some("True") => "Ready".to_string(),
            Some("False") => "NotReady".to_string(),
            _ => "Unknown".to_string(),
        };
        if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
            status.push_str(",SchedulingDisabled");
        }
        let roles: Vec<String> = o
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.keys()
                    .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let addr = |t: &str| {
            s(arr(o, "/status/addresses")
                .iter()
                .find(|a| a.get("type") == Some(&json!(t)))
                .and_then(|a| a.get("address")))
        };
        vec![
            json!(status),
            json!(if roles.is_empty() {
                "<none>".into()
            } else {
                roles.join(",")
            }),
            json!(age(o)),
            json!(s(o.pointer("/status/nodeInfo/kubeletVersion"))),
            json!(addr("InternalIP")),
            json!(addr("ExternalIP")),
            json!(s(o.pointer("/status/nodeInfo/osImage"))),
            json!(s(o.pointer("/status/nodeInfo/kernelVersion"))),
            json!(s(o.pointer("/status/nodeInfo/containerRuntimeVersion"))),
        ]
    }

    /// Namespace.
    pub fn namespace(o: &Value) -> Vec<Value> {
        vec![json!(s(o.pointer("/status/phase"))), json!(age(o))]
    }

    /// Endpoints.
    pub fn endpoints(o: &Value) -> Vec<Value> {
        let mut eps = Vec::new();
        for sub in arr(o, "/subsets") {
            for a in arr(sub, "/addresses") {
                for p in arr(sub, "/ports") {
                    eps.push(format!("{}:{}", s(a.get("ip")), int(p, "/port")));
                }
                if arr(sub, "/ports").is_empty() {
                    eps.push(s(a.get("ip")));
                }
            }
        }
        vec![json!(abbreviate(&eps)), json!(age(o))]
    }

    /// EndpointSlice.
    pub fn endpoint_slice(o: &Value) -> Vec<Value> {
        let ports: Vec<String> = arr(o, "/ports")
            .iter()
            .map(|p| int(p, "/port").to_string())
            .collect();
        let eps: Vec<String> = arr(o, "/endpoints")
            .iter()
            .flat_map(|e| arr(e, "/addresses").iter().map(|a| s(Some(a))))
            .collect();
        vec![
            json!(s(o.get("addressType"))),
            json!(if ports.is_empty() {
                "<unset>".into()
            } else {
                ports.join(",")
            }),
            json!(abbreviate(&eps)),
            json!(age(o)),
        ]
    }

    /// Lease.
    pub fn lease(o: &Value) -> Vec<Value> {
        vec![json!(s(o.pointer("/spec/holderIdentity"))), json!(age(o))]
    }

    /// Event.
    pub fn event(o: &Value) -> Vec<Value> {
        let last = o
            .get("lastTimestamp")
            .or_else(|| o.get("eventTime"))
            .and_then(Value::as_str)
            .map(human_age)
            .unwrap_or_else(|| age(o));
        let obj = format!(
            "{}/{}",
            s(o.pointer("/involvedObject/kind")).to_lowercase(),
            s(o.pointer("/involvedObject/name"))
        );
        let raw = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
        let source = match (raw("/source/component"), raw("/source/host")) {
            (component, "") => component.to_string(),
            (component, host) => format!("{component}, {host}"),
        };
        let first = o
            .get("firstTimestamp")
            .and_then(Value::as_str)
            .map(human_age)
            .unwrap_or_else(|| age(o));
        vec![
            json!(last),
            json!(s(o.get("type"))),
            json!(s(o.get("reason"))),
            json!(obj),
            json!(raw("/involvedObject/fieldPath")),
            json!(source),
            json!(s(o.get("message"))),
            json!(first),
            json!(o.get("count").and_then(Value::as_i64).unwrap_or(1)),
            json!(s(o.pointer("/metadata/name"))),
        ]
    }

    /// ReplicaSet.
    pub fn replica_set(o: &Value) -> Vec<Value> {
        vec![
            json!(int(o, "/spec/replicas")),
            json!(int(o, "/status/replicas")),
            json!(int(o, "/status/readyReplicas")),
            json!(age(o)),
            json!(join_field(arr(o, "/spec/template/spec/containers"), "name")),
            json!(join_field(
                arr(o, "/spec/template/spec/containers"),
                "image"
            )),
            json!(selector_string(o.pointer("/spec/selector"))),
        ]
    }

    /// PriorityClass: its value, whether it is the default, its age and
    /// preemption policy.
    pub fn priority_class(o: &Value) -> Vec<Value> {
        vec![
            json!(o.get("value").and_then(Value::as_i64).unwrap_or(0)),
            json!(o
                .get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false)),
            json!(age(o)),
            json!(s(o.get("preemptionPolicy"))),
        ]
    }

    /// PodTemplate: its containers, their images and the pods' labels.
    pub fn pod_template(o: &Value) -> Vec<Value> {
        let labels = o
            .pointer("/template/metadata/labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| "<none>".into());
        vec![
            json!(join_field(arr(o, "/template/spec/containers"), "name")),
            json!(join_field(arr(o, "/template/spec/containers"), "image")),
            json!(labels),
        ]
    }

    /// Job: its state, completions and how long it ran (kubectl's columns).
    pub fn job(o: &Value) -> Vec<Value> {
        let has = |t: &str| {
            arr(o, "/status/conditions")
                .iter()
                .any(|c| c["type"] == t && c["status"] == "True")
        };
        let status = if has("Complete") {
            "Complete"
        } else if has("Failed") {
            "Failed"
        } else if o.pointer("/metadata/deletionTimestamp").is_some() {
            "Terminating"
        } else if has("Suspended") {
            "Suspended"
        } else if has("FailureTarget") {
            "FailureTarget"
        } else if has("SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else {
            "Running"
        };
        let succeeded = int(o, "/status/succeeded");
        let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
            Some(c) => format!("{succeeded}/{c}"),
            None => match int(o, "/spec/parallelism") {
                p if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let duration = duration(o);
        let containers = arr(o, "/spec/template/spec/containers");
        vec![
            json!(status),
            json!(completions),
            json!(duration),
            json!(age(o)),
            json!(join_field(containers, "name")),
            json!(join_field(containers, "image")),
            json!(selector_string(o.pointer("/spec/selector"))),
        ]
    }

    /// CronJob: schedule, time zone, suspension, active Jobs, last run.
    pub fn cron_job(o: &Value) -> Vec<Value> {
        let containers = arr(o, "/spec/jobTemplate/spec/template/spec/containers");
        let last = o
            .pointer("/status/lastScheduleTime")
            .and_then(Value::as_str)
            .map(human_age)
            .unwrap_or_else(|| "<none>".into());
        let suspend = o
            .pointer("/spec/suspend")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        vec![
            json!(s(o.pointer("/spec/schedule"))),
            json!(s(o.pointer("/spec/timeZone"))),
            json!(if suspend { "True" } else { "False" }),
            json!(arr(o, "/status/active").len()),
            json!(last),
            json!(age(o)),
            json!(join_field(containers, "name")),
            json!(join_field(containers, "image")),
            json!(selector_string(
                o.pointer("/spec/jobTemplate/spec/selector")
            )),
        ]
    }

    /// DaemonSet: scheduling and readiness counts, its node selector.
    pub fn daemon_set(o: &Value) -> Vec<Value> {
        let containers = arr(o, "/spec/template/spec/containers");
        let node_selector = o
            .pointer("/spec/template/spec/nodeSelector")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "<none>".into());
        vec![
            json!(int(o, "/status/desiredNumberScheduled")),
            json!(int(o, "/status/currentNumberScheduled")),
            json!(int(o, "/status/numberReady")),
            json!(int(o, "/status/updatedNumberScheduled")),
            json!(int(o, "/status/numberAvailable")),
            json!(node_selector),
            json!(age(o)),
            json!(join_field(containers, "name")),
            json!(join_field(containers, "image")),
            json!(selector_string(o.pointer("/spec/selector"))),
        ]
    }

    /// NetworkPolicy: the pods it selects (`<none>` for all of the namespace's).
    pub fn network_policy(o: &Value) -> Vec<Value> {
        let selector = selector_string(o.pointer("/spec/podSelector"));
        vec![json!(selector), json!(age(o))]
    }

    /// PodDisruptionBudget: its bound (the other one N/A) and the disruptions allowed now.
    pub fn pod_disruption_budget(o: &Value) -> Vec<Value> {
        let bound = |p: &str| match o.pointer(p) {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => "N/A".into(),
        };
        vec![
            json!(bound("/spec/minAvailable")),
            json!(bound("/spec/maxUnavailable")),
            json!(int(o, "/status/disruptionsAllowed")),
            json!(age(o)),
        ]
    }

    /// ConfigMap: how many keys.
    pub fn config_map(o: &Value) -> Vec<Value> {
        let keys = |p: &str| {
            o.pointer(p)
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
        };
        vec![json!(keys("/data") + keys("/binaryData")), json!(age(o))]
    }

    /// ResourceQuota: its age, then `resource: used/hard` of every limited
    /// resource, the `limits.*` ones in their own column (kubectl's order:
    /// by name).
    pub fn resource_quota(o: &Value) -> Vec<Value> {
        let hard = minik8s_api::quota::resource_list(o.pointer("/status/hard"));
        let used = minik8s_api::quota::resource_list(o.pointer("/status/used"));
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for (r, h) in &hard {
            let u = used.get(r).copied().unwrap_or_default();
            let cell = format!("{r}: {u}/{h}");
            if r.split('.').next() == Some("limits") && r.contains('.') {
                limits.push(cell);
            } else {
                requests.push(cell);
            }
        }
        vec![
            json!(age(o)),
            json!(requests.join(", ")),
            json!(limits.join(", ")),
        ]
    }

    /// RuntimeClass: its handler and age.
    pub fn runtime_class(o: &Value) -> Vec<Value> {
        vec![json!(s(o.get("handler"))), json!(age(o))]
    }

    /// LimitRange: when it was created (RFC 3339, UTC).
    pub fn limit_range(o: &Value) -> Vec<Value> {
        vec![json!(s(o.pointer("/metadata/creationTimestamp")))]
    }

    /// Secret: its type and how many keys.
    pub fn secret(o: &Value) -> Vec<Value> {
        let keys = o
            .pointer("/data")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len());
        vec![json!(s(o.get("type"))), json!(keys), json!(age(o))]
    }

    /// Role and ClusterRole: when they were created.
    pub fn role(o: &Value) -> Vec<Value> {
        vec![json!(s(o.pointer("/metadata/creationTimestamp")))]
    }

    /// RoleBinding and ClusterRoleBinding: the role, and (wide) the subjects by kind.
    pub fn role_binding(o: &Value) -> Vec<Value> {
        let subjects = |kind: &str| {
            let names: Vec<String> = arr(o, "/subjects")
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| match (s["namespace"].as_str(), s["name"].as_str()) {
                    (Some(ns), Some(n)) if kind == ServiceAccount::KIND => format!("{ns}/{n}"),
                    (_, n) => n.unwrap_or("").to_string(),
                })
                .collect();
            json!(names.join(", "))
        };
        vec![
            json!(format!(
                "{}/{}",
                s(o.pointer("/roleRef/kind")),
                s(o.pointer("/roleRef/name"))
            )),
            json!(age(o)),
            subjects("User"),
            subjects("Group"),
            subjects(ServiceAccount::KIND),
        ]
    }

    /// CertificateSigningRequest: signer, requestor, duration, conditions.
    pub fn certificate_signing_request(o: &Value) -> Vec<Value> {
        let duration = o
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map(minik8s_api::meta::human_duration)
            .unwrap_or_else(|| "<none>".into());
        let conditions: Vec<&str> = arr(o, "/status/conditions")
            .iter()
            .filter(|c| c["status"] != "False")
            .filter_map(|c| c["type"].as_str())
            .collect();
        let mut condition = if conditions.is_empty() {
            "Pending".to_string()
        } else {
            conditions.join(",")
        };
        if o.pointer("/status/certificate")
            .is_some_and(|c| c.as_str().is_some_and(|c| !c.is_empty()))
        {
            condition.push_str(",Issued");
        }
        vec![
            json!(age(o)),
            json!(s(o.pointer("/spec/signerName"))),
            json!(s(o.pointer("/spec/username"))),
            json!(duration),
            json!(condition),
        ]
    }

    /// ServiceAccount: how many token Secrets it lists.
    pub fn service_account(o: &Value) -> Vec<Value> {
        vec![json!(arr(o, "/secrets").len()), json!(age(o))]
    }

    /// Deployment.
    pub fn deployment(o: &Value) -> Vec<Value> {
        let containers = arr(o, "/spec/template/spec/containers");
        vec![
            json!(format!(
                "{}/{}",
                int(o, "/status/readyReplicas"),
                int(o, "/spec/replicas")
            )),
            json!(int(o, "/status/updatedReplicas")),
            json!(int(o, "/status/availableReplicas")),
            json!(age(o)),
            json!(join_field(containers, "name")),
            json!(join_field(containers, "image")),
            json!(selector_string(o.pointer("/spec/selector"))),
        ]
    }

    /// StatefulSet.
    pub fn stateful_set(o: &Value) -> Vec<Value> {
        vec![
            json!(format!(
                "{}/{}",
                int(o, "/status/readyReplicas"),
                int(o, "/spec/replicas")
            )),
            json!(age(o)),
            json!(join_field(arr(o, "/spec/template/spec/containers"), "name")),
            json!(join_field(
                arr(o, "/spec/template/spec/containers"),
                "image"
            )),
        ]
    }

    /// ControllerRevision.
    pub fn controller_revision(o: &Value) -> Vec<Value> {
        let owner = arr(o, "/metadata/ownerReferences")
            .iter()
            .find(|r| r.get("controller") == Some(&json!(true)));
        let controller = owner
            .map(|r| {
                let api = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
                let group = api
                    .split_once('/')
                    .map(|(g, _)| format!(".{g}"))
                    .unwrap_or_default();
                format!(
                    "{}{}/{}",
                    s(r.get("kind")).to_lowercase(),
                    group,
                    s(r.get("name"))
                )
            })
            .unwrap_or_else(|| "<none>".into());
        vec![json!(controller), json!(int(o, "/revision")), json!(age(o))]
    }

    /// HorizontalPodAutoscaler.
    pub fn horizontal_pod_autoscaler(o: &Value) -> Vec<Value> {
        let reference = format!(
            "{}/{}",
            s(o.pointer("/spec/scaleTargetRef/kind")),
            s(o.pointer("/spec/scaleTargetRef/name"))
        );
        vec![
            json!(reference),
            json!(hpa_targets(o)),
            json!(int(o, "/spec/minReplicas")),
            json!(int(o, "/spec/maxReplicas")),
            json!(int(o, "/status/currentReplicas")),
            json!(age(o)),
        ]
    }

    /// LeaderWorkerSet.
    pub fn leader_worker_set(o: &Value) -> Vec<Value> {
        vec![
            json!(int(o, "/status/readyReplicas")),
            json!(int(o, "/spec/replicas")),
            json!(int(o, "/status/updatedReplicas")),
            json!(age(o)),
        ]
    }

    /// Any kind without columns of its own: AGE.
    pub fn age_only(o: &Value) -> Vec<Value> {
        vec![json!(age(o))]
    }
}

fn abbreviate(items: &[String]) -> String {
    match items.len() {
        0 => "<none>".into(),
        n if n <= 3 => items.join(","),
        n => format!("{} + {} more...", items[..3].join(","), n - 3),
    }
}

/// `cpu: 12%/80%`, as kubectl prints HPA targets.
fn hpa_targets(o: &Value) -> String {
    let current = arr(o, "/status/currentMetrics");
    let parts: Vec<String> = arr(o, "/spec/metrics")
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let res = m
                .pointer("/resource/name")
                .and_then(Value::as_str)
                .unwrap_or("<unknown>");
            let target = m
                .pointer("/resource/target")
                .cloned()
                .unwrap_or(Value::Null);
            let cur = current
                .get(i)
                .and_then(|c| c.pointer("/resource/current"))
                .cloned()
                .unwrap_or(Value::Null);
            match target.get("type").and_then(Value::as_str) {
                Some("Utilization") => {
                    let c = cur
                        .get("averageUtilization")
                        .and_then(Value::as_i64)
                        .map(|u| format!("{u}%"))
                        .unwrap_or_else(|| "<unknown>".into());
                    format!("{res}: {c}/{}%", int(&target, "/averageUtilization"))
                }
                _ => {
                    let c = cur
                        .get("averageValue")
                        .and_then(Value::as_str)
                        .unwrap_or("<unknown>");
                    format!(
                        "{res}: {c}/{}",
                        s(target.get("averageValue").or_else(|| target.get("value")))
                    )
                }
            }
        })
        .collect();
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(", ")
    }
}

fn column_definitions(info: &ResourceInfo) -> Vec<Value> {
    let name = |priority: i32| json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": priority});
    let mut cols = Vec::new();
    if !places_name(info) {
        cols.push(name(0));
    }
    for c in info.columns.iter() {
        if c.name == "Name" {
            cols.push(name(c.priority));
        } else {
            cols.push(json!({"name": c.name, "type": c.kind, "format": "", "description": c.description, "priority": c.priority}));
        }
    }
    cols
}

/// A Table of `objects`; `with_headers` is false for watch events after the first.
pub fn render(
    info: &ResourceInfo,
    row: Cells,
    objects: &[&Value],
    resource_version: &str,
    with_headers: bool,
) -> Value {
    let rows = objects.iter().map(|o| self::row(info, row, o)).collect();
    with_rows(info, rows, resource_version, with_headers)
}

/// One object's row: its cells and its metadata (`includeObject=Metadata`).
pub fn row(info: &ResourceInfo, row: Cells, o: &Value) -> Value {
    json!({"cells": cells(info, row, o), "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or(json!({}))}})
}

/// A Table of rows made by [`row`].
pub fn with_rows(
    info: &ResourceInfo,
    rows: Vec<Value>,
    resource_version: &str,
    with_headers: bool,
) -> Value {
    let mut t = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version}, "rows": rows});
    if with_headers {
        t["columnDefinitions"] = Value::Array(column_definitions(info));
    } else {
        t["columnDefinitions"] = json!([]);
    }
    t
}
