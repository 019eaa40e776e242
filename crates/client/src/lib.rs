//! The client side of the API, shared by every component except the apiserver:
//! a typed REST client ([`rest`]), where to find the server ([`config`]), the
//! reflector/informer with its indexed cache ([`informer`]), one informer per
//! kind shared by a process's controllers ([`shared`])
//! the work queue controllers drain ([`workqueue`]) and the controller shape
//! with its runner ([`controller`]: `Reconciler`, `Action`, triggers).
//!
//! A controller is: informers (list + watch into a cache) → handlers that
//! enqueue keys → workers that `reconcile(key)` from the caches.

pub mod config;
pub mod controller;
pub mod discovery;
mod error;
pub mod events;
pub mod informer;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod rest;
pub mod shared;
pub mod skew;
pub mod throttle;
pub mod workqueue;

pub use informer::{Cache, Event, Informer};
pub use rest::{
    retry_on_conflict, Api, Client, ClientError, DeleteParams, DynamicApi, ListParams, WatchEvent,
};
pub use shared::SharedInformers;
pub use workqueue::WorkQueue;

/// Structured logs to stderr for every minik8s binary; `RUST_LOG` filters (default `info`).
///
/// Spans are logged when they close, with the time they were busy and idle.
/// The pod start pipeline has its own on the target [`TRACE_POD_START`] at
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

/// The tracing target of the pod start pipeline's spans (see [`init_logging`]).
pub const TRACE_POD_START: &str = "pod_start";
