//! The ServiceAccount controller: every namespace has a `default`
//! ServiceAccount, the account pods run as when they name none (Kubernetes'
//! serviceaccounts-controller). Created with the namespace, and again if
//! someone deletes it.
//!
//! ```text
//!  Namespace added/changed ─┐
//!  ServiceAccount "default" deleted ─┴─▶ reconcile(namespace) ─▶ create "default" if missing
//! ```

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::Event;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;

/// The account every namespace gets.
pub const DEFAULT: &str = "default";

pub struct ServiceAccountController {
    client: Client,
    namespaces: Cache<Namespace>,
    accounts: Cache<ServiceAccount>,
}

/// Whether `ns` needs its default account created: it is live and has none.
pub fn needs_default(ns: &Namespace, has_default: bool) -> bool {
    let terminating = ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
    !terminating && !has_default
}

impl ServiceAccountController {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(ServiceAccountController {
            client,
            namespaces: informers.cache(),
            accounts: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Namespace>(informers)?
            .watches::<ServiceAccount, _>(informers, |_, ev| match ev {
                Event::Deleted(sa) if sa.metadata.name.as_deref() == Some(DEFAULT) => {
                    sa.metadata.namespace.clone().into_iter().collect()
                }
                _ => Vec::new(),
            })
    }
}

impl Reconciler for ServiceAccountController {
    const NAME: &'static str = "serviceaccount";

    async fn reconcile(&self, namespace: &str) -> Result<Action, ClientError> {
        let Some(ns) = self.namespaces.get(namespace) else {
            return Ok(Action::Done);
        };
        let has_default = self
            .accounts
            .get(&format!("{namespace}/{DEFAULT}"))
            .is_some();
        if !needs_default(&ns, has_default) {
            return Ok(Action::Done);
        }
        let api = self
            .client
            .dynamic(registry::of::<ServiceAccount>(), Some(namespace));
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": DEFAULT, "namespace": namespace}});
        match api.create(&sa).await {
            Ok(_) => {
                tracing::info!(namespace, "created the default ServiceAccount");
                Ok(Action::Done)
            }
            // There already (the cache lags), or the namespace started terminating.
            Err(e)
                if e.api()
                    .is_some_and(|a| a.is_already_exists() || a.code == 403) =>
            {
                Ok(Action::Done)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_namespaces_without_one_need_it() {
        let ns = |phase: &str| -> Namespace {
            serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"phase": phase}}))
                .unwrap()
        };
        assert!(needs_default(&ns("Active"), false));
        assert!(!needs_default(&ns("Active"), true));
        assert!(!needs_default(&ns("Terminating"), false));
    }
}
