//! The built-in ingress proxy: Ingresses of the `minik8s` class
//! (networking.k8s.io/v1) served by every node's kube-proxy, straight to the
//! ready endpoints of their Services.
//!
//! ```text
//!   Ingress, IngressClass, Service, EndpointSlice, Secret (informers)
//!        │ any change (debounced)
//!        ▼
//!   sync.rs: routes::Table::build + endpoints::resolve + TLS keys ──▶ proxy.set(Config)
//!                                                   └──▶ events (missing Service/port), status.loadBalancer
//!   proxy.rs: accept ─▶ route(host, path) ─▶ endpoint (round robin, next on connect failure) ─▶ forward
//! ```
//!
//! `routes.rs` (matching) and `endpoints.rs` (resolution) are pure.

pub mod endpoints;
pub mod proxy;
pub mod routes;
pub mod sync;
