//! Namespace deletion: a deleted namespace is `Terminating` (the apiserver
//! refuses new content in it); this controller deletes everything inside,
//! kind by kind, and once nothing is left releases the namespace's
//! `kubernetes` finalizer through `PUT .../finalize`, so the namespace goes.
//!
//! ```text
//!  Namespace deletionTimestamp set ─▶ for each namespaced kind: DELETE every object
//!        (background propagation; objects with finalizers may take a while)
//!  all lists empty ─▶ spec.finalizers = [] via /finalize ─▶ apiserver removes it
//! ```

use k8s_openapi::api::core::v1::Namespace;
use minik8s_api::registry::{self, REGISTRY};
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::object_key;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{
    Cache, Client, ClientError, DeleteParams, ListParams, SharedInformers, WorkQueue,
};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// What is left to do for a terminating namespace (pure).
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Not terminating: nothing to do.
    Nothing,
    /// Objects remain: delete the ones not yet being deleted, come back later.
    Delete(Vec<(&'static str, String)>),
    /// Some objects are still finishing (finalizers, graceful pods): wait.
    Wait,
    /// Empty: release the finalizer.
    Finalize,
}

/// Decides from the namespace and its remaining objects, per kind (plural, object).
pub fn step(ns: &Namespace, remaining: &[(&'static str, Value)]) -> Step {
    if ns.metadata.deletion_timestamp.is_none() {
        return Step::Nothing;
    }
    if remaining.is_empty() {
        return Step::Finalize;
    }
    let to_delete: Vec<(&'static str, String)> = remaining
        .iter()
        .filter(|(_, o)| o["metadata"]["deletionTimestamp"].is_null())
        .map(|(plural, o)| {
            (
                *plural,
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    if to_delete.is_empty() {
        Step::Wait
    } else {
        Step::Delete(to_delete)
    }
}

/// How soon a deleting namespace is looked at again while objects go.
const RECHECK: Duration = Duration::from_millis(500);

pub struct NamespaceController {
    client: Client,
    namespaces: Cache<Namespace>,
}

impl NamespaceController {
    /// Builds the controller on the shared Namespace informer: it wakes for
    /// namespaces being deleted.
    pub fn new(
        client: Client,
        informers: &SharedInformers,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(NamespaceController {
            client,
            namespaces: informers.cache(),
        });
        Controller::new(ctl, WorkQueue::new()).watches::<Namespace, _>(informers, |_, ev| {
            let meta = &ev.object().metadata;
            match meta.deletion_timestamp {
                Some(_) => vec![object_key(meta)],
                None => Vec::new(),
            }
        })
    }
}

impl Reconciler for NamespaceController {
    const NAME: &'static str = "namespace";

    /// Empties a deleting namespace, then releases its finalizer.
    async fn reconcile(&self, name: &str) -> Result<Action, ClientError> {
        let Some(ns) = self.namespaces.get(name) else {
            return Ok(Action::Done);
        };
        if ns.metadata.deletion_timestamp.is_none() {
            return Ok(Action::Done);
        }
        // Live lists (not caches): the namespace may only go once it is
        // really empty. Every kind at once: one round trip, not forty.
        let lists = REGISTRY
            .iter()
            .filter(|i| i.namespaced)
            .map(|info| async move {
                let list = self
                    .client
                    .dynamic(info, Some(name))
                    .list(&ListParams::default())
                    .await?;
                Ok::<_, ClientError>((info.plural, list))
            });
        let mut remaining = Vec::new();
        for (plural, list) in futures::future::try_join_all(lists).await? {
            for item in list["items"].as_array().into_iter().flatten() {
                remaining.push((plural, item.clone()));
            }
        }
        match step(&ns, &remaining) {
            Step::Nothing => Ok(Action::Done),
            Step::Delete(objects) => {
                for (plural, obj) in objects {
                    let info = REGISTRY
                        .iter()
                        .find(|i| i.plural == plural)
                        .expect("listed kind");
                    let dp = DeleteParams {
                        propagation_policy: Some("Background".into()),
                        ..Default::default()
                    };
                    match self
                        .client
                        .dynamic(info, Some(name))
                        .delete(&obj, &dp)
                        .await
                    {
                        Err(e) if !e.is_not_found() && !e.is_conflict() => return Err(e),
                        _ => {}
                    }
                }
                Ok(Action::RequeueAfter(RECHECK))
            }
            Step::Wait => Ok(Action::RequeueAfter(RECHECK)),
            Step::Finalize => {
                let api = self.client.dynamic(registry::of::<Namespace>(), None);
                let mut body =
                    serde_json::to_value(&*ns).map_err(|e| ClientError::Decode(e.to_string()))?;
                body["spec"]["finalizers"] = serde_json::json!([]);
                match api.replace_sub(name, "finalize", &body).await {
                    Ok(_) => {
                        tracing::info!(namespace = name, "namespace emptied and finalized");
                        Ok(Action::Done)
                    }
                    Err(e) if e.is_not_found() => Ok(Action::Done),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps() {
        let live: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
        assert_eq!(step(&live, &[]), Step::Nothing);
        let dying: Namespace = serde_json::from_value(
            json!({"metadata": {"name": "team", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        )
        .unwrap();
        assert_eq!(step(&dying, &[]), Step::Finalize);
        let pod = json!({"metadata": {"name": "a"}});
        let going = json!({"metadata": {"name": "b", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            step(&dying, &[("pods", pod), ("pods", going.clone())]),
            Step::Delete(vec![("pods", "a".into())])
        );
        assert_eq!(step(&dying, &[("pods", going)]), Step::Wait);
    }
}
