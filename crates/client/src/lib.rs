//! The client side of the API, shared by every component except the apiserver:
//! a typed REST client ([`rest`]), where to find the server ([`config`]), the
//! reflector/informer with its indexed cache ([`informer`]), one informer per
//! kind shared by a process's controllers ([`shared`])
//! the work queue controllers drain ([`workqueue`]) and the controller shape
//! with its runner ([`controller`]: `Reconciler`, `Action`, triggers).
//!
//! A controller is: informers (list + watch into a cache) → handlers that
//! enqueue keys → workers that `reconcile(key)` from the caches.

pub mod conditions;
pub mod config;
pub mod controller;
pub mod discovery;
mod error;
pub mod events;
pub mod informer;
pub mod leader;
pub mod rest;
pub mod shared;
pub mod skew;
pub mod throttle;
pub mod traces;
pub mod workqueue;

pub use informer::{Cache, Event, Informer};
pub use rest::{
    retry_on_conflict, Api, Client, ClientError, DeleteParams, DynamicApi, ListParams, WatchEvent,
};
pub use shared::SharedInformers;
pub use workqueue::WorkQueue;

/// The tracing target of the pod start pipeline's spans (see `minik8s_process::init_logging`).
pub const TRACE_POD_START: &str = "pod_start";
