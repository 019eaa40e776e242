//! Dynamic admission: what the cluster's own objects add to the write path,
//! as Kubernetes' MutatingAdmissionPolicy, MutatingAdmissionWebhook,
//! ValidatingAdmissionPolicy and ValidatingAdmissionWebhook plugins do.
//!
//! ```text
//!  write ─▶ defaults ─▶ mutate(): MutatingAdmissionPolicies (CEL) ─▶ mutating webhooks
//!                      (JSONPatch; each kind reinvoked once if IfNeeded and the other changed it)
//!        ─▶ validation ─▶ validate(): ValidatingAdmissionPolicies (CEL) ─▶ validating webhooks ─▶ store
//! ```
//!
//! The configurations come from watch caches ([`Configs`]), so a request
//! never lists them. Which configurations apply: `matching.rs`; calling a
//! webhook: `webhook.rs`; policies: `policy.rs`.

mod matching;
mod mutating_policy;
mod policy;
pub mod quota;
mod webhook;

use crate::auth::UserInfo;
use crate::followed::Followed;
use crate::ApiServer;
use k8s_openapi::api::admissionregistration::v1 as admissionregistration;
use minik8s_api::registry::{self, ResourceInfo};
use minik8s_api::ApiError;
use serde_json::Value;
use std::sync::Arc;

pub use webhook::WebhookClients;

/// What a write does, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One request as admission sees it.
pub struct Attributes<'a> {
    pub info: &'a ResourceInfo,
    pub subresource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub operation: Operation,
    /// The object being written (None on delete).
    pub object: Option<&'a Value>,
    /// The stored object (update and delete).
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
}

/// Which of the [`Configs`] a followed kind fills.
type Pick = fn(&Configs) -> &Followed;

/// The admission configurations the server follows.
#[derive(Default)]
pub struct Configs {
    pub mutating: Followed,
    pub validating: Followed,
    pub policies: Followed,
    pub bindings: Followed,
    pub mutating_policies: Followed,
    pub mutating_bindings: Followed,
}

impl ApiServer {
    /// Starts following the six admission kinds (from `after`, the caches' start).
    pub(crate) fn follow_admission_configs(self: &Arc<Self>, after: i64) {
        let kinds: [(&ResourceInfo, Pick); 6] = [
            (
                registry::of::<admissionregistration::MutatingWebhookConfiguration>(),
                |c| &c.mutating,
            ),
            (
                registry::of::<admissionregistration::ValidatingWebhookConfiguration>(),
                |c| &c.validating,
            ),
            (
                registry::of::<admissionregistration::ValidatingAdmissionPolicy>(),
                |c| &c.policies,
            ),
            (
                registry::of::<admissionregistration::ValidatingAdmissionPolicyBinding>(),
                |c| &c.bindings,
            ),
            (
                registry::of::<admissionregistration::MutatingAdmissionPolicy>(),
                |c| &c.mutating_policies,
            ),
            (
                registry::of::<admissionregistration::MutatingAdmissionPolicyBinding>(),
                |c| &c.mutating_bindings,
            ),
        ];
        for (info, pick) in kinds {
            crate::followed::follow(self, info, after, move |srv| pick(&srv.admission));
        }
    }

    /// Mutating admission: the MutatingAdmissionPolicies bound, then every
    /// matching mutating webhook, in name order, may change the object; a
    /// policy that asked for it (`reinvocationPolicy: IfNeeded`) runs again
    /// when a webhook changed the object after it. Returns the object to
    /// validate and store.
    pub(crate) async fn admit_mutating(
        &self,
        a: &Attributes<'_>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        use mutating_policy::Pass;
        let bindings = self.admission.mutating_bindings.all();
        let policies = self.admission.mutating_policies.all();
        let (mut obj, reinvoke) = if bindings.is_empty() {
            (obj, false)
        } else {
            mutating_policy::mutate(self, a, &policies, &bindings, obj, Pass::First).await?
        };
        let configs = self.admission.mutating.all();
        if configs.is_empty() {
            return Ok(obj);
        }
        let before = reinvoke.then(|| obj.clone());
        obj = webhook::mutate(self, a, &configs, obj).await?;
        if before.is_some_and(|b| b != obj) {
            (obj, _) =
                mutating_policy::mutate(self, a, &policies, &bindings, obj, Pass::Reinvocation)
                    .await?;
        }
        Ok(obj)
    }

    /// Validating admission: policies, then validating webhooks.
    pub(crate) async fn admit_validating(
        &self,
        a: &Attributes<'_>,
        warnings: &crate::warnings::Warnings,
    ) -> Result<(), ApiError> {
        let bindings = self.admission.bindings.all();
        if !bindings.is_empty() {
            policy::validate(self, a, &self.admission.policies.all(), &bindings, warnings).await?;
        }
        let configs = self.admission.validating.all();
        if !configs.is_empty() {
            webhook::validate(self, a, &configs).await?;
        }
        Ok(())
    }
}
