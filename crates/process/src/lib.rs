//! What every minik8s process shares, client or server: its heap kept
//! small ([`memory`]), its structured logs ([`init_logging`]), and its
//! metrics in Prometheus' text format with a plain `/metrics` endpoint
//! ([`metrics`]). Apart from the client so that the apiserver, which is no
//! client of itself, links none of the client.

pub mod memory;
pub mod metrics;

/// Structured logs to stderr for every minik8s binary; `RUST_LOG` filters (default `info`).
///
/// Spans are logged when they close, with the time they were busy and idle.
/// The pod start pipeline has its own on the target `minik8s_client::TRACE_POD_START` at
/// debug level, off unless turned on:
/// `RUST_LOG=info,pod_start=debug` shows the scheduler's `schedule_one` and
/// `bind` and the kubelet's `sync_pod`, `sandbox`, `image`, `container`, `status`.
pub fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
}
