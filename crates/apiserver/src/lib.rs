//! The minik8s apiserver: the only component that touches the store.
pub mod store;
pub mod testing;
