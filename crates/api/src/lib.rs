//! API types and rules shared by every minik8s component.
//!
//! This crate has no I/O. It holds the resource [`registry`] (the one table
//! routing, discovery and kubectl derive from), the LeaderWorkerSet type,
//! defaulting and validation as the Kubernetes apiserver does them, label and
//! field selectors, PATCH semantics, quantities and the `Status` error shape.
//! Core kinds are the `k8s-openapi` types (re-exported as [`k8s`]).

pub mod cron;
pub mod defaults;
pub mod disaggregatedset;
pub mod hash;
pub mod lws;
pub mod lws_pod;
pub mod lws_scheduling;
pub mod managed;
pub mod meta;
pub mod names;
pub mod net;
pub mod openapi;
pub mod patch;
pub mod podgroup;
pub mod podsecurity;
pub mod protobuf;
pub mod quantity;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod status;
pub mod storage;
pub mod taints;
pub mod validation;
pub mod versions;

pub use k8s_openapi as k8s;
pub use registry::{ResourceInfo, REGISTRY};
pub use status::ApiError;
