//! Kubernetes' message schema, as the apiserver serves it besides JSON:
//! [`protobuf`] (`application/vnd.kubernetes.protobuf`, transcoded to and
//! from the JSON form by field number) and the [`openapi`] v2 and v3
//! documents `kubectl explain` and the clients read, both generated from
//! the one schema of messages (`protobuf/schema.txt`).
//!
//! ```text
//!  protobuf/schema.txt ─▶ protobuf::Schema ─┬─▶ protobuf::{encode,decode}_object  (request and response bodies)
//!                                           └─▶ openapi::definitions           (/openapi/v2, /openapi/v3/…)
//! ```
//!
//! The [`versions`] served besides a kind's stored one (autoscaling/v1
//! HPAs, events.k8s.io/v1 Events, a CRD's other versions) are converted at
//! the same edge.
//!
//! Apart from `minik8s-api`: only the apiserver speaks them.

pub mod openapi;
pub mod protobuf;
pub mod versions;
