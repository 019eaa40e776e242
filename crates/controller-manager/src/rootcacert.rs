//! The root CA publisher (Kubernetes' root-ca-cert-publisher): every
//! namespace has the ConfigMap `kube-root-ca.crt` holding the cluster CA
//! (`ca.crt`), which the pods' token volumes project next to the token so
//! in-cluster clients can check the apiserver's certificate.
//!
//! ```text
//!  Namespace added ─┐
//!  kube-root-ca.crt changed/deleted ─┴─▶ reconcile(namespace) ─▶ create or put back ca.crt
//! ```

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use minik8s_api::registry;
use minik8s_client::controller::{Action, Controller, Reconciler};
use minik8s_client::informer::Event;
use minik8s_client::shared::AlreadyStarted;
use minik8s_client::{Cache, Client, ClientError, SharedInformers, WorkQueue};
use serde_json::json;
use std::sync::Arc;

pub const NAME: &str = "kube-root-ca.crt";

pub struct RootCaPublisher {
    client: Client,
    namespaces: Cache<Namespace>,
    configmaps: Cache<ConfigMap>,
    ca_pem: String,
}

/// Whether the published ConfigMap holds `ca` (None: there is none).
pub fn up_to_date(cm: Option<&ConfigMap>, ca: &str) -> Option<bool> {
    cm.map(|c| {
        c.data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .map(String::as_str)
            == Some(ca)
    })
}

impl RootCaPublisher {
    pub fn new(
        client: Client,
        informers: &SharedInformers,
        ca_pem: String,
    ) -> Result<Controller<Self>, AlreadyStarted> {
        let ctl = Arc::new(RootCaPublisher {
            client,
            namespaces: informers.cache(),
            configmaps: informers.cache(),
            ca_pem,
        });
        Controller::new(ctl, WorkQueue::new())
            .for_own::<Namespace>(informers)?
            .watches::<ConfigMap, _>(informers, |_, ev| {
                let cm = ev.object();
                if cm.metadata.name.as_deref() == Some(NAME) && !matches!(ev, Event::Added(_)) {
                    cm.metadata.namespace.clone().into_iter().collect()
                } else {
                    Vec::new()
                }
            })
    }
}

impl Reconciler for RootCaPublisher {
    const NAME: &'static str = "root-ca-cert-publisher";

    async fn reconcile(&self, namespace: &str) -> Result<Action, ClientError> {
        let Some(ns) = self.namespaces.get(namespace) else {
            return Ok(Action::Done);
        };
        if ns.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let existing = self.configmaps.get(&format!("{namespace}/{NAME}"));
        let api = self
            .client
            .dynamic(registry::of::<ConfigMap>(), Some(namespace));
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": NAME, "namespace": namespace,
                                     "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                        "data": {"ca.crt": self.ca_pem}});
        let result = match up_to_date(existing.as_deref(), &self.ca_pem) {
            Some(true) => return Ok(Action::Done),
            Some(false) => {
                api.patch(
                    NAME,
                    None,
                    minik8s_client::rest::content::MERGE_PATCH,
                    &json!({"data": {"ca.crt": self.ca_pem}}),
                )
                .await
            }
            None => api.create(&cm).await,
        };
        match result {
            Ok(_) => Ok(Action::Done),
            Err(e)
                if e.api().is_some_and(|a| {
                    a.is_already_exists() || a.code == 403 || a.is_not_found()
                }) =>
            {
                Ok(Action::Done)
            }
            Err(e) => Err(e),
        }
    }
}
