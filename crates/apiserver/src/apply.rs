//! Server-side apply: `PATCH` with `application/apply-patch+yaml`.
//!
//! ```text
//! kubectl apply --server-side ─▶ PATCH …/configmaps/c?fieldManager=kubectl&force=false
//!        │                       body: the whole configuration the applier wants
//!        ▼
//!   ApiServer::apply ── object exists? ──no──▶ managed::apply(None, …) ─▶ create (201)
//!        │yes
//!        ▼
//!   update_with(|live| managed::apply(Some(live), …))   409 on conflicts unless force
//!        │ (defaulting, validation, store as any update)
//!        ▼
//!   the object, with managedFields naming the applier (operation: Apply)
//! ```
//!
//! The field-ownership model itself (sets, merge, conflicts) is pure and lives
//! in `crate::managed`; this file decides only what an apply may touch.

use crate::managed::{self, ApplyError, Writer};
use crate::params::Params;
use crate::rest::{Mode, WriteOpts};
use crate::ApiServer;
use minik8s_api::meta::{metadata_mut, now_rfc3339};
use minik8s_api::registry::{ResourceInfo, Subresource};
use minik8s_api::ApiError;
use serde_json::{json, Value};

/// `?fieldManager=`, else the program named by the User-Agent (client-go's
/// default: `kubectl/v1.32.4 (linux/amd64) …` writes as `kubectl`).
pub(crate) fn field_manager(params: &Params, user_agent: Option<&str>) -> Result<String, ApiError> {
    let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
        let program = user_agent.unwrap_or("").split('/').next().unwrap_or("");
        return Ok(program.chars().take(128).collect());
    };
    if manager.len() > 128 {
        return Err(ApiError::new(
            422,
            "Invalid",
            "fieldManager: Too long: may not be more than 128 bytes",
        ));
    }
    if manager.chars().any(char::is_control) {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "fieldManager: Invalid value: {manager:?}: must only contain printable characters"
            ),
        ));
    }
    Ok(manager.to_string())
}

/// An apply's `fieldManager` (required) and `force`.
pub(crate) fn apply_params(params: &Params) -> Result<(String, bool), ApiError> {
    let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    };
    // Go's ParseBool: the Python client sends `True`.
    let force = match params.get("force") {
        None | Some("" | "0" | "f" | "F" | "false" | "False" | "FALSE") => false,
        Some("1" | "t" | "T" | "true" | "True" | "TRUE") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid boolean value for force: {other:?}"
            )))
        }
    };
    Ok((manager.to_string(), force))
}

/// One apply request.
pub struct ApplyRequest {
    /// The configuration the applier wants (the patch body).
    pub applied: Value,
    /// `fieldManager` (required for apply).
    pub manager: String,
    /// `force=true`: take the conflicting fields instead of failing.
    pub force: bool,
}

impl ApiServer {
    /// Applies `req` to the object `name` (creating it if it does not exist).
    /// Returns whether it was created, and the object.
    pub async fn apply(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        mode: Mode,
        req: ApplyRequest,
        opts: WriteOpts,
    ) -> Result<(bool, Value), ApiError> {
        let applied = applicable_part(info, mode, name, req.applied)?;
        let now = now_rfc3339();
        let api_version = opts.api_version.clone();
        let writer = Writer {
            manager: &req.manager,
            api_version: &api_version,
            subresource: opts.subresource,
            now: &now,
        };
        // The apply sets managedFields itself; the update path must not track it again.
        let write = WriteOpts {
            manager: None,
            ..opts
        };
        let merge = |live: Option<&Value>| {
            managed::apply(live, &applied, &writer, req.force).map_err(|e| match e {
                ApplyError::Conflicts(c) => managed::conflict_error(&c),
            })
        };
        // An object created by someone else between our read and our create is
        // applied to on the next round.
        for _ in 0..3 {
            match self
                .update_with(info, ns, name, mode, write.clone(), |live| {
                    merge(Some(live))
                })
                .await
            {
                Err(e) if e.is_not_found() && mode == Mode::Main => {
                    match self.create(info, ns, merge(None)?, write.clone()).await {
                        Err(e) if e.is_already_exists() => continue,
                        other => return other.map(|o| (true, o)),
                    }
                }
                other => return other.map(|o| (false, o)),
            }
        }
        Err(ApiError::modified(info, name))
    }
}

/// The part of an applied configuration this request may set: the object
/// without its status, or only the status through the status subresource
/// (Kubernetes' reset fields). The configuration must say what it is.
fn applicable_part(
    info: &ResourceInfo,
    mode: Mode,
    name: &str,
    mut applied: Value,
) -> Result<Value, ApiError> {
    let Some(obj) = applied.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    };
    for field in ["apiVersion", "kind"] {
        if obj
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "error decoding patch: Object '{}' is missing in '{}'",
                if field == "kind" {
                    "Kind"
                } else {
                    "apiVersion"
                },
                applied
            )));
        }
    }
    match mode {
        Mode::Status => {
            let keep = ["apiVersion", "kind", "metadata", "status"];
            obj.retain(|k, _| keep.contains(&k.as_str()));
        }
        _ if info.has(Subresource::Status) => {
            obj.remove("status");
        }
        _ => {}
    }
    let meta = metadata_mut(&mut applied);
    if meta
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        meta.insert("name".into(), json!(name));
    }
    Ok(applied)
}
