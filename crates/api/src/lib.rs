//! API types and rules shared by every minik8s component.
//!
//! This crate has no I/O. It holds the resource [`registry`] (the one table
//! routing, discovery and kubectl derive from), the kinds minik8s adds to
//! Kubernetes' (LeaderWorkerSet, DisaggregatedSet, serverless), names and
//! label and field selectors, PATCH semantics, quantities, [`field`] errors
//! and the `Status` error shape: what every component needs. Core kinds are
//! the `k8s-openapi` types (re-exported as [`k8s`]).
//!
//! What only the apiserver does with objects lives beside it: defaulting,
//! validation, Pod Security, the LimitRanger and the LWS pod admission in
//! `minik8s-validation`, structural schemas and CEL in `minik8s-cel`, the
//! protobuf transcoder, OpenAPI documents and the versions served besides
//! the stored ones in `minik8s-wire`, field managers (server-side apply) in
//! the apiserver itself; so a kubelet, kube-proxy or kubectl links none of
//! them. What stays here that only some components use is shared by a
//! controller and the apiserver: quota usage (the ResourceQuota controller
//! and admission), cron schedules (the CronJob controller and validation),
//! PATCH semantics (kubectl and the apiserver), the LWS pod names.

/// The Kubernetes release minik8s speaks (its types, its behaviour) and
/// reports: `/version`, the kubelet's `nodeInfo`, our kubectl's client
/// version, the probes' User-Agent. The `+minik8s.N` build suffix (as k3s
/// writes `+k3s1`) keeps it a release, not a pre-release, for the version
/// constraints of Helm charts (`kubeVersion: ">=1.25.0"`); N counts
/// minik8s' own releases of one Kubernetes version, so `kubectl get nodes`
/// tells a node still on the previous build from an upgraded one.
pub mod release {
    pub const MAJOR: &str = "1";
    pub const MINOR: &str = "37";
    /// The patch level of the types (k8s-openapi's `v1_37`) and minik8s'
    /// build. Raised for a release; the upgrade test builds the commit before
    /// this line last changed as "the previous release" (scripts/previous-release.sh).
    pub const GIT_VERSION: &str = "v1.37.0+minik8s.2";
    /// `major.minor`, as in `kube-probe/1.37`.
    pub const MAJOR_MINOR: &str = "1.37";
}

/// The k8s-openapi traits (Resource, ListableResource, Metadata) of a
/// namespaced kind whose type is written here rather than taken from
/// k8s-openapi: LeaderWorkerSet, DisaggregatedSet and its role scaler,
/// Volcano's PodGroup, serverless Functions, Workflows and WorkflowRuns.
macro_rules! namespaced_resource {
    ($ty:ty, $api_version:expr, $group:expr, $version:literal, $kind:literal, $plural:literal) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = $api_version;
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = k8s_openapi::NamespaceResourceScope;
        }
        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }
        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

pub mod amount;
pub mod cron;
pub mod disaggregatedset;
pub mod dra;
pub mod endpoints;
pub mod field;
pub mod hash;
pub mod lws;
pub mod lws_pod;
pub mod lws_scheduling;
pub mod meta;
pub mod names;
pub mod net;
pub mod node_selection;
pub mod patch;
pub mod pod_fields;
pub mod podgroup;
pub mod quantity;
pub mod quota;
pub mod registry;
pub mod resources;
pub mod selector;
pub mod serverless;
pub mod status;
pub mod storage;
pub mod taints;
pub mod workflow;

pub use k8s_openapi as k8s;
pub use registry::{ResourceInfo, REGISTRY};
pub use status::ApiError;
