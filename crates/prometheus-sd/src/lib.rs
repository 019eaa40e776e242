//! Prometheus' Kubernetes service discovery, served over Prometheus' HTTP SD
//! protocol: the target groups (and `__meta_kubernetes_*` labels) that
//! `kubernetes_sd_configs` would find for the roles `node`, `pod`,
//! `service` and `endpoints`, from informers on the cluster's API.
//!
//! Why it exists: Debian's `prometheus` package is built without the
//! Kubernetes discovery (it has no client-go), and the machines here get
//! software from Debian's packages only. With `http_sd_configs` pointed here,
//! the relabeling rules written for `kubernetes_sd_configs` work unchanged.
//!
//! ```text
//!  apiserver ──list+watch nodes, pods, services, endpoints──▶ caches
//!  Prometheus ──GET /targets?role=node (every 10 s)──▶ node_groups(caches) ──▶ JSON target groups
//! ```

pub mod targets;
