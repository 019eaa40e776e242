//! The master's memory of recent traces, for the web view's journeys: the
//! spans of this process (through [`StoreExporter`]) and those the kubelets
//! send (OTLP, decoded by [`decode_otlp`]), kept per trace, the oldest
//! trace forgotten first. Bounded twice: so many traces, so many spans in
//! each (a Deployment of a thousand pods is one trace).

use opentelemetry::Value;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// One recorded step: a span as the view draws it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a trace's root.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent_span_id: String,
    /// apiserver, scheduler, controller-manager, kubelet, ...
    pub component: String,
    pub name: String,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    /// The step's fields (what was decided, about what).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// What happened during the step, in order (a node filtered out, a score).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventRecord>,
    /// Traces this step points at without joining them (`trace-span`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    pub name: String,
    pub time_unix_nano: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Attributes the layer adds that say nothing to a learner (where in the
/// source, which thread).
fn kept(key: &str) -> bool {
    !(key.starts_with("code.")
        || key.starts_with("thread.")
        || key == "busy_ns"
        || key == "idle_ns")
}

/// The component a span of this process belongs to: the crate whose code
/// opened it (the master runs the apiserver, the scheduler and the
/// controllers in one process), else the process's own name.
pub fn component_of(module: Option<&str>, process: &str) -> String {
    let krate = module.and_then(|m| m.split("::").next()).unwrap_or("");
    match krate {
        "apiserver" | "scheduler" | "kubelet" => krate.to_string(),
        "controller_manager" => "controller-manager".to_string(),
        "kube_proxy" => "kube-proxy".to_string(),
        _ => process.to_string(),
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn text(v: &Value) -> String {
    v.as_str().into_owned()
}

/// The component of a span of this process: its `component` field when
/// it names one (a loop run by shared code, the controllers' runner), else
/// the crate that opened it ([`component_of`]).
pub fn component_of_span(attributes: &[opentelemetry::KeyValue], process: &str) -> String {
    let get = |key: &str| {
        attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| text(&kv.value))
    };
    get("component").unwrap_or_else(|| component_of(get("code.module.name").as_deref(), process))
}

/// A span of this process as a record.
pub fn record_of(span: &SpanData, process: &str) -> SpanRecord {
    let attributes = span
        .attributes
        .iter()
        .filter(|kv| kept(kv.key.as_str()))
        .map(|kv| (kv.key.to_string(), text(&kv.value)))
        .collect();
    let events = span
        .events
        .iter()
        .map(|e| EventRecord {
            name: e.name.to_string(),
            time_unix_nano: nanos(e.timestamp),
            attributes: e
                .attributes
                .iter()
                .filter(|kv| {
                    kept(kv.key.as_str())
                        && kv.key.as_str() != "level"
                        && kv.key.as_str() != "target"
                })
                .map(|kv| (kv.key.to_string(), text(&kv.value)))
                .collect(),
        })
        .collect();
    let parent = span.parent_span_id;
    SpanRecord {
        trace_id: span.span_context.trace_id().to_string(),
        span_id: span.span_context.span_id().to_string(),
        parent_span_id: if parent == opentelemetry::trace::SpanId::INVALID {
            String::new()
        } else {
            parent.to_string()
        },
        component: component_of_span(&span.attributes, process),
        name: span.name.to_string(),
        start_unix_nano: nanos(span.start_time),
        end_unix_nano: nanos(span.end_time),
        attributes,
        events,
        links: span
            .links
            .iter()
            .map(|l| format!("{}-{}", l.span_context.trace_id(), l.span_context.span_id()))
            .collect(),
    }
}

fn any_text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .filter(|kv| kept(&kv.key) && kv.key != "level" && kv.key != "target")
        .map(|kv| (kv.key.clone(), any_text(&kv.value)))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of an OTLP/HTTP protobuf body (`ExportTraceServiceRequest`),
/// each named by its resource's `service.name` (the sender's component).
pub fn decode_otlp(body: &[u8]) -> Result<Vec<SpanRecord>, String> {
    use prost::Message;
    let req = ExportTraceServiceRequest::decode(body)
        .map_err(|e| format!("not an OTLP trace export: {e}"))?;
    let mut out = Vec::new();
    for rs in req.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
            .map(|kv| any_text(&kv.value))
            .unwrap_or_else(|| "unknown".to_string());
        for ss in rs.scope_spans {
            for s in ss.spans {
                if s.trace_id.len() != 16 || s.span_id.len() != 8 {
                    return Err("a span without a 16-byte trace id and an 8-byte span id".into());
                }
                out.push(SpanRecord {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    component: service.clone(),
                    name: s.name,
                    start_unix_nano: s.start_time_unix_nano,
                    end_unix_nano: s.end_time_unix_nano,
                    attributes: attrs(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| EventRecord {
                            name: e.name.clone(),
                            time_unix_nano: e.time_unix_nano,
                            attributes: attrs(&e.attributes),
                        })
                        .collect(),
                    links: s
                        .links
                        .iter()
                        .map(|l| format!("{}-{}", hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                });
            }
        }
    }
    Ok(out)
}

/// The OTLP answer to an export: empty when all was kept, else how many
/// spans were refused and why (OTLP's partial success).
pub fn export_response(rejected: usize, why: &str) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceResponse,
    };
    use prost::Message;
    let partial_success = (rejected > 0).then(|| ExportTracePartialSuccess {
        rejected_spans: rejected as i64,
        error_message: why.to_string(),
    });
    ExportTraceServiceResponse { partial_success }.encode_to_vec()
}

struct Inner {
    traces: HashMap<String, Vec<SpanRecord>>,
    /// Trace ids, oldest first.
    order: VecDeque<String>,
    /// Spans refused because their trace was full.
    dropped: u64,
}

/// Recent traces, bounded by count and by spans per trace.
pub struct SpanStore {
    inner: Mutex<Inner>,
    max_traces: usize,
    max_spans: usize,
}

impl std::fmt::Debug for SpanStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanStore")
            .field("max_traces", &self.max_traces)
            .field("max_spans", &self.max_spans)
            .finish()
    }
}

/// What the master keeps unless told otherwise: a few thousand traces of a
/// few hundred steps are some tens of MiB at most.
pub const DEFAULT_MAX_TRACES: usize = 2000;
pub const DEFAULT_MAX_SPANS: usize = 1000;

impl SpanStore {
    pub fn new(max_traces: usize, max_spans: usize) -> Arc<SpanStore> {
        Arc::new(SpanStore {
            inner: Mutex::new(Inner {
                traces: HashMap::new(),
                order: VecDeque::new(),
                dropped: 0,
            }),
            max_traces: max_traces.max(1),
            max_spans: max_spans.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `spans`, forgetting the oldest traces beyond the bound.
    pub fn add(&self, spans: impl IntoIterator<Item = SpanRecord>) {
        let mut inner = self.lock();
        for span in spans {
            if !inner.traces.contains_key(&span.trace_id) {
                inner.order.push_back(span.trace_id.clone());
                inner.traces.insert(span.trace_id.clone(), Vec::new());
                while inner.order.len() > self.max_traces {
                    if let Some(old) = inner.order.pop_front() {
                        inner.traces.remove(&old);
                    }
                }
            }
            let max = self.max_spans;
            let full = match inner.traces.get_mut(&span.trace_id) {
                Some(spans) if spans.len() < max => {
                    spans.push(span);
                    false
                }
                _ => true,
            };
            if full {
                inner.dropped += 1;
            }
        }
    }

    /// Every kept span of a trace, by start time.
    pub fn trace(&self, trace_id: &str) -> Vec<SpanRecord> {
        let mut spans = self
            .lock()
            .traces
            .get(trace_id)
            .cloned()
            .unwrap_or_default();
        spans.sort_by_key(|s| (s.start_unix_nano, s.end_unix_nano));
        spans
    }

    /// Whether a kept span of `trace_id` is one `f` looks for (no copy of
    /// the trace).
    pub fn any(&self, trace_id: &str, f: impl Fn(&SpanRecord) -> bool) -> bool {
        self.lock()
            .traces
            .get(trace_id)
            .is_some_and(|spans| spans.iter().any(f))
    }

    /// The spans of `trace_id` that descend from `span_id` (it included),
    /// by start time: one object's journey inside the trace of a larger
    /// one (a pod's, inside its Deployment's).
    pub fn journey(&self, trace_id: &str, span_id: &str) -> Vec<SpanRecord> {
        let spans = self.trace(trace_id);
        let mut children: HashMap<&str, Vec<&SpanRecord>> = HashMap::new();
        for s in &spans {
            children
                .entry(s.parent_span_id.as_str())
                .or_default()
                .push(s);
        }
        let mut keep = std::collections::HashSet::new();
        let mut todo = vec![span_id.to_string()];
        while let Some(id) = todo.pop() {
            if !keep.insert(id.clone()) {
                continue;
            }
            for c in children.get(id.as_str()).into_iter().flatten() {
                todo.push(c.span_id.clone());
            }
        }
        spans
            .into_iter()
            .filter(|s| keep.contains(&s.span_id))
            .collect()
    }

    /// The objects created in a trace, as its apiserver spans name them
    /// (`resource`, `namespace`, `name` attributes of a create).
    pub fn created_in(&self, trace_id: &str) -> Vec<(String, String, String)> {
        let inner = self.lock();
        let Some(spans) = inner.traces.get(trace_id) else {
            return Vec::new();
        };
        spans
            .iter()
            .filter(|s| {
                s.component == "apiserver"
                    && s.attributes.get("verb").map(String::as_str) == Some("create")
            })
            .filter_map(|s| {
                let a = &s.attributes;
                Some((
                    a.get("resource")?.clone(),
                    a.get("namespace").cloned().unwrap_or_default(),
                    a.get("name")?.clone(),
                ))
            })
            .collect()
    }

    /// The (trace id, span id) of the apiserver's create of the object
    /// with this uid, while its trace is kept.
    pub fn created(&self, uid: &str) -> Option<(String, String)> {
        if uid.is_empty() {
            return None;
        }
        let inner = self.lock();
        inner.order.iter().rev().find_map(|t| {
            inner.traces.get(t)?.iter().find_map(|s| {
                let created = s.component == "apiserver"
                    && s.attributes.get("verb").map(String::as_str) == Some("create")
                    && s.attributes.get("uid").map(String::as_str) == Some(uid);
                created.then(|| (s.trace_id.clone(), s.span_id.clone()))
            })
        })
    }

    /// How many traces are kept, and how many spans were refused so far.
    pub fn stats(&self) -> (usize, u64) {
        let inner = self.lock();
        (inner.order.len(), inner.dropped)
    }
}

/// This process's spans into a [`SpanStore`].
#[derive(Debug)]
pub struct StoreExporter {
    pub store: Arc<SpanStore>,
    pub process: &'static str,
}

impl SpanExporter for StoreExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.store
            .add(batch.iter().map(|s| record_of(s, self.process)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, id: &str, parent: &str, start: u64) -> SpanRecord {
        SpanRecord {
            trace_id: trace.into(),
            span_id: id.into(),
            parent_span_id: parent.into(),
            component: "apiserver".into(),
            name: id.into(),
            start_unix_nano: start,
            end_unix_nano: start + 1,
            attributes: BTreeMap::new(),
            events: Vec::new(),
            links: Vec::new(),
        }
    }

    #[test]
    fn the_oldest_trace_goes_first_and_a_full_trace_takes_no_more() {
        let store = SpanStore::new(2, 2);
        store.add([span("t1", "a", "", 1), span("t2", "b", "", 2)]);
        store.add([span("t3", "c", "", 3)]);
        assert!(store.trace("t1").is_empty());
        assert_eq!(store.trace("t3").len(), 1);
        store.add([span("t3", "d", "c", 4), span("t3", "e", "c", 5)]);
        assert_eq!(store.trace("t3").len(), 2);
        assert_eq!(store.stats(), (2, 1));
    }

    #[test]
    fn a_journey_is_the_subtree_of_its_span_by_start_time() {
        let store = SpanStore::new(10, 100);
        // The Deployment's create (d), its ReplicaSet's (r), two pods (p, q)
        // and each pod's scheduling and kubelet steps.
        store.add([
            span("t", "d", "", 1),
            span("t", "r", "d", 2),
            span("t", "p", "r", 3),
            span("t", "q", "r", 4),
            span("t", "kubelet-q", "q", 6),
            span("t", "schedule-p", "p", 5),
            span("t", "bind-p", "schedule-p", 7),
        ]);
        let names = |v: Vec<SpanRecord>| v.into_iter().map(|s| s.span_id).collect::<Vec<_>>();
        assert_eq!(
            names(store.journey("t", "p")),
            ["p", "schedule-p", "bind-p"]
        );
        assert_eq!(store.journey("t", "d").len(), 7);
        assert!(store.journey("other", "p").is_empty());
    }

    #[test]
    fn an_object_is_found_by_the_uid_its_create_recorded() {
        let store = SpanStore::new(10, 100);
        let mut create = span("t", "c", "", 1);
        create.attributes.insert("verb".into(), "create".into());
        create.attributes.insert("uid".into(), "u-1".into());
        store.add([create, span("t", "d", "c", 2)]);
        assert_eq!(store.created("u-1"), Some(("t".into(), "c".into())));
        assert!(store.any("t", |s| s.span_id == "d"));
        assert!(!store.any("t", |s| s.span_id == "x") && !store.any("u", |_| true));
        assert_eq!(store.created("u-2"), None);
        assert_eq!(store.created(""), None);
    }

    #[test]
    fn an_otlp_body_that_is_not_one_is_refused() {
        assert!(decode_otlp(b"\xff\xff\xff").is_err());
        assert_eq!(decode_otlp(b"").unwrap(), Vec::<SpanRecord>::new());
    }

    #[test]
    fn a_span_belongs_to_the_crate_that_opened_it() {
        assert_eq!(
            component_of(Some("scheduler::score"), "master"),
            "scheduler"
        );
        assert_eq!(
            component_of(Some("controller_manager::deployment"), "master"),
            "controller-manager"
        );
        assert_eq!(
            component_of(Some("minik8s_client::rest"), "kubelet"),
            "kubelet"
        );
        assert_eq!(component_of(None, "master"), "master");
    }
}
