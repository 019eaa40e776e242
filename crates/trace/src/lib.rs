//! Traces of the control loops (issue: "see the control loops"): every
//! component records the steps of its work as `tracing` spans, and this
//! crate turns them into OpenTelemetry spans.
//!
//! ```text
//!  kubectl ──POST pods (traceparent?)──▶ apiserver: span "create pods"
//!                                        │ the apiserver keeps that span's context (by uid)
//!                   ┌────────────────────┴───────────────────┐
//!         scheduler: schedule_one (child)          kubelet: sync_pod (child)
//!          filtered out / scored / bind              sandbox, image, container, status
//!                   │                                        │
//!                   ▼ in-process                             ▼ OTLP to POST /ui/v1/traces
//!          the master's SpanStore (recent traces) ◀──────────┘
//!                   │                 and, with --tracing-endpoint, OTLP/HTTP to a collector
//!                   ▼
//!          /ui/: the journey of an object = its span's subtree
//! ```
//!
//! Which spans are kept (the sampler, [`JourneySampler`]): a trace starts
//! only at the apiserver's create of an object (the start of a journey);
//! every other span is kept exactly when its parent was. So the periodic
//! work (a kubelet's resync, a lease renewal) costs a span that nobody
//! records, and the traces the store holds are journeys.

pub mod context;
pub mod export;
pub mod store;

use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SamplingDecision, SamplingResult,
    SdkTracerProvider, ShouldSample,
};
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

pub use context::HEADER;
pub use export::{Post, Transport};
pub use store::{SpanRecord, SpanStore};

/// The `tracing` target of the journey's spans and events besides the pod
/// start pipeline's (`minik8s_client::TRACE_POD_START`, "pod_start").
pub const JOURNEY: &str = "journey";

/// The `tracing` target of steps and events that belong to a journey only
/// inside one (an apiserver request's admission, validation and store):
/// anywhere else they are not even built.
pub const STEP: &str = "journey_step";

/// The span field that starts a trace (the sampler keeps a root span only
/// with it): the apiserver's span of a create.
pub const ROOT_FIELD: &str = "journey.start";

/// Keeps a root span only when it starts a journey ([`ROOT_FIELD`]); any
/// other span follows its parent's decision (local or remote).
#[derive(Debug, Clone)]
pub struct JourneySampler;

impl ShouldSample for JourneySampler {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        _trace_id: TraceId,
        _name: &str,
        _kind: &SpanKind,
        attributes: &[KeyValue],
        _links: &[Link],
    ) -> SamplingResult {
        let parent_span = parent
            .map(|cx| cx.span().span_context().clone())
            .filter(|sc| sc.is_valid());
        let keep = match &parent_span {
            Some(sc) => sc.is_sampled(),
            None => attributes.iter().any(|kv| kv.key.as_str() == ROOT_FIELD),
        };
        SamplingResult {
            decision: if keep {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent_span
                .map(|sc| sc.trace_state().clone())
                .unwrap_or_default(),
        }
    }
}

/// Where a process's spans go.
#[derive(Default)]
pub struct Options {
    /// The process, for spans of no component it knows (`kubelet`, `master`).
    pub process: &'static str,
    /// `--tracing-endpoint`: an OTLP/HTTP collector (`host:4318` or a URL).
    pub endpoint: Option<String>,
    /// The master's memory of recent traces.
    pub store: Option<Arc<SpanStore>>,
    /// A kubelet's way to its apiserver's `/ui/v1/traces`.
    pub to_apiserver: Option<Post>,
}

impl Options {
    fn wants_spans(&self) -> bool {
        self.endpoint.is_some() || self.store.is_some() || self.to_apiserver.is_some()
    }
}

/// The installed tracing; dropping it sends what is still queued.
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// Sends every finished span now (tests, before a process exits).
    pub fn flush(&self) {
        if let Some(p) = &self.provider {
            let _ = p.force_flush();
        }
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// How often the batches leave: a journey shows in the view within a
/// second of its step.
const EXPORT_EVERY: Duration = Duration::from_millis(500);

fn batch(exporter: impl opentelemetry_sdk::trace::SpanExporter + 'static) -> BatchSpanProcessor {
    BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(EXPORT_EVERY)
                .with_max_queue_size(8192)
                .build(),
        )
        .build()
}

/// The tracer provider for `opts`, None when the spans go nowhere.
pub fn provider(opts: &Options, runtime: tokio::runtime::Handle) -> Option<SdkTracerProvider> {
    if !opts.wants_spans() {
        return None;
    }
    let mut builder =
        SdkTracerProvider::builder().with_sampler(Sampler::ParentBased(Box::new(JourneySampler)));
    if let Some(store) = &opts.store {
        builder = builder.with_simple_exporter(store::StoreExporter {
            store: store.clone(),
            process: opts.process,
        });
    }
    if let Some(post) = &opts.to_apiserver {
        let sender = export::Sender::new(Transport::Post(post.clone()), runtime.clone());
        // The URL is the apiserver's, which the Post knows; OTLP wants one.
        let exporter = export::ComponentExporter::new(
            "http://apiserver/ui/v1/traces".into(),
            sender,
            opts.process,
        );
        builder = builder.with_span_processor(batch(exporter));
    }
    if let Some(endpoint) = &opts.endpoint {
        let sender = export::Sender::new(Transport::Http(reqwest::Client::new()), runtime);
        let exporter =
            export::ComponentExporter::new(export::traces_url(endpoint), sender, opts.process);
        builder = builder.with_span_processor(batch(exporter));
    }
    Some(builder.build())
}

/// The `tracing` layer that records the journey's spans into `provider`.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    use opentelemetry::trace::TracerProvider as _;
    // What the layer sees: the journey's own spans (made only for work
    // that is part of one), and inside them the spans and the journey's
    // events of any component, down to debug. Anything else (a resync,
    // an untraced request) costs nothing here: its spans are never built.
    // The target is checked here too: records of the `log` crate (bollard's,
    // reqwest's) come through one shared call site with their own target,
    // and are asked here only.
    let targets = tracing_subscriber::filter::DynFilterFn::new(|meta, cx| match meta.target() {
        JOURNEY => true,
        STEP | "pod_start" => cx.lookup_current().is_some(),
        _ => false,
    })
    // Every other call site is decided once, here: the hot paths' debug
    // and trace events (hyper's, h2's) never come to ask.
    .with_callsite_filter(|meta| {
        let ours = matches!(meta.target(), JOURNEY | STEP | "pod_start");
        if ours && *meta.level() <= tracing::Level::DEBUG {
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    });
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("minik8s"))
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(targets)
}

/// Structured logs to stderr (as `minik8s_process::init_logging`) and the
/// journey's spans to where `opts` says. Needs a tokio runtime.
pub fn init(opts: Options) -> Tracing {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_filter(filter);
    let provider = tokio::runtime::Handle::try_current()
        .ok()
        .and_then(|rt| provider(&opts, rt));
    let registry = tracing_subscriber::registry().with(fmt);
    match &provider {
        Some(p) => {
            let _ = registry.with(layer(p)).try_init();
        }
        None => {
            let _ = registry.try_init();
        }
    }
    Tracing { provider }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceState};

    fn decide(parent: Option<TraceFlags>, attributes: &[KeyValue]) -> SamplingDecision {
        let cx = parent.map(|flags| {
            Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(9u64),
                flags,
                true,
                TraceState::default(),
            ))
        });
        JourneySampler
            .should_sample(
                cx.as_ref(),
                TraceId::from(7u128),
                "x",
                &SpanKind::Internal,
                attributes,
                &[],
            )
            .decision
    }

    #[test]
    fn a_journey_records_its_own_steps_and_events_not_a_librarys_log() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let store = SpanStore::new(10, 100);
        let opts = Options {
            process: "apiserver",
            endpoint: None,
            store: Some(store.clone()),
            to_apiserver: None,
        };
        let provider = provider(&opts, rt.handle().clone()).expect("spans go to the store");
        // bollard and reqwest log through the `log` crate.
        tracing_log::LogTracer::init().unwrap();
        let subscriber = tracing_subscriber::registry().with(layer(&provider));
        let traceparent = tracing::subscriber::with_default(subscriber, || {
            let create = tracing::debug_span!(target: JOURNEY, "create", "journey.start" = true);
            let _in = create.enter();
            let step = tracing::debug_span!(target: STEP, "store");
            let _in_step = step.enter();
            tracing::debug!(target: STEP, revision = 7, "stored");
            log::debug!(target: "reqwest::retry", "shouldn't retry!");
            tracing::debug!(target: "h2::codec", "a frame");
            tracing::debug_span!(target: "hyper::client", "connect").in_scope(|| {});
            context::of(&create).expect("the journey is sampled")
        });
        provider.force_flush().unwrap();
        let kept = store.trace(&context::trace_id(&traceparent).unwrap());
        let names: Vec<&str> = kept.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names.contains(&"create") && names.contains(&"store"),
            "{names:?}"
        );
        let events: Vec<&str> = kept
            .iter()
            .flat_map(|s| s.events.iter().map(|e| e.name.as_str()))
            .collect();
        assert_eq!(events, ["stored"]);
    }

    #[test]
    fn a_trace_starts_only_at_a_journeys_start_and_children_follow_their_parent() {
        let start = [KeyValue::new(ROOT_FIELD, true)];
        assert_eq!(decide(None, &start), SamplingDecision::RecordAndSample);
        assert_eq!(decide(None, &[]), SamplingDecision::Drop);
        assert_eq!(
            decide(Some(TraceFlags::SAMPLED), &[]),
            SamplingDecision::RecordAndSample
        );
        assert_eq!(
            decide(Some(TraceFlags::default()), &start),
            SamplingDecision::Drop
        );
    }
}
