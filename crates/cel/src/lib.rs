//! CEL and the structural schemas it runs over: what the apiserver does with
//! a CustomResourceDefinition's `openAPIV3Schema` on every write of one of
//! its objects (defaulting, validation, pruning, `x-kubernetes-validations`
//! rules), the CEL of admission policies, and the device selectors of
//! Dynamic Resource Allocation, which the scheduler evaluates too.
//!
//! ```text
//!  apiserver ──▶ schema (CRD objects, policies' CEL)  ┐
//!  scheduler ──▶ device (DRA selectors over a device) ┴─▶ the `cel` crate
//! ```
//!
//! Apart from `minik8s-api` so that the components that never evaluate CEL
//! (kubelet, kube-proxy, kubectl) do not compile or link it.

pub mod device;
pub mod schema;
