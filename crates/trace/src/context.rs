//! The trace context as it travels: the W3C `traceparent` header of a
//! request, and the same text the apiserver keeps for an object it
//! created in a trace (by uid, served at `/ui/v1/contexts`), so that the
//! scheduler's and the kubelet's work on it joins that trace.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C trace-context header.
pub const HEADER: &str = "traceparent";

/// `00-<trace id>-<span id>-<flags>` for a valid span context.
pub fn format(cx: &SpanContext) -> Option<String> {
    if !cx.is_valid() {
        return None;
    }
    Some(format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    ))
}

/// A `traceparent` as W3C Trace Context level 1 reads it (version 00 only,
/// lowercase hex, neither id all zeros); None for anything else.
pub fn parse(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || version != "00" {
        return None;
    }
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let cx = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    cx.is_valid().then_some(cx)
}

/// The `traceparent` of the current `tracing` span, when it is part of a
/// sampled trace (None without tracing, or for a span nobody records).
pub fn current() -> Option<String> {
    of(&tracing::Span::current())
}

/// The `traceparent` of `span` when it is recorded (sampled).
pub fn of(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if !sc.is_sampled() {
        return None;
    }
    format(&sc)
}

/// Makes `span` a child of the trace context `traceparent` (an
/// object's): false when the text is no trace context.
pub fn follow(span: &tracing::Span, traceparent: Option<&str>) -> bool {
    let Some(sc) = traceparent.and_then(parse) else {
        return false;
    };
    let cx = opentelemetry::Context::new().with_remote_span_context(sc);
    span.set_parent(cx).is_ok()
}

/// Links `span` to a context it must not join: what a request from an
/// untrusted caller carried (Kubernetes' apiserver does the same with
/// `otelhttp.WithPublicEndpointFn`): the link is kept for whoever follows
/// it, but the caller cannot add spans to someone else's trace.
pub fn link(span: &tracing::Span, traceparent: Option<&str>) {
    if let Some(sc) = traceparent.and_then(parse) {
        span.add_link(sc);
    }
}

/// The trace id of a `traceparent` (32 hex digits).
pub fn trace_id(traceparent: &str) -> Option<String> {
    parse(traceparent).map(|sc| sc.trace_id().to_string())
}

/// The span id of a `traceparent` (16 hex digits).
pub fn span_id(traceparent: &str) -> Option<String> {
    parse(traceparent).map(|sc| sc.span_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips() {
        let cx = parse(GOOD).unwrap();
        assert!(cx.is_sampled() && cx.is_remote());
        assert_eq!(format(&cx).as_deref(), Some(GOOD));
        assert_eq!(
            trace_id(GOOD).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(span_id(GOOD).as_deref(), Some("00f067aa0ba902b7"));
    }

    #[test]
    fn what_is_no_traceparent_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn without_tracing_there_is_no_current_context() {
        assert_eq!(current(), None);
    }
}
