//! The generic REST operations every resource has: read, create, update
//! (PUT, PATCH and the status subresource), delete, delete collection, list.
//! What differs between kinds comes from the kind's strategy (`strategy/`);
//! nothing here looks at a kind's name.
//!
//! Every write goes through one path:
//! decode → type meta and server fields → defaulting → admission → validation
//! (422 with field causes) → typed canonicalization (400 on type errors, unknown
//! fields under `fieldValidation=Strict`) → allocation → store with a revision
//! precondition (a conflict re-reads and re-applies unless the client named a
//! resourceVersion).

use crate::admission::{Attributes, Operation};
use crate::decode::{normalize, FieldValidation};
use crate::managed;
use crate::params::Params;
use crate::store::StoreError;
use crate::stored::decode_object;
use crate::strategy;
use crate::ApiServer;
use axum::body::Bytes;
use k8s_openapi::api::core::v1::Namespace;
use minik8s_api::meta::{self, finalizers, is_deleting, metadata_mut, now_rfc3339};
use minik8s_api::registry::{self, ResourceInfo, Subresource};
use minik8s_api::ApiError;
use minik8s_trace::STEP;
use minik8s_validation::{self as validation, FieldError};
use serde_json::{json, Value};
use tracing::Instrument;

/// How many times a write is re-read and re-applied on a conflict before the
/// client sees 409 (each conflict means another writer made progress, so this
/// is only a guard; Kubernetes' GuaranteedUpdate has none).
const RETRIES: usize = 64;

/// Waits before the `attempt`-th re-read of an object whose write lost a race.
/// The first retry goes at once (usually one other writer got in first);
/// later ones wait a random moment of up to 2^attempt ms (at most 16), so that
/// writers which keep reaching the store in the same order, one of them always
/// last, are reshuffled instead of one losing every round until the guard
/// above answers 409 to an unconditional patch.
async fn back_off_after_conflict(attempt: usize) {
    if attempt < 2 {
        return;
    }
    let cap_ms = 1u64 << attempt.min(4);
    let wait = rand::Rng::gen_range(&mut rand::thread_rng(), 0..=cap_ms * 1000);
    tokio::time::sleep(std::time::Duration::from_micros(wait)).await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The main resource: status is kept as stored.
    Main,
    /// The status subresource: only status changes.
    Status,
    /// Spec and status together, for the server's own writes (binding).
    Whole,
    /// `pods/ephemeralcontainers`: only `spec.ephemeralContainers` changes.
    EphemeralContainers,
    /// `pods/resize`: only the containers' `resources` and `resizePolicy` change.
    Resize,
}

#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// `dryRun=All`: everything is checked, nothing is deleted.
    pub dry_run: bool,
    pub propagation: Option<String>,
    pub grace_period: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Who asks (None for the server's own deletions): admission sees it.
    pub user: Option<crate::auth::UserInfo>,
}

/// How a create or update is carried out.
#[derive(Clone, Debug, Default)]
pub struct WriteOpts {
    /// `fieldValidation`: what unknown fields in the body cause.
    pub field_validation: FieldValidation,
    /// `dryRun=All`: defaulted, validated and answered as if written, but not
    /// stored, and nothing (a Service's IP, a node port) allocated.
    pub dry_run: bool,
    /// The field manager the write is recorded for in `managedFields` (an
    /// Update entry); None leaves `managedFields` as the write left them (the
    /// server's own writes, and applies, which set them themselves).
    pub manager: Option<String>,
    /// The API version the client wrote with (`managedFields[].apiVersion`).
    pub api_version: String,
    /// The subresource written through ("" for the object itself).
    pub subresource: &'static str,
    /// Where admission leaves warnings for the answer's `Warning` headers.
    pub warnings: Warnings,
    /// Who writes (None for the server's own writes, which dynamic admission
    /// does not see).
    pub user: Option<crate::auth::UserInfo>,
}

pub use crate::warnings::Warnings;

impl WriteOpts {
    /// The admission attributes of this write, when a user makes it.
    fn attributes<'a>(
        &'a self,
        info: &'a ResourceInfo,
        namespace: Option<&'a str>,
        name: &'a str,
        operation: Operation,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
    ) -> Option<Attributes<'a>> {
        Some(Attributes {
            info,
            subresource: self.subresource,
            namespace,
            name,
            operation,
            object,
            old,
            user: self.user.as_ref()?,
            dry_run: self.dry_run,
        })
    }

    /// Records the write in `obj`'s `managedFields` (`old` None for a create).
    fn track(&self, old: Option<&Value>, obj: &mut Value) {
        if let Some(manager) = &self.manager {
            let now = now_rfc3339();
            let writer = managed::Writer {
                manager,
                api_version: &self.api_version,
                subresource: self.subresource,
                now: &now,
            };
            managed::track_update(old, obj, &writer);
        }
    }
}

/// One write on its way through admission: what [`ApiServer::mutate`] and
/// [`ApiServer::admit`] need to know of it.
#[derive(Clone, Copy)]
struct Write<'a> {
    info: &'a ResourceInfo,
    ns: Option<&'a str>,
    name: &'a str,
    operation: Operation,
    opts: &'a WriteOpts,
    strategy: &'a dyn strategy::Strategy,
}

impl<'a> Write<'a> {
    /// The admission attributes, when a user makes the write.
    fn attributes(
        &self,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
    ) -> Option<Attributes<'a>> {
        self.opts
            .attributes(self.info, self.ns, self.name, self.operation, object, old)
    }
}

pub(crate) use crate::store::store_err;

/// The stored form: the object without `resourceVersion` (the store's revision is it).
fn encode(obj: &Value) -> Bytes {
    if obj.pointer("/metadata/resourceVersion").is_none() {
        return Bytes::from(serde_json::to_vec(obj).unwrap_or_default());
    }
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    Bytes::from(serde_json::to_vec(&o).unwrap_or_default())
}

fn with_rv(mut obj: Value, rev: i64) -> Value {
    metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rev.to_string()));
    obj
}

/// What an update's body must agree with before it is laid over the stored
/// object: its type meta, the resourceVersion (the client's precondition:
/// 409 if `old`, at `rev`, is newer), the uid (a precondition too: a status
/// write must not land on an object recreated under the same name), and
/// the name and namespace of the URL.
fn check_update_body(
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    old: &Value,
    rev: i64,
    new: &mut Value,
) -> Result<(), ApiError> {
    check_type_meta(info, new)?;
    let client_rv = new
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if let Some(rv) = &client_rv {
        let parsed: i64 = rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
        if parsed != rev {
            return Err(ApiError::modified(info, name));
        }
    }
    // A uid in the body is a precondition (the kubelet's status write
    // must not land on a pod recreated under the same name).
    let body_uid = new.pointer("/metadata/uid").and_then(Value::as_str);
    if let Some(u) = body_uid.filter(|u| !u.is_empty() && *u != meta::uid(old)) {
        let message = format!(
            "Precondition failed: UID in precondition: {u}, UID in object meta: {}",
            meta::uid(old)
        );
        return Err(ApiError::conflict(info, name, &message));
    }
    let body_name = meta::name(new);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if let (Some(b), Some(u)) = (meta::namespace(new), ns) {
        if info.namespaced && b != u {
            return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
        }
    }
    Ok(())
}

/// `metadata.generation` + 1 when the update changes what the kind counts
/// (its spec, for most kinds).
fn bump_generation(strategy: &dyn strategy::Strategy, old: &Value, merged: &mut Value) {
    let relevant_changed = match strategy.generation_relevant(merged) {
        Some(now) => strategy.generation_relevant(old) != Some(now),
        None => strategy::generation_relevant_differs(merged, old),
    };
    if relevant_changed {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        merged["metadata"]["generation"] = json!(g);
    }
}

/// The metadata the server sets on a create: the request's namespace (a
/// different one in the body is a 400), a name from `generateName`, a new
/// uid, the creation time and generation 1, and none of the fields only
/// a stored object has.
fn server_set_create_metadata(
    info: &ResourceInfo,
    ns: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let m = metadata_mut(obj);
    let body_ns = m
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if info.namespaced {
        if let (Some(b), Some(u)) = (&body_ns, ns) {
            if b != u {
                return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
            }
        }
        m.insert("namespace".into(), json!(ns.unwrap_or("default")));
    } else {
        m.remove("namespace");
    }
    let has_name = m
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name {
        if let Some(prefix) = m
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        {
            let generated = format!("{prefix}{}", random_suffix());
            m.insert("name".into(), json!(generated));
        }
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now_rfc3339()));
    m.insert("generation".into(), json!(1));
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(f);
    }
    Ok(())
}

/// A delete's preconditions (`preconditions.uid`, `.resourceVersion`)
/// against the stored object: 409 when one does not hold.
fn delete_preconditions(
    info: &ResourceInfo,
    name: &str,
    opts: &DeleteOptions,
    obj: &Value,
    rev: i64,
) -> Result<(), ApiError> {
    if opts.uid.as_deref().is_some_and(|u| u != meta::uid(obj)) {
        return Err(ApiError::conflict(
            info,
            name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                opts.uid.as_deref().unwrap_or(""),
                meta::uid(obj)
            ),
        ));
    }
    if opts
        .resource_version
        .as_deref()
        .is_some_and(|v| v != rev.to_string())
    {
        return Err(ApiError::conflict(info, name, &format!("Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {rev}", opts.resource_version.as_deref().unwrap_or(""))));
    }
    Ok(())
}

/// The stored object as a delete leaves it (finalizers for the propagation
/// asked, the deletion timestamp and grace period), and whether it goes at
/// once (no grace, no finalizer).
fn marked_for_deletion(
    strategy: &dyn strategy::Strategy,
    obj: &Value,
    opts: &DeleteOptions,
) -> (Value, bool) {
    let mut updated = obj.clone();
    metadata_mut(&mut updated).remove("resourceVersion");
    let mut fin = finalizers(obj);
    // Propagation is carried out by the garbage collector through these finalizers.
    match opts.propagation.as_deref() {
        Some("Orphan") if !fin.iter().any(|f| f == "orphan") && !is_deleting(obj) => {
            fin.push("orphan".into())
        }
        Some("Foreground")
            if !fin.iter().any(|f| f == "foregroundDeletion") && !is_deleting(obj) =>
        {
            fin.push("foregroundDeletion".into())
        }
        _ => {}
    }
    if fin != finalizers(obj) {
        metadata_mut(&mut updated).insert("finalizers".into(), json!(fin));
    }
    let graceful = strategy.grace_period(obj, opts.grace_period);
    if let Some(grace) = graceful {
        let m = metadata_mut(&mut updated);
        let deadline = chrono::Utc::now() + chrono::Duration::seconds(grace);
        let current = m.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
        if current.is_none_or(|c| grace < c) {
            m.insert(
                "deletionTimestamp".into(),
                json!(deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
    } else if !fin.is_empty() || strategy.two_phase_delete() {
        let m = metadata_mut(&mut updated);
        // A delete of grace 0 (the kubelet's last word on its pod)
        // shortens a graceful deletion already under way: once the
        // finalizers are gone, the object goes.
        let graceful_before = m
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|g| g > 0);
        if !m.contains_key("deletionTimestamp") || graceful_before {
            m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        strategy.mark_deleting(&mut updated);
    }
    let immediate = graceful.is_none() && fin.is_empty() && !strategy.finalizers_pending(&updated);
    (updated, immediate)
}

/// Status writers may not set finalizers on a deleting object; nobody may
/// add them then.
fn no_finalizers_added_while_deleting(
    info: &ResourceInfo,
    name: &str,
    old: &Value,
    merged: &Value,
) -> Result<(), ApiError> {
    if !is_deleting(old) {
        return Ok(());
    }
    let added = finalizers(merged)
        .into_iter()
        .any(|f| !finalizers(old).contains(&f));
    match added {
        true => Err(ApiError::invalid(
            info,
            name,
            &[FieldError::forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted",
            )],
        )),
        false => Ok(()),
    }
}

/// Whether writing `merged` over `old` completes a deletion: the last
/// finalizer removed from a deleting object, once its grace period is over
/// (Kubernetes' shouldDeleteDuringUpdate). Any other write to a deleting
/// object (a terminating pod's status) leaves it in place.
fn completes_deletion(strategy: &dyn strategy::Strategy, old: &Value, merged: &Value) -> bool {
    let had_finalizers = !finalizers(old).is_empty() || strategy.finalizers_pending(old);
    let grace_over = merged
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_none_or(|g| g == 0);
    is_deleting(merged)
        && had_finalizers
        && grace_over
        && finalizers(merged).is_empty()
        && !strategy.finalizers_pending(merged)
}

/// The field errors of an update: metadata, then the kind's rules, which
/// the pod subresources see with their own fields unchanged after checking
/// those on their own (with the stored form the rules' decode made).
fn update_errors(
    info: &ResourceInfo,
    strategy: &dyn strategy::Strategy,
    mode: Mode,
    merged: &Value,
    old: &Value,
) -> strategy::Validated {
    let mut errs = validation::validate_metadata(merged, strategy.name_rule(), info.namespaced);
    errs.extend(validation::validate_metadata_update(merged, old));
    let kind_rules = match mode {
        Mode::EphemeralContainers => {
            // The one write that may change a pod's spec there: checked on its own,
            // then the usual pod-update rules see the list as unchanged.
            errs.extend(validation::validate_ephemeral_containers_update(
                merged, old,
            ));
            let mut before = old.clone();
            before["spec"]["ephemeralContainers"] = merged["spec"]["ephemeralContainers"].clone();
            strategy.validate_and_canonicalize(merged, Some(&before))
        }
        Mode::Resize => {
            // Checked as Kubernetes' ValidatePodResize; the usual
            // pod-update rules then see the resources as unchanged.
            errs.extend(validation::validate_pod_resize(merged, old));
            strategy.validate_and_canonicalize(merged, Some(&with_resize_fields(old, merged)))
        }
        Mode::Main | Mode::Status | Mode::Whole => {
            strategy.validate_and_canonicalize(merged, Some(old))
        }
    };
    errs.extend(kind_rules.errors);
    strategy::Validated {
        errors: errs,
        canonical: kind_rules.canonical,
    }
}

/// The object an update of `mode` writes: what the client sent (`new`)
/// laid over the stored object (`old`) as far as the mode allows — the
/// main resource keeps the stored status, the status subresource only
/// changes status (and the labels and annotations sent with it), the pod
/// subresources only their fields — with the metadata only the server
/// sets (uid, creation, deletion, generation) carried over from `old`.
fn merged_for(
    strategy: &dyn strategy::Strategy,
    info: &ResourceInfo,
    mode: Mode,
    name: &str,
    old: &Value,
    new: Value,
) -> Value {
    let mut merged = match mode {
        Mode::Main => {
            let mut m = new;
            if info.has(Subresource::Status) {
                match old.get("status") {
                    Some(s) => m["status"] = s.clone(),
                    None => {
                        if let Some(o) = m.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
            m
        }
        Mode::Whole => new,
        Mode::EphemeralContainers => {
            let mut m = old.clone();
            match new.pointer("/spec/ephemeralContainers") {
                Some(list) => m["spec"]["ephemeralContainers"] = list.clone(),
                None => {
                    if let Some(spec) = m.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("ephemeralContainers");
                    }
                }
            }
            m
        }
        Mode::Resize => with_resize_fields(old, &new),
        Mode::Status => {
            let mut m = old.clone();
            match new.get("status") {
                Some(s) => m["status"] = s.clone(),
                None => {
                    if let Some(o) = m.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            // Ownership written with the status (an apply's) comes along.
            if let Some(mf) = new.pointer("/metadata/managedFields") {
                metadata_mut(&mut m).insert("managedFields".into(), mf.clone());
            }
            // As Kubernetes' status strategies: only the spec is the
            // old one's; labels and annotations sent with the status
            // are kept (kubectl label --subresource=status), unless
            // the kind resets them.
            for field in ["labels", "annotations"] {
                match new.pointer(&format!("/metadata/{field}")) {
                    Some(v) if !v.is_null() => {
                        metadata_mut(&mut m).insert(field.into(), v.clone());
                    }
                    _ => {
                        metadata_mut(&mut m).remove(field);
                    }
                }
            }
            strategy.prepare_for_status_update(&mut m, old);
            m
        }
    };
    {
        let om = &old["metadata"];
        let m = metadata_mut(&mut merged);
        m.insert("name".into(), json!(name));
        if info.namespaced {
            m.insert("namespace".into(), om["namespace"].clone());
        } else {
            m.remove("namespace");
        }
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match om.get(f) {
                Some(v) => m.insert(f.into(), v.clone()),
                None => m.remove(f),
            };
        }
        m.remove("resourceVersion");
    }
    merged
}

/// `base` with the containers' `resources` and `resizePolicy` of `from`
/// (matched by name), as Kubernetes' resize strategy keeps only those of a
/// `pods/resize` write: anything else the request changed is dropped.
fn with_resize_fields(base: &Value, from: &Value) -> Value {
    let mut out = base.clone();
    for list in ["initContainers", "containers"] {
        let Some(target) = out
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        let source = from
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for c in target.iter_mut().filter_map(Value::as_object_mut) {
            let name = c.get("name").cloned();
            let Some(new) = source
                .into_iter()
                .flatten()
                .find(|n| n.get("name") == name.as_ref())
            else {
                continue;
            };
            for field in ["resources", "resizePolicy"] {
                match new.get(field) {
                    Some(v) => {
                        c.insert(field.into(), v.clone());
                    }
                    None => {
                        c.remove(field);
                    }
                }
            }
        }
    }
    out
}
fn random_suffix() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::thread_rng();
    (0..5)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect()
}

/// Checks or fills `apiVersion`/`kind` against the URL's resource.
fn check_type_meta(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let api_version = info.api_version();
    for (field, want) in [("apiVersion", api_version.as_str()), ("kind", &info.kind)] {
        match obj.get(field).and_then(Value::as_str) {
            None | Some("") => obj[field] = json!(want),
            Some(have) if have == want => {}
            Some(have) => {
                return Err(ApiError::bad_request(format!("the API version in the data ({}) does not match the expected API version ({api_version}) or kind ({have}) does not match {}", obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""), info.kind)));
            }
        }
    }
    Ok(())
}

impl ApiServer {
    /// Reads one object with its revision.
    pub async fn read(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(Value, i64), ApiError> {
        let kv = self.stored(info, ns, name).await?;
        let obj = decode_object(&kv.value, kv.mod_revision)
            .ok_or_else(|| ApiError::internal(format!("stored object {} is not JSON", kv.key)))?;
        Ok((obj, kv.mod_revision))
    }

    /// One object as stored (404 when there is none).
    pub(crate) async fn stored(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<crate::store::KeyValue, ApiError> {
        self.store
            .get(&info.key(ns, name))
            .await
            .map_err(|e| store_err(info, name, e))?
            .ok_or_else(|| ApiError::not_found(info, name))
    }

    async fn check_namespace(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| info.namespaced) else {
            return Ok(());
        };
        let forbidden = || {
            ApiError::forbidden(
                info,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )
        };
        // Known namespaces are answered from memory; unknown ones are read from the store
        // (a namespace created a moment ago may not have reached the cache yet).
        match self.namespaces.lookup(ns) {
            Some(true) => return Err(forbidden()),
            Some(false) => return Ok(()),
            None => {}
        }
        let ns_info = registry::of::<Namespace>();
        match self.read(ns_info, None, ns).await {
            Err(e) if e.is_not_found() => Err(ApiError::not_found(ns_info, ns)),
            Err(e) => Err(e),
            Ok((nso, _)) if is_deleting(&nso) => Err(forbidden()),
            Ok(_) => Ok(()),
        }
    }

    /// The mutating half of admission, the same for create and update: a
    /// user's write goes through the mutating webhooks and policies, then
    /// the kind's defaults again over what they changed.
    async fn mutate(
        &self,
        write: &Write<'_>,
        obj: Value,
        old: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let Some(attributes) = write.attributes(None, old) else {
            return Ok(obj);
        };
        let mut obj = self.admit_mutating(&attributes, obj).await?;
        write.strategy.default(&mut obj);
        Ok(obj)
    }

    /// The validating half, the same for create and update, in Kubernetes'
    /// order: the field errors the caller found (`errs`: metadata and the
    /// kind's rules) and the references that name nothing are one 422; then
    /// the kind's own admission (403), its warnings, what the writer must
    /// hold (RBAC escalation, 403), the validating webhooks and policies,
    /// and Pod Security.
    async fn admit(
        &self,
        write: &Write<'_>,
        obj: &Value,
        old: Option<&Value>,
        mut errs: validation::Errors,
    ) -> Result<(), ApiError> {
        let Write {
            info,
            ns,
            name,
            opts,
            strategy,
            ..
        } = *write;
        let ctx = self.strategy_context();
        errs.extend(strategy::missing(&ctx, strategy.references(obj, old), ns).await);
        if !errs.is_empty() {
            return Err(ApiError::invalid(info, name, &errs));
        }
        strategy
            .admit(&ctx, obj, old)
            .map_err(|why| ApiError::forbidden(info, name, &why))?;
        for w in strategy.warnings(obj) {
            opts.warnings.push(w);
        }
        if let Some(user) = opts.user.as_ref().filter(|u| self.checks_writer(u)) {
            let writer = strategy::Writer {
                user,
                authority: self,
            };
            strategy
                .admit_writer(&writer, obj)
                .map_err(|why| ApiError::forbidden(info, name, &why))?;
        }
        if let Some(attributes) = write.attributes(Some(obj), old) {
            self.admit_validating(&attributes, &opts.warnings).await?;
        }
        self.pod_security(info, ns, obj, old, &opts.warnings).await
    }

    /// Creates an object (POST).
    pub async fn create(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        mut obj: Value,
        opts: WriteOpts,
    ) -> Result<Value, ApiError> {
        check_type_meta(info, &mut obj)?;
        server_set_create_metadata(info, ns, &mut obj)?;
        let name = meta::name(&obj).to_string();
        // Status is the controllers' to write; a created object starts without one.
        let strategy = self.strategy(info);
        if info.has(Subresource::Status) && !strategy.keeps_status_on_create() {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        strategy.default(&mut obj);
        if let Some(user) = &opts.user {
            strategy.record_creator(user, &mut obj);
        }
        strategy
            .prepare_for_create(&self.strategy_context(), &mut obj)
            .map_err(|e| ApiError::invalid(info, &name, &[e]))?;
        strategy
            .admit_create(&self.strategy_context(), &mut obj)
            .await
            .map_err(|why| ApiError::forbidden(info, &name, &why))?;
        let obj_ns = info
            .namespaced
            .then(|| meta::namespace(&obj).unwrap_or("default").to_string());
        self.limit_ranger_defaults(info, obj_ns.as_deref(), &mut obj);
        let write = Write {
            info,
            ns,
            name: &name,
            operation: Operation::Create,
            opts: &opts,
            strategy: &*strategy,
        };
        let obj = self
            .mutate(&write, obj, None)
            .instrument(tracing::debug_span!(target: STEP, "mutating admission"))
            .await?;
        self.trace_contexts
            .set_on_create(&info.group, &info.plural, &obj);
        let (canonical, errs) = validate_created(info, &*strategy, &obj);
        self.admit(&write, &obj, None, errs)
            .instrument(tracing::debug_span!(target: STEP, "validating admission"))
            .await?;
        self.check_namespace(info, ns, &name).await?;
        self.limit_ranger_check(info, obj_ns.as_deref(), &name, &obj, None)?;
        let mut obj = normalize(
            info,
            &*strategy,
            obj,
            canonical,
            opts.field_validation,
            &opts.warnings,
        )?;
        managed::carry_over(None, &mut obj);
        opts.track(None, &mut obj);
        let key = info.key(ns, &name);
        // The ResourceQuota admission runs last: it charges what the write uses.
        let charge = self
            .charge_quota(info, obj_ns.as_deref(), &name, &obj, None, opts.dry_run)
            .await?;
        if opts.dry_run {
            return match self.store.get(&key).await {
                Ok(Some(_)) => Err(ApiError::already_exists(info, &name)),
                Ok(None) => Ok(obj),
                Err(e) => Err(store_err(info, &name, e)),
            };
        }
        let allocated = match strategy.allocate(&self.alloc, &mut obj, None) {
            Ok(a) => a,
            Err(e) => {
                self.release_quota(charge).await;
                return Err(ApiError::invalid(info, &name, &[e]));
            }
        };
        let stored = self
            .store
            .create(&key, encode(&obj))
            .instrument(tracing::debug_span!(target: STEP, "store", %key))
            .await;
        match stored {
            Ok(rev) => {
                tracing::debug!(target: STEP, revision = rev, "stored");
                Ok(with_rv(obj, rev))
            }
            Err(e) => {
                strategy::release(&self.alloc, &allocated);
                self.release_quota(charge).await;
                Err(store_err(info, &name, e))
            }
        }
    }

    /// Reads, changes (with `change`), validates and writes an object, retrying on
    /// conflicts that the client did not ask to see.
    pub async fn update_with<F>(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        mode: Mode,
        opts: WriteOpts,
        change: F,
    ) -> Result<Value, ApiError>
    where
        F: Fn(&Value) -> Result<Value, ApiError>,
    {
        for attempt in 0..RETRIES {
            back_off_after_conflict(attempt).await;
            let (old, rev) = self.read(info, ns, name).await?;
            let mut new = change(&old)?;
            if !new.is_object() {
                return Err(ApiError::bad_request("the object must be a JSON object"));
            }
            check_update_body(info, ns, name, &old, rev, &mut new)?;
            let strategy = self.strategy(info);
            let merged = merged_for(&*strategy, info, mode, name, &old, new);
            no_finalizers_added_while_deleting(info, name, &old, &merged)?;
            let write = Write {
                info,
                ns,
                name,
                operation: Operation::Update,
                opts: &opts,
                strategy: &*strategy,
            };
            let Some(merged) = self.admit_update(&write, mode, merged, &old).await? else {
                // No change: no write, same resourceVersion, no watch event (as Kubernetes).
                return Ok(old);
            };
            if opts.dry_run {
                return Ok(with_rv(merged, rev));
            }
            match self.store_update(&write, mode, merged, &old, rev).await? {
                Some(written) => return Ok(written),
                // Someone wrote in between: read again and re-apply the change. A
                // client's own resourceVersion precondition is checked against the
                // fresh read above, so it still fails with 409 (Kubernetes'
                // GuaranteedUpdate); a patch carries the current version it was
                // applied to, so it is simply re-applied.
                None => continue,
            }
        }
        Err(ApiError::modified(info, name))
    }

    /// An update's object through defaults, mutating admission, the
    /// kind's update preparation, validation, validating admission and
    /// canonicalization, with its managed fields; None when it equals the
    /// stored object (nothing to write).
    async fn admit_update(
        &self,
        write: &Write<'_>,
        mode: Mode,
        mut merged: Value,
        old: &Value,
    ) -> Result<Option<Value>, ApiError> {
        let (info, ns, name, strategy, opts) =
            (write.info, write.ns, write.name, write.strategy, write.opts);
        strategy.default(&mut merged);
        let mut merged = self.mutate(write, merged, Some(old)).await?;
        self.trace_contexts
            .on_update(&write.info.group, &write.info.plural, &merged);
        strategy.prepare_for_update(&mut merged, old);
        bump_generation(strategy, old, &mut merged);
        let validated = update_errors(info, strategy, mode, &merged, old);
        self.admit(write, &merged, Some(old), validated.errors)
            .await?;
        if mode == Mode::Main {
            self.limit_ranger_check(info, ns, name, &merged, Some(old))?;
        }
        let mut merged = normalize(
            info,
            strategy,
            merged,
            validated.canonical,
            opts.field_validation,
            &opts.warnings,
        )?;
        managed::carry_over(Some(old), &mut merged);
        // Compared with the old object's resourceVersion lent for the
        // moment (cloning `old` for this cost a copy per write).
        let rv = old["metadata"].get("resourceVersion").cloned();
        if let Some(rv) = rv {
            metadata_mut(&mut merged).insert("resourceVersion".into(), rv);
        }
        let unchanged = merged == *old;
        metadata_mut(&mut merged).remove("resourceVersion");
        if unchanged {
            return Ok(None);
        }
        opts.track(Some(old), &mut merged);
        Ok(Some(merged))
    }

    /// Writes an admitted update at revision `rev`, taking what it needs
    /// from the pools and the quota first (given back if the write does not
    /// land); None when someone wrote in between.
    async fn store_update(
        &self,
        write: &Write<'_>,
        mode: Mode,
        mut merged: Value,
        old: &Value,
        rev: i64,
    ) -> Result<Option<Value>, ApiError> {
        let (info, ns, name, strategy) = (write.info, write.ns, write.name, write.strategy);
        let allocated = strategy
            .allocate(&self.alloc, &mut merged, Some(old))
            .map_err(|e| ApiError::invalid(info, name, &[e]))?;
        let charge = match matches!(mode, Mode::Main | Mode::Resize) {
            true => {
                self.charge_quota(info, ns, name, &merged, Some(old), false)
                    .await
            }
            false => Ok(Default::default()),
        };
        let charge = match charge {
            Ok(c) => c,
            Err(e) => {
                strategy::release(&self.alloc, &allocated);
                return Err(e);
            }
        };
        let key = info.key(ns, name);
        let deletes = completes_deletion(strategy, old, &merged);
        let written = match deletes {
            true => self
                .store
                .delete(&key, Some(rev))
                .await
                .map(|(_, deleted_at)| deleted_at),
            false => self.store.update(&key, encode(&merged), Some(rev)).await,
        };
        match written {
            Ok(new_rev) => {
                // A completed deletion gives back all it held, an update
                // what it no longer uses.
                match deletes {
                    true => strategy.release(&self.alloc, &merged),
                    false => {
                        strategy::release(&self.alloc, &strategy.released_by_update(old, &merged))
                    }
                }
                Ok(Some(with_rv(merged, new_rev)))
            }
            Err(e) => {
                // What this attempt took goes back: its write did not land.
                strategy::release(&self.alloc, &allocated);
                self.release_quota(charge).await;
                match e {
                    StoreError::Conflict { .. } => Ok(None),
                    e => Err(store_err(info, name, e)),
                }
            }
        }
    }

    /// Deletes an object: gracefully for bound pods, after finalizers for any object.
    pub async fn delete(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let strategy = self.strategy(info);
        if let Err(why) = strategy.check_delete(name) {
            return Err(ApiError::forbidden(info, name, why));
        }
        for attempt in 0..RETRIES {
            back_off_after_conflict(attempt).await;
            let (obj, rev) = self.read(info, ns, name).await?;
            if let Some(user) = &opts.user {
                let a = Attributes {
                    info,
                    subresource: "",
                    namespace: ns,
                    name,
                    operation: Operation::Delete,
                    object: None,
                    old: Some(&obj),
                    user,
                    dry_run: opts.dry_run,
                };
                self.admit_validating(&a, &Warnings::default()).await?;
            }
            delete_preconditions(info, name, opts, &obj, rev)?;
            let (updated, immediate) = marked_for_deletion(&*strategy, &obj, opts);
            if opts.dry_run {
                // What the answer would be: the object, marked if it would linger.
                return Ok(if immediate {
                    obj
                } else {
                    with_rv(updated, rev)
                });
            }
            if immediate {
                match self.store.delete(&info.key(ns, name), Some(rev)).await {
                    Ok(_) => {
                        strategy.release(&self.alloc, &obj);
                        return Ok(obj);
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(store_err(info, name, e)),
                }
            }
            let mut obj_cmp = obj.clone();
            metadata_mut(&mut obj_cmp).remove("resourceVersion");
            if updated == obj_cmp {
                return Ok(obj);
            }
            match self
                .store
                .update(&info.key(ns, name), encode(&updated), Some(rev))
                .await
            {
                Ok(new_rev) => {
                    let out = with_rv(updated, new_rev);
                    strategy.deletion_started(&self.strategy_context(), name);
                    return Ok(out);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_err(info, name, e)),
            }
        }
        Err(ApiError::modified(info, name))
    }

    pub async fn delete_collection(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let list = self.list(info, ns, params).await?;
        let mut items = Vec::new();
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            match self
                .delete(info, meta::namespace(&item), meta::name(&item), opts)
                .await
            {
                Ok(v) => items.push(v),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(
            json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {}, "items": items}),
        )
    }
}

/// A new object's field errors (metadata and the kind's rules) and its
/// canonical form: the journey's "validation" step.
fn validate_created(
    info: &ResourceInfo,
    strategy: &dyn crate::strategy::Strategy,
    obj: &Value,
) -> (Option<Result<Value, String>>, validation::Errors) {
    let _step = tracing::debug_span!(target: STEP, "validation").entered();
    let mut errs = validation::validate_metadata(obj, strategy.name_rule(), info.namespaced);
    let validated = strategy.validate_and_canonicalize(obj, None);
    errs.extend(validated.errors);
    if !errs.is_empty() {
        tracing::debug!(target: STEP, errors = errs.len(), "invalid");
    }
    (validated.canonical, errs)
}
