//! Per-kind strategies, as Kubernetes' `pkg/registry/*/strategy.go`: what
//! differs between kinds on the write, delete and read paths. The generic REST
//! code (`rest.rs`) calls a [`Strategy`] and never looks at a kind's name.
//!
//! ```text
//!  create/update/patch ─▶ default ─▶ prepare_for_create ─▶ validate ─▶ canonicalize ─▶ allocate ─▶ store
//!  delete              ─▶ check_delete ─▶ grace_period / two_phase_delete ─▶ store ─▶ release
//!  get/list/watch      ─▶ table_row, field_selectors;  scale ─▶ scale_selector
//! ```
//!
//! A built-in kind is a [`Typed`] strategy over its k8s-openapi type (typed
//! round trip, the kind's defaults and validation, its table row) plus, where
//! the kind needs more, a lifecycle of its own in one file here (`pod.rs`,
//! `service.rs`, `namespace.rs`, `node.rs`, `lws.rs`). Kinds registered at run
//! time get [`Schemaless`]: stored as sent, NAME and AGE columns.

mod certificates;
pub mod crd;
pub mod custom;
mod deployment;
mod disaggregatedset;
mod job;
mod lws;
mod namespace;
mod networking;
mod node;
mod pod;
pub mod priority;
mod rbac;
mod replication_controller;
mod resource;
mod runtime_class;
mod secret;
mod serverless;
mod service;
mod service_cidr;
pub mod storage;

pub use service::{release, service_allocations};

use crate::ipalloc::Allocators;
use crate::table::{rows, Row};
use crate::ApiServer;
use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration, apps::v1 as apps,
    autoscaling::v2 as autoscaling, batch::v1 as batch, coordination::v1 as coordination,
    core::v1 as core, discovery::v1 as discovery, policy::v1 as policy, rbac::v1 as rbac_v1,
};
use minik8s_api::registry::{self, Info, ResourceInfo};
use minik8s_api::selector::Selector;
use minik8s_validation as validation;
use minik8s_validation::{Errors, FieldError, NameRule};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock, RwLock};

/// What a write took from the server's pools: ("ip", address) or ("port", n).
pub type Allocations = Vec<(String, String)>;

/// An object another one names (`field`), which must exist when it is written.
pub struct Reference {
    pub field: String,
    pub info: &'static minik8s_api::registry::ResourceInfo,
    pub name: String,
}

/// What a strategy may read of the server: the store and the caches its
/// admission follows, not the server itself (Kubernetes' strategies get
/// their registries' getters the same way).
pub struct Context<'a> {
    pub store: &'a dyn crate::store::Store,
    /// Which namespaces exist, their labels, whether they are terminating.
    pub(crate) namespaces: &'a crate::NamespaceCache,
    pub(crate) storage_classes: &'a crate::followed::Followed,
    pub(crate) ingress_classes: &'a crate::followed::Followed,
    pub(crate) priority_classes: &'a crate::followed::Followed,
    /// tolerationSeconds of the default not-ready and unreachable tolerations.
    pub default_toleration_seconds: (i64, i64),
    /// The server signs ServiceAccount tokens (a pod gets its token volume).
    pub signs_tokens: bool,
}

impl ApiServer {
    /// What the strategies may read of this server.
    pub(crate) fn strategy_context(&self) -> Context<'_> {
        Context {
            store: &*self.store,
            namespaces: &self.namespaces,
            storage_classes: &self.storage_classes,
            ingress_classes: &self.ingress_classes,
            priority_classes: &self.priority_classes,
            default_toleration_seconds: self.default_toleration_seconds,
            signs_tokens: self.sa_signer.get().is_some(),
        }
    }
}

/// Who writes an object, for the kinds whose writes depend on what the
/// writer may do (RBAC's escalation prevention, [`Strategy::admit_writer`]).
pub struct Writer<'a> {
    pub user: &'a crate::auth::UserInfo,
    pub authority: &'a dyn Authority,
}

/// What a strategy may ask the authorizer.
pub trait Authority {
    /// Whether `user` may do `attributes` (RBAC's `escalate`, `bind`).
    fn allows(
        &self,
        user: &crate::auth::UserInfo,
        attributes: &crate::auth::request_info::Attributes,
    ) -> bool;
    /// The RBAC objects the authorizer reads, as of the last change seen.
    fn policy(&self) -> Arc<crate::auth::rbac::Policy>;
}

impl Authority for ApiServer {
    fn allows(
        &self,
        user: &crate::auth::UserInfo,
        attributes: &crate::auth::request_info::Attributes,
    ) -> bool {
        self.authorize(user, attributes).is_ok()
    }

    fn policy(&self) -> Arc<crate::auth::rbac::Policy> {
        self.policy.policy()
    }
}

/// The references in `ns` that name nothing, as NotFound field errors.
pub(crate) async fn missing(ctx: &Context<'_>, refs: Vec<Reference>, ns: Option<&str>) -> Errors {
    let mut errs = Vec::new();
    for r in refs {
        let key = r.info.key(ns, &r.name);
        // A store error is not the user's: the write itself reports it.
        if let Ok(None) = ctx.store.get(&key).await {
            errs.push(FieldError::not_found(r.field, &Value::String(r.name)));
        }
    }
    errs
}

/// Everything kind-specific. Every method has the behaviour of a kind that
/// needs nothing special, so a strategy names only what differs.
pub trait Strategy: Send + Sync {
    /// Decodes into the kind's typed struct and back, which rejects wrong
    /// types (400) and drops unknown fields (reported under Strict). Kinds
    /// without a schema keep the object as sent.
    fn canonicalize(&self, obj: Value) -> Result<Value, String> {
        Ok(obj)
    }

    /// [`Strategy::canonicalize`] leaving the input as it was, for a caller
    /// that still needs it (to report unknown fields); None when the
    /// strategy can only canonicalize by taking the object.
    fn canonicalize_borrowed(&self, _obj: &Value) -> Option<Result<Value, String>> {
        None
    }

    /// The kind's defaults (on create and on every update).
    fn default(&self, _obj: &mut Value) {}

    /// The kind's own rules; `old` is the stored object on update.
    fn validate(&self, _obj: &Value, _old: Option<&Value>) -> Errors {
        Vec::new()
    }

    /// [`Strategy::validate`], with the object's stored form when the
    /// strategy decodes it for its rules anyway: a write is decoded once,
    /// as Kubernetes decodes a body once and validates the typed object.
    fn validate_and_canonicalize(&self, obj: &Value, old: Option<&Value>) -> Validated {
        Validated {
            errors: self.validate(obj, old),
            canonical: None,
        }
    }

    /// The format `metadata.name` must have.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// A create keeps the status it was sent (a kubelet registers its Node
    /// with one); for other kinds status is the controllers' to write.
    fn keeps_status_on_create(&self) -> bool {
        false
    }

    /// Server-set fields on create, after defaulting (PrepareForCreate and
    /// the built-in mutating admission).
    fn prepare_for_create(&self, _ctx: &Context, _obj: &mut Value) -> Result<(), FieldError> {
        Ok(())
    }

    /// What a kind records of who creates an object, whatever the body
    /// says (a CertificateSigningRequest's requester, as Kubernetes' CSR
    /// strategy takes it from the request's user).
    fn record_creator(&self, _user: &crate::auth::UserInfo, _obj: &mut Value) {}

    /// Built-in admission on create that reads other objects from the store
    /// (the ServiceAccount admission gives a pod its account's
    /// `imagePullSecrets`, the Priority admission its priority); runs after
    /// [`Strategy::prepare_for_create`]. `Err(why)` is a 403.
    fn admit_create<'a>(
        &'a self,
        _ctx: &'a Context<'a>,
        _obj: &'a mut Value,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// What a write to the status subresource may not change beyond the
    /// spec, put back from `old` (Kubernetes' status strategies'
    /// PrepareForUpdate: a Deployment's labels). The status and the
    /// labels and annotations sent with it are kept otherwise.
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// Objects this one names that must exist (a Workflow's functions, a
    /// run's Workflow), in its namespace: a missing one is a NotFound in the
    /// same 422 as `validate`'s errors. Read from the store at write time, so
    /// one file may make a function and the workflow that calls it.
    fn references(&self, _obj: &Value, _old: Option<&Value>) -> Vec<Reference> {
        Vec::new()
    }

    /// The kind's built-in validating admission, which may read other
    /// objects (a claim's resize reads its StorageClass): `Err(why)` is 403.
    fn admit(&self, _ctx: &Context, _obj: &Value, _old: Option<&Value>) -> Result<(), String> {
        Ok(())
    }

    /// What the writer must be allowed beyond the write itself, for writes
    /// by anyone but the superuser while authorization is on (RBAC: a role
    /// grants only rules its writer holds): `Err(why)` is 403.
    fn admit_writer(&self, _writer: &Writer, _obj: &Value) -> Result<(), String> {
        Ok(())
    }

    /// Admission warnings for a valid object (`Warning: 299` headers).
    fn warnings(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Takes what the object needs from the server's pools (ClusterIPs, node
    /// ports); `old` is the stored object on update. On error nothing is held.
    fn allocate(
        &self,
        _alloc: &Allocators,
        _obj: &mut Value,
        _old: Option<&Value>,
    ) -> Result<Allocations, FieldError> {
        Ok(Vec::new())
    }

    /// Gives back what a deleted object held.
    fn release(&self, _alloc: &Allocators, _obj: &Value) {}

    /// Clears, before validation, what an update made obsolete and the
    /// client left as it was (Kubernetes' PrepareForUpdate: a Service
    /// leaving NodePort drops the node ports it had been given).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// What `old` held that `new` no longer does: given back once the
    /// update is written.
    fn released_by_update(&self, _old: &Value, _new: &Value) -> Allocations {
        Vec::new()
    }

    /// `DELETE` on the collection is served (Kubernetes has none for namespaces).
    fn delete_collection(&self) -> bool {
        true
    }

    /// Refuses the deletion of objects that must stay (with the reason).
    fn check_delete(&self, _name: &str) -> Result<(), &'static str> {
        Ok(())
    }

    /// A graceful deletion's period: Some(seconds) marks the object and waits
    /// (a running pod's kubelet confirms); None deletes at once.
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Deletion always marks first, even without finalizers (a Namespace is
    /// emptied by its controller before it goes).
    fn two_phase_delete(&self) -> bool {
        false
    }

    /// Changes made to an object as its deletion starts.
    fn mark_deleting(&self, _obj: &mut Value) {}

    /// Called once the marked object is stored.
    fn deletion_started(&self, _ctx: &Context, _name: &str) {}

    /// Kind-specific finalizers still pending (beyond `metadata.finalizers`).
    fn finalizers_pending(&self, _obj: &Value) -> bool {
        false
    }

    /// Subresources served beyond the registry's (`namespaces/finalize`).
    fn extra_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// Strategic merge patch applies (built-in types; custom resources take
    /// it as a merge patch).
    fn strategic_merge(&self) -> bool {
        false
    }

    /// A built-in kind that Kubernetes serves as a custom resource (the
    /// LeaderWorkerSet CRD): no strategic merge patch.
    fn served_as_custom_resource(&self) -> bool {
        false
    }

    /// The label selector of the `Scale` view.
    fn scale_selector(&self, obj: &Value) -> String {
        obj.pointer("/spec/selector")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .and_then(|ls| Selector::from_label_selector(&ls).ok())
            .map(|s| s.to_string())
            .unwrap_or_default()
    }

    /// Where the kind's objects carry a pod spec (a pod's own, a workload's
    /// template), which Pod Security admission checks; None for kinds
    /// without one (and custom resources).
    fn pod_spec_at(&self) -> Option<validation::PodSpecAt> {
        None
    }

    /// Fields a fieldSelector may name (a custom resource's selectable
    /// fields are its CRD's, owned by its strategy).
    fn field_selectors(&self) -> Vec<registry::Text> {
        vec!["metadata.name".into(), "metadata.namespace".into()]
    }

    /// The table cells after NAME.
    fn table_row(&self) -> Row {
        rows::age_only
    }

    /// One object's table cells after NAME (a custom resource's come from
    /// its CRD's printer columns, not from a function of the kind).
    fn cells(&self, obj: &Value) -> Vec<Value> {
        (self.table_row())(obj)
    }

    /// The `Scale` view: (spec replicas, status replicas, label selector).
    /// A custom resource reads them where its CRD says.
    fn scale_of(&self, obj: &Value) -> (i64, i64, String) {
        let int = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        (
            int("/spec/replicas"),
            int("/status/replicas"),
            self.scale_selector(obj),
        )
    }

    /// Writes the `Scale`'s replicas into the object (where its CRD says, for a custom resource).
    fn set_replicas(&self, obj: &mut Value, replicas: i64) -> Result<(), String> {
        match obj.get_mut("spec").and_then(Value::as_object_mut) {
            Some(spec) => {
                spec.insert("replicas".into(), serde_json::json!(replicas));
                Ok(())
            }
            None => Err("the object has no spec".into()),
        }
    }

    /// For a version served besides the stored one (a CRD's other
    /// versions): how its objects convert; requests go to the stored version.
    fn stored_in(&self) -> Option<std::sync::Arc<minik8s_wire::versions::AlternateVersion>> {
        None
    }

    /// The OpenAPI schema of a kind without a built-in message (a custom
    /// resource's CRD schema), for `kubectl explain`.
    fn openapi_schema(&self) -> Option<Value> {
        None
    }

    /// Changes that bump `metadata.generation` (spec ones, for most kinds):
    /// `None` keeps the apiserver's rule.
    fn generation_relevant(&self, _obj: &Value) -> Option<Value> {
        None
    }
}

/// A kind registered at run time: stored as sent.
pub struct Schemaless;
impl Strategy for Schemaless {}

/// A built-in kind over its typed struct `K`, with the lifecycle `L`.
pub struct Typed<K, L = Schemaless> {
    row: Row,
    lifecycle: L,
    _kind: PhantomData<fn() -> K>,
}

/// A built-in kind's strategy: `K`'s schema, table row `row`, lifecycle `L`.
const fn typed<K, L>(row: Row, lifecycle: L) -> Typed<K, L> {
    Typed {
        row,
        lifecycle,
        _kind: PhantomData,
    }
}

/// Whether the parts of `a` and `b` whose changes bump `metadata.generation`
/// differ: their `spec`, or for kinds without one everything but metadata
/// and status. Compared in place (each update asks; copying both parts out
/// cost two copies of the spec per write).
pub(crate) fn generation_relevant_differs(a: &Value, b: &Value) -> bool {
    let relevant = |k: &&String| *k != "metadata" && *k != "status";
    match (a.get("spec"), b.get("spec")) {
        (Some(x), Some(y)) => x != y,
        (None, None) => match (a.as_object(), b.as_object()) {
            (Some(x), Some(y)) => {
                x.keys().filter(relevant).count() != y.keys().filter(relevant).count()
                    || x.iter().any(|(k, v)| relevant(&k) && y.get(k) != Some(v))
            }
            _ => a != b,
        },
        // One has a spec and the other not: rare, compared as before.
        _ => generation_relevant(a) != generation_relevant(b),
    }
}

/// The part of an object whose changes bump `metadata.generation`.
fn generation_relevant(obj: &Value) -> Value {
    match obj.get("spec") {
        Some(spec) => spec.clone(),
        None => {
            let mut o = obj.clone();
            if let Some(m) = o.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            o
        }
    }
}

/// The typed round trip behind [`Strategy::canonicalize`]: the object as
/// decoded into its typed struct (or why it could not be), encoded back.
fn round_trip<K: Serialize>(typed: Result<K, serde_json::Error>) -> Result<Value, String> {
    typed
        .and_then(serde_json::to_value)
        .map_err(|e| e.to_string())
}

/// What validating a write found.
pub struct Validated {
    pub errors: Errors,
    /// [`Strategy::canonicalize`]'s answer for the validated object when it
    /// came from the rules' decode; None: storing it decodes it.
    pub canonical: Option<Result<Value, String>>,
}

/// The object with an empty status when its kind has a status and it has
/// none: Go's `Status` is a struct, never omitted, so Kubernetes answers and
/// stores a created Deployment with `status: {}` and a ReplicaSet with
/// `status: {replicas: 0}` (its fields without `omitempty` are written as
/// zeros; the Python client's models require them, kr8s reads `status`
/// right after a create). k8s-openapi keeps the status optional; its
/// required fields are not, so the empty status is `K`'s own round trip.
fn with_status<K: k8s_openapi::Resource + Serialize + DeserializeOwned>(mut obj: Value) -> Value {
    let Some(map) = obj.as_object_mut() else {
        return obj;
    };
    if map.contains_key("status") || !has_status(K::API_VERSION, K::KIND) {
        return obj;
    }
    let empty = serde_json::from_value::<K>(serde_json::json!({"status": {}}))
        .and_then(serde_json::to_value)
        .ok()
        .and_then(|mut v| v.get_mut("status").map(Value::take))
        .unwrap_or_else(|| Value::Object(Default::default()));
    let mut empty = empty;
    if let Some(fields) = empty.as_object_mut() {
        for (field, zero) in go_zero_status_fields(K::KIND) {
            fields.entry(*field).or_insert_with(|| zero.clone());
        }
    }
    map.insert("status".into(), empty);
    obj
}

/// Status fields Go always writes that k8s-openapi keeps optional (they are
/// not `required` in the OpenAPI schema): a value field without `omitempty`
/// (StatefulSet's `availableReplicas`), or a struct, which `omitempty` never
/// omits (a Service's and an Ingress's `loadBalancer`). kr8s waits on
/// `{.status.availableReplicas}` right after creating a StatefulSet.
fn go_zero_status_fields(kind: &str) -> &'static [(&'static str, Value)] {
    static STATEFUL_SET: LazyLock<Vec<(&str, Value)>> =
        LazyLock::new(|| vec![("availableReplicas", serde_json::json!(0))]);
    static LOAD_BALANCED: LazyLock<Vec<(&str, Value)>> =
        LazyLock::new(|| vec![("loadBalancer", serde_json::json!({}))]);
    match kind {
        "StatefulSet" => &STATEFUL_SET,
        "Service" | "Ingress" => &LOAD_BALANCED,
        _ => &[],
    }
}

/// Whether the kind's Kubernetes message has a `status` field.
fn has_status(api_version: &str, kind: &str) -> bool {
    let schema = minik8s_wire::protobuf::Schema::get();
    schema
        .message_for(api_version, kind)
        .and_then(|m| schema.message(&m))
        .is_some_and(|m| m.fields.iter().any(|f| f.json == "status"))
}

impl<K, L> Strategy for Typed<K, L>
where
    K: validation::KindRules + Serialize + DeserializeOwned,
    L: Strategy,
{
    fn canonicalize(&self, obj: Value) -> Result<Value, String> {
        round_trip(serde_json::from_value::<K>(obj)).map(with_status::<K>)
    }
    fn canonicalize_borrowed(&self, obj: &Value) -> Option<Result<Value, String>> {
        Some(round_trip(K::deserialize(obj)).map(with_status::<K>))
    }
    fn default(&self, obj: &mut Value) {
        validation::default::<K>(obj);
        self.lifecycle.default(obj);
    }
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Errors {
        let mut errs = validation::validate::<K>(obj, old);
        errs.extend(self.lifecycle.validate(obj, old));
        errs
    }
    fn validate_and_canonicalize(&self, obj: &Value, old: Option<&Value>) -> Validated {
        let decoded = K::deserialize(obj);
        let mut errors = validation::validate_decoded::<K>(obj, decoded.as_ref().ok(), old);
        errors.extend(self.lifecycle.validate(obj, old));
        Validated {
            errors,
            canonical: Some(round_trip(decoded).map(with_status::<K>)),
        }
    }
    fn strategic_merge(&self) -> bool {
        !self.lifecycle.served_as_custom_resource()
    }
    fn name_rule(&self) -> NameRule {
        self.lifecycle.name_rule()
    }
    fn field_selectors(&self) -> Vec<registry::Text> {
        validation::field_selectors::<K>()
            .into_iter()
            .map(registry::Text::Borrowed)
            .collect()
    }
    fn pod_spec_at(&self) -> Option<validation::PodSpecAt> {
        K::POD_SPEC
    }
    fn table_row(&self) -> Row {
        self.row
    }
    // What the lifecycle decides.
    fn keeps_status_on_create(&self) -> bool {
        self.lifecycle.keeps_status_on_create()
    }
    fn prepare_for_create(&self, ctx: &Context, obj: &mut Value) -> Result<(), FieldError> {
        self.lifecycle.prepare_for_create(ctx, obj)
    }
    fn record_creator(&self, user: &crate::auth::UserInfo, obj: &mut Value) {
        self.lifecycle.record_creator(user, obj)
    }
    fn admit_create<'a>(
        &'a self,
        ctx: &'a Context<'a>,
        obj: &'a mut Value,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        self.lifecycle.admit_create(ctx, obj)
    }
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        self.lifecycle.prepare_for_status_update(new, old)
    }
    fn admit(&self, ctx: &Context, obj: &Value, old: Option<&Value>) -> Result<(), String> {
        self.lifecycle.admit(ctx, obj, old)
    }
    fn admit_writer(&self, writer: &Writer, obj: &Value) -> Result<(), String> {
        self.lifecycle.admit_writer(writer, obj)
    }
    fn references(&self, obj: &Value, old: Option<&Value>) -> Vec<Reference> {
        self.lifecycle.references(obj, old)
    }
    fn warnings(&self, obj: &Value) -> Vec<String> {
        self.lifecycle.warnings(obj)
    }
    fn allocate(
        &self,
        alloc: &Allocators,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Allocations, FieldError> {
        self.lifecycle.allocate(alloc, obj, old)
    }
    fn release(&self, alloc: &Allocators, obj: &Value) {
        self.lifecycle.release(alloc, obj)
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.lifecycle.prepare_for_update(new, old)
    }
    fn released_by_update(&self, old: &Value, new: &Value) -> Allocations {
        self.lifecycle.released_by_update(old, new)
    }
    fn delete_collection(&self) -> bool {
        self.lifecycle.delete_collection()
    }
    fn check_delete(&self, name: &str) -> Result<(), &'static str> {
        self.lifecycle.check_delete(name)
    }
    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        self.lifecycle.grace_period(obj, requested)
    }
    fn two_phase_delete(&self) -> bool {
        self.lifecycle.two_phase_delete()
    }
    fn mark_deleting(&self, obj: &mut Value) {
        self.lifecycle.mark_deleting(obj)
    }
    fn deletion_started(&self, ctx: &Context, name: &str) {
        self.lifecycle.deletion_started(ctx, name)
    }
    fn finalizers_pending(&self, obj: &Value) -> bool {
        self.lifecycle.finalizers_pending(obj)
    }
    fn extra_subresources(&self) -> &'static [&'static str] {
        self.lifecycle.extra_subresources()
    }
    fn scale_selector(&self, obj: &Value) -> String {
        self.lifecycle.scale_selector(obj)
    }
}

type Entry = (&'static ResourceInfo, &'static dyn Strategy);

/// `Type => row [with lifecycle]`: the built-in kind of `Type` (its registry
/// entry, found by type), its table row, and its lifecycle (else none).
macro_rules! built_in {
    ($($ty:ty => $row:ident $(with $lifecycle:expr)?;)*) => {
        vec![$((
            registry::of::<$ty>(),
            &const { typed::<$ty, _>(rows::$row, built_in!(@lifecycle $($lifecycle)?)) }
                as &'static dyn Strategy,
        )),*]
    };
    (@lifecycle) => { Schemaless };
    (@lifecycle $lifecycle:expr) => { $lifecycle };
}

/// The built-in kinds' strategies, so no kind is named by a string here.
static BUILTIN: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    built_in! {
        core::Namespace => namespace with namespace::Lifecycle;
        core::Pod => pod with pod::Lifecycle;
        core::Node => node with node::Lifecycle;
        core::Service => service with service::Lifecycle;
        core::ReplicationController => replica_set with replication_controller::Lifecycle;
        core::PodTemplate => pod_template;
        k8s_openapi::api::scheduling::v1::PriorityClass => priority_class with priority::Lifecycle;
        k8s_openapi::api::node::v1::RuntimeClass => runtime_class;
        core::ResourceQuota => resource_quota;
        core::LimitRange => limit_range;
        core::ConfigMap => config_map;
        core::Secret => secret with secret::Lifecycle;
        core::ServiceAccount => service_account;
        core::PersistentVolume => persistent_volume with storage::Volume;
        core::PersistentVolumeClaim => persistent_volume_claim with storage::Claim;
        k8s_openapi::api::storage::v1::StorageClass => storage_class;
        k8s_openapi::api::storage::v1::CSIStorageCapacity => csi_storage_capacity;
        k8s_openapi::api::resource::v1::DeviceClass => age_only;
        k8s_openapi::api::resource::v1::ResourceClaim => resource_claim with resource::CLAIM;
        k8s_openapi::api::resource::v1::ResourceClaimTemplate => age_only with resource::TEMPLATE;
        k8s_openapi::api::resource::v1::ResourceSlice => resource_slice;
        k8s_openapi::api::scheduling::v1beta1::Workload => age_only;
        k8s_openapi::api::scheduling::v1beta1::PodGroup => age_only;
        core::Endpoints => endpoints;
        core::Event => event;
        discovery::EndpointSlice => endpoint_slice;
        coordination::Lease => lease;
        apps::Deployment => deployment with deployment::Lifecycle;
        apps::DaemonSet => daemon_set;
        apps::ReplicaSet => replica_set;
        apps::StatefulSet => stateful_set;
        apps::ControllerRevision => controller_revision;
        autoscaling::HorizontalPodAutoscaler => horizontal_pod_autoscaler;
        batch::Job => job with job::Lifecycle;
        batch::CronJob => cron_job;
        policy::PodDisruptionBudget => pod_disruption_budget;
        k8s_openapi::api::networking::v1::Ingress => ingress with networking::Ingress;
        k8s_openapi::api::networking::v1::IngressClass => ingress_class;
        k8s_openapi::api::networking::v1::NetworkPolicy => network_policy;
        k8s_openapi::api::networking::v1::ServiceCIDR => service_cidr with service_cidr::ServiceCidr;
        k8s_openapi::api::networking::v1::IPAddress => ip_address with service_cidr::IpAddress;
        minik8s_api::lws::LeaderWorkerSet => leader_worker_set with lws::Lifecycle;
        minik8s_api::disaggregatedset::DisaggregatedSet => age_only with disaggregatedset::Set;
        minik8s_api::disaggregatedset::DisaggregatedSetRoleScaler => role_scaler with disaggregatedset::RoleScaler;
        minik8s_api::podgroup::PodGroup => pod_group with disaggregatedset::PodGroup;
        minik8s_api::serverless::Function => function with serverless::Function;
        minik8s_api::workflow::Workflow => workflow with serverless::Workflow;
        minik8s_api::workflow::WorkflowRun => workflow_run with serverless::WorkflowRun;
        rbac_v1::Role => role with rbac::ROLE;
        rbac_v1::RoleBinding => role_binding with rbac::ROLE_BINDING;
        rbac_v1::ClusterRole => role with rbac::CLUSTER_ROLE;
        rbac_v1::ClusterRoleBinding => role_binding with rbac::CLUSTER_ROLE_BINDING;
        k8s_openapi::api::certificates::v1::CertificateSigningRequest => certificate_signing_request with certificates::Lifecycle;
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition => role with crd::Lifecycle;
        admissionregistration::MutatingWebhookConfiguration => webhook_configuration;
        admissionregistration::ValidatingWebhookConfiguration => webhook_configuration;
        admissionregistration::ValidatingAdmissionPolicy => admission_policy;
        admissionregistration::ValidatingAdmissionPolicyBinding => admission_policy_binding;
        admissionregistration::MutatingAdmissionPolicy => mutating_admission_policy;
        admissionregistration::MutatingAdmissionPolicyBinding => admission_policy_binding;
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService => api_service;
    }
});

/// A served resource's strategy: a built-in's, or one made at run time for a
/// custom resource (replaced when its CRD changes).
#[derive(Clone)]
pub enum StrategyRef {
    Static(&'static dyn Strategy),
    Shared(Arc<dyn Strategy>),
}

impl std::ops::Deref for StrategyRef {
    type Target = dyn Strategy;
    fn deref(&self) -> &(dyn Strategy + 'static) {
        match self {
            StrategyRef::Static(s) => *s,
            StrategyRef::Shared(s) => s.as_ref(),
        }
    }
}

/// The strategies of kinds registered at run time (custom resources), by
/// their registry entry's address; the map holds the entry too, so the
/// address names that entry (and no later one) until it is cleared. The
/// server owns them.
#[derive(Default)]
pub struct RuntimeStrategies(RwLock<HashMap<usize, Served>>);

/// A run-time entry with its strategy.
type Served = (Info, Arc<dyn Strategy>);

fn address(info: &ResourceInfo) -> usize {
    info as *const ResourceInfo as usize
}

impl RuntimeStrategies {
    /// Serves `info` (a run-time entry) with `strategy` from now on.
    pub fn set(&self, info: &Info, strategy: Arc<dyn Strategy>) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(address(info), (info.clone(), strategy));
    }

    /// Forgets the strategy of a run-time entry no longer served.
    pub fn clear(&self, info: &ResourceInfo) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&address(info));
    }

    /// The strategy of a served resource: its built-in one, the one set for
    /// a run-time kind, else [`Schemaless`].
    pub fn of(&self, info: &ResourceInfo) -> StrategyRef {
        if let Some(s) = builtin_of(info) {
            return StrategyRef::Static(s);
        }
        match self
            .0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&address(info))
        {
            Some((_, s)) => StrategyRef::Shared(s.clone()),
            None => StrategyRef::Static(&Schemaless),
        }
    }
}

/// The resources a server serves with their strategies, as routing and
/// discovery read them (a `Registry` that also knows each kind's strategy).
pub struct ServedKinds<'a> {
    pub(crate) registry: &'a minik8s_api::registry::Registry,
    pub(crate) strategies: &'a RuntimeStrategies,
}

impl ServedKinds<'_> {
    pub fn strategy(&self, info: &ResourceInfo) -> StrategyRef {
        self.strategies.of(info)
    }
}

impl std::ops::Deref for ServedKinds<'_> {
    type Target = minik8s_api::registry::Registry;
    fn deref(&self) -> &minik8s_api::registry::Registry {
        self.registry
    }
}

fn builtin_of(info: &ResourceInfo) -> Option<&'static dyn Strategy> {
    let entry = registry::builtin_entry(info)?;
    BUILTIN
        .iter()
        .find(|(i, _)| std::ptr::eq(*i, entry))
        .map(|(_, s)| *s)
}

/// A built-in kind's strategy ([`Schemaless`] for any other kind).
pub fn builtin(info: &ResourceInfo) -> &'static dyn Strategy {
    builtin_of(info).unwrap_or(&Schemaless)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_kind_has_a_typed_strategy() {
        for info in minik8s_api::REGISTRY {
            let typed = BUILTIN.iter().any(|(i, _)| std::ptr::eq(*i, info));
            assert!(typed, "{} has no strategy", info.kind);
        }
        assert_eq!(BUILTIN.len(), minik8s_api::REGISTRY.len());
    }

    #[test]
    fn a_lifecycle_adds_its_defaults_and_rules_to_the_typed_ones() {
        let lws = builtin(registry::of::<minik8s_api::lws::LeaderWorkerSet>());
        let mut obj = serde_json::json!({"metadata": {"name": "l"}, "spec": {
            "leaderWorkerTemplate": {"size": 0, "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}}});
        lws.default(&mut obj);
        assert_eq!(obj["spec"]["replicas"], 1, "upstream's default: {obj}");
        let errs = lws.validate(&obj, None);
        assert!(
            errs.iter()
                .any(|e| e.field == "spec.leaderWorkerTemplate.size"),
            "{errs:?}"
        );
        assert!(!lws.strategic_merge(), "served as the upstream CRD");
    }

    #[test]
    fn names_follow_each_kinds_rule() {
        let rule = |info| builtin(info).name_rule();
        assert_eq!(rule(registry::of::<core::Namespace>()), NameRule::Label);
        assert_eq!(rule(registry::of::<core::Service>()), NameRule::Dns1035);
        assert_eq!(
            rule(registry::of::<minik8s_api::lws::LeaderWorkerSet>()),
            NameRule::Dns1035
        );
        assert_eq!(rule(registry::of::<core::Pod>()), NameRule::Subdomain);
        assert_eq!(Schemaless.name_rule(), NameRule::Subdomain);
        // What that means for a name with a dot.
        let named = serde_json::json!({"metadata": {"name": "a.b"}});
        assert!(validation::validate_metadata(&named, NameRule::Subdomain, true).is_empty());
        assert_eq!(
            validation::validate_metadata(&named, NameRule::Label, false)[0].field,
            "metadata.name"
        );
    }

    #[test]
    fn typed_strategies_reject_wrong_types_and_drop_unknown_fields() {
        let pods = builtin(registry::of::<core::Pod>());
        let err = pods
            .canonicalize(serde_json::json!({"spec": {"containers": "nope"}}))
            .unwrap_err();
        assert!(err.contains("invalid type"), "{err}");
        let out = pods
            .canonicalize(serde_json::json!({"metadata": {"name": "p"}, "bogus": 1}))
            .unwrap();
        assert!(out.get("bogus").is_none());
        // Kinds with a status get an empty one, as Go writes its struct:
        // fields without `omitempty` as zeros.
        assert_eq!(out["status"], serde_json::json!({}));
        let rs = builtin(registry::of::<minik8s_api::k8s::api::apps::v1::ReplicaSet>())
            .canonicalize(serde_json::json!({"metadata": {"name": "r"}}))
            .unwrap();
        assert_eq!(rs["status"], serde_json::json!({"replicas": 0}));
        let cm = builtin(registry::of::<core::ConfigMap>())
            .canonicalize(serde_json::json!({"metadata": {"name": "c"}}))
            .unwrap();
        assert!(cm.get("status").is_none(), "{cm}");
        // A run-time kind is kept as sent.
        let raw = serde_json::json!({"spec": {"anything": [1, "two"]}});
        assert_eq!(Schemaless.canonicalize(raw.clone()).unwrap(), raw);
        assert!(Schemaless.canonicalize_borrowed(&raw).is_none());
    }

    #[test]
    fn the_generation_follows_the_spec_or_everything_but_metadata_and_status() {
        use serde_json::json;
        let pod =
            json!({"metadata": {"name": "p"}, "spec": {"a": 1}, "status": {"phase": "Pending"}});
        let mut relabelled = pod.clone();
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        relabelled["status"]["phase"] = json!("Running");
        assert!(!generation_relevant_differs(&pod, &relabelled));
        let mut respec = pod.clone();
        respec["spec"]["a"] = json!(2);
        assert!(generation_relevant_differs(&pod, &respec));
        // Kinds without a spec: every other member counts, in any order.
        let cm = json!({"metadata": {"name": "c"}, "data": {"k": "v"}, "binaryData": {}});
        let reordered =
            json!({"binaryData": {}, "data": {"k": "v"}, "metadata": {"name": "c", "uid": "u"}});
        assert!(!generation_relevant_differs(&cm, &reordered));
        assert!(generation_relevant_differs(
            &cm,
            &json!({"metadata": {"name": "c"}, "data": {"k": "w"}, "binaryData": {}})
        ));
        assert!(generation_relevant_differs(
            &cm,
            &json!({"metadata": {"name": "c"}, "data": {"k": "v"}})
        ));
        // A spec on one side only.
        assert!(generation_relevant_differs(
            &cm,
            &json!({"metadata": {}, "spec": {}})
        ));
    }

    #[test]
    fn canonicalizing_in_place_or_from_a_borrow_gives_the_same_answer() {
        let pods = builtin(registry::of::<core::Pod>());
        for obj in [
            serde_json::json!({"spec": {"containers": "nope"}}),
            serde_json::json!({"metadata": {"name": "p", "labels": {"a": "b"}}, "bogus": 1,
                "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}),
        ] {
            let borrowed = pods.canonicalize_borrowed(&obj).expect("a typed kind");
            let validated = pods.validate_and_canonicalize(&obj, None);
            assert_eq!(validated.canonical.as_ref(), Some(&borrowed));
            assert_eq!(validated.errors, pods.validate(&obj, None));
            assert_eq!(borrowed, pods.canonicalize(obj));
        }
    }
}
