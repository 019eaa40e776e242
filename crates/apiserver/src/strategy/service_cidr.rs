//! ServiceCIDR and IPAddress (`networking.k8s.io/v1`): a ServiceCIDR is held
//! by a finalizer until no Service address depends on it alone; an IPAddress
//! a user creates reserves its address, so no Service is given it (those the
//! allocator writes record what a Service already holds). The loop that
//! keeps them is `service_cidrs.rs`.

use super::Allocations;
use crate::ipalloc::{AllocError, Allocators};
use crate::service_cidrs::{managed, FINALIZER};
use minik8s_validation::{FieldError, NameRule};
use serde_json::{json, Value};

pub struct ServiceCidr;

impl super::Strategy for ServiceCidr {
    fn prepare_for_create(&self, _ctx: &super::Context, obj: &mut Value) -> Result<(), FieldError> {
        let meta = minik8s_api::meta::metadata_mut(obj);
        let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut() {
            if !list.iter().any(|f| f == FINALIZER) {
                list.push(json!(FINALIZER));
            }
        }
        Ok(())
    }
}

pub struct IpAddress;

impl super::Strategy for IpAddress {
    fn name_rule(&self) -> NameRule {
        NameRule::IpAddress
    }

    /// A user's IPAddress takes its address out of the Service pool. An
    /// address outside every range, or already taken (then the IPAddress
    /// recording it exists and the write answers 409), reserves nothing.
    fn allocate(
        &self,
        alloc: &Allocators,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Allocations, FieldError> {
        if old.is_some() || managed(obj) {
            return Ok(Vec::new());
        }
        let ip = minik8s_api::meta::name(obj).to_string();
        match alloc.reserve_ip(&ip) {
            Ok(()) => Ok(vec![("ip".into(), ip)]),
            Err(AllocError::IpTaken | AllocError::IpOutOfRange(_)) => Ok(Vec::new()),
            Err(e) => Err(FieldError::invalid(
                "metadata.name",
                &json!(ip),
                e.to_string(),
            )),
        }
    }

    fn release(&self, alloc: &Allocators, obj: &Value) {
        if !managed(obj) {
            alloc.release_ip(minik8s_api::meta::name(obj));
        }
    }
}
