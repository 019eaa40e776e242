//! The ingress proxy's control loop (`sync_routes`): on any change of an
//! Ingress, IngressClass, Service, EndpointSlice or Secret (debounced), the
//! routing table, every backend's endpoints and the TLS certificates are
//! rebuilt and swapped into the proxy at once; backends that cannot be
//! served get a Warning event on their Ingress (once per cause); and each
//! Ingress of the class gets this proxy's address in `status.loadBalancer`.

use super::endpoints::{resolve, Unservable};
use super::proxy::{certified_key, Config, Proxy};
use super::routes::{is_ours, Backend, Table};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use minik8s_api::registry;
use minik8s_client::events::{EventType, Recorder};
use minik8s_client::informer::Cache;
use minik8s_client::rest::content;
use minik8s_client::{Client, SharedInformers};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The class served, and its controller name.
pub const CLASS: &str = "minik8s";
pub const CONTROLLER: &str = "minik8s.io/ingress";
/// Changes arriving within this window are applied in one rebuild.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// How this node's proxy is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The IngressClass served.
    pub class: String,
    /// The address put in the Ingresses' status (this node's IP).
    pub address: Option<String>,
}

pub struct Sync {
    client: Client,
    recorder: Recorder,
    settings: Settings,
    ingresses: Cache<Ingress>,
    classes: Cache<IngressClass>,
    services: Cache<Service>,
    slices: Cache<EndpointSlice>,
    secrets: Cache<Secret>,
    wake: Arc<tokio::sync::Notify>,
    pub proxy: Arc<Proxy>,
}

impl Sync {
    /// Registers the informers (before they start).
    pub fn new(client: Client, informers: &SharedInformers, settings: Settings) -> Sync {
        let wake = Arc::new(tokio::sync::Notify::new());
        macro_rules! wake_on {
            ($($k:ty),*) => {$(
                let w = wake.clone();
                informers
                    .on_event::<$k>(move |_| w.notify_one())
                    .expect("registered before start");
            )*};
        }
        wake_on!(Ingress, IngressClass, Service, EndpointSlice, Secret);
        Sync {
            recorder: Recorder::new(client.clone(), "minik8s-ingress"),
            client,
            settings,
            ingresses: informers.cache(),
            classes: informers.cache(),
            services: informers.cache(),
            slices: informers.cache(),
            secrets: informers.cache(),
            wake,
            proxy: Arc::new(Proxy::default()),
        }
    }

    /// Whether our class is the cluster's default IngressClass.
    fn default_class(&self) -> bool {
        self.classes.list().iter().any(|c| {
            c.metadata.name.as_deref() == Some(self.settings.class.as_str())
                && c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("ingressclass.kubernetes.io/is-default-class"))
                    .is_some_and(|v| v == "true")
        })
    }

    /// Builds the proxy's configuration from the caches (pure but for reading them).
    pub fn build(&self) -> (Config, Vec<(Arc<Ingress>, Backend, Unservable)>) {
        let default = self.default_class();
        let all = self.ingresses.list();
        let ours: Vec<&Arc<Ingress>> = all
            .iter()
            .filter(|i| is_ours(i, &self.settings.class, default))
            .collect();
        let table = Table::build(ours.iter().map(|i| i.as_ref()).collect());
        let services = self.services.list();
        let slices = self.slices.list();
        let svc_refs: Vec<&Service> = services.iter().map(|s| s.as_ref()).collect();
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        let mut endpoints = HashMap::new();
        let mut problems = Vec::new();
        for b in table.backends() {
            let r = resolve(b, &svc_refs, &slice_refs);
            if let Err(why) = &r {
                // Report it on each Ingress naming that backend.
                for ing in &ours {
                    if names_backend(ing, b) {
                        problems.push(((*ing).clone(), b.clone(), why.clone()));
                    }
                }
            }
            endpoints.insert(b.clone(), r);
        }
        let mut certs = HashMap::new();
        for ing in &ours {
            let ns = ing
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            for tls in ing.spec.iter().flat_map(|s| s.tls.iter().flatten()) {
                let Some(name) = tls.secret_name.clone() else {
                    continue;
                };
                let key = (ns.clone(), name.clone());
                if certs.contains_key(&key) {
                    continue;
                }
                let Some(secret) = self.secrets.get(&format!("{ns}/{name}")) else {
                    continue;
                };
                let data = secret.data.clone().unwrap_or_default();
                let (Some(crt), Some(k)) = (data.get("tls.crt"), data.get("tls.key")) else {
                    continue;
                };
                match certified_key(&crt.0, &k.0) {
                    Ok(ck) => {
                        certs.insert(key, Arc::new(ck));
                    }
                    Err(e) => {
                        tracing::warn!(secret = %format!("{ns}/{name}"), error = %e, "ingress TLS secret")
                    }
                }
            }
        }
        (
            Config {
                table,
                endpoints,
                certs,
            },
            problems,
        )
    }

    /// Rebuilds on every change until the process ends.
    pub async fn run(self) {
        let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
        let mut published: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let (config, problems) = self.build();
            self.proxy.set(config);
            // One event per (Ingress, cause) while it lasts.
            let now: BTreeSet<(String, String)> = problems
                .iter()
                .map(|(i, b, why)| (key_of(i), why.describe(b).1))
                .collect();
            for (ing, b, why) in &problems {
                let (reason, message) = why.describe(b);
                if reported.insert((key_of(ing), message.clone())) {
                    self.recorder
                        .event(&**ing, EventType::Warning, reason, &message)
                        .await;
                }
            }
            reported.retain(|r| now.contains(r));
            self.publish_status(&mut published).await;
            self.wake.notified().await;
            tokio::time::sleep(DEBOUNCE).await;
        }
    }

    /// Adds this proxy's address to `status.loadBalancer.ingress` of each Ingress of the class.
    async fn publish_status(&self, published: &mut BTreeMap<String, String>) {
        let Some(address) = self.settings.address.clone() else {
            return;
        };
        let default = self.default_class();
        for ing in self.ingresses.list() {
            if !is_ours(&ing, &self.settings.class, default) {
                continue;
            }
            let key = key_of(&ing);
            let mut ips: Vec<String> = ing
                .status
                .iter()
                .filter_map(|s| s.load_balancer.as_ref())
                .flat_map(|lb| lb.ingress.iter().flatten())
                .filter_map(|i| i.ip.clone())
                .collect();
            if ips.contains(&address) {
                published.insert(key, address.clone());
                continue;
            }
            ips.push(address.clone());
            ips.sort();
            let patch = json!({"status": {"loadBalancer": {"ingress":
                ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>()}}});
            let ns = ing
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let api = self.client.dynamic(registry::of::<Ingress>(), Some(&ns));
            let name = ing.metadata.name.clone().unwrap_or_default();
            match api
                .patch(&name, Some("status"), content::MERGE_PATCH, &patch)
                .await
            {
                Ok(_) => {
                    published.insert(key, address.clone());
                }
                Err(e) => tracing::warn!(ingress = %key, error = %e, "ingress status"),
            }
        }
    }
}

fn key_of(i: &Ingress) -> String {
    format!(
        "{}/{}",
        i.metadata.namespace.as_deref().unwrap_or("default"),
        i.metadata.name.as_deref().unwrap_or("")
    )
}

/// Whether `ing` routes anything to `b`.
fn names_backend(ing: &Ingress, b: &Backend) -> bool {
    Table::build(vec![ing]).backends().contains(&b)
}

/// Makes sure the IngressClass this proxy serves exists, marked as the
/// cluster's default if no class is (retried while the apiserver is away).
pub async fn ensure_class(client: &Client, class: &str) {
    let api = client.dynamic(registry::of::<IngressClass>(), None);
    for attempt in 0..60 {
        let classes = match api.list(&minik8s_client::ListParams::default()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(attempt, error = %e, "listing IngressClasses");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let items = classes["items"].as_array().cloned().unwrap_or_default();
        if items.iter().any(|c| c["metadata"]["name"] == class) {
            return;
        }
        let any_default = items.iter().any(|c| {
            c["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"] == "true"
        });
        let mut obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": class}, "spec": {"controller": CONTROLLER}});
        if !any_default {
            obj["metadata"]["annotations"] =
                json!({"ingressclass.kubernetes.io/is-default-class": "true"});
        }
        match api.create(&obj).await {
            Ok(_) => return,
            Err(e) if e.api().is_some_and(|a| a.code == 409) => return,
            Err(e) => {
                tracing::debug!(attempt, error = %e, "creating the IngressClass");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
