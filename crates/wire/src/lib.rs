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
//! Apart from `minik8s-api`: only the apiserver speaks them.

pub mod openapi;
pub mod protobuf;
