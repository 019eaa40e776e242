//! A Kubernetes operator written with kube-rs, as a learner would write one
//! for a real cluster, run against minik8s (`doc/operators.md` walks through it).
//!
//! ```text
//!  Website (CRD minik8s.io/v1) ──watch (streaming list)──▶ Controller ──▶ reconcile(website)
//!        ▲                                   ▲   │     finalizer minik8s.io/website-directory
//!        │ status: readyReplicas, Ready      │   │          ├─ apply Deployment <name>  (owner: the Website)
//!        │                                   │   │          ├─ apply Service <name>     (owner: the Website)
//!        │                                   │   │          ├─ apply ConfigMap websites: data.<name> = its URL
//!        └───────────────────────────────────┼───┘          └─ patch Website status
//!                        owned Deployments and Services changing wake it too
//!  Website deleted ─▶ cleanup: its directory entry removed ─▶ finalizer released ─▶ gone
//! ```
//!
//! Deleting a Website's Deployment and Service needs no code here: they
//! carry owner references, and the cluster's garbage collector deletes them.
//! Its entry in the shared `websites` directory is different (one ConfigMap
//! for every site of a namespace, owned by none): the operator removes it
//! itself, so a finalizer holds the Website until it has.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, Patch, PatchParams, ResourceExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The field manager of every write this operator makes (server-side apply).
pub const MANAGER: &str = "website-operator";
/// Holds a deleted Website until its directory entry is gone.
pub const FINALIZER: &str = "minik8s.io/website-directory";
/// The ConfigMap listing a namespace's sites: `<website>: <its URL>`.
pub const DIRECTORY: &str = "websites";

/// A static web site: `replicas` pods of `image` serving `message`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "minik8s.io",
    version = "v1",
    kind = "Website",
    namespaced,
    status = "WebsiteStatus",
    shortname = "ws",
    printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}"#,
    printcolumn = r#"{"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
pub struct WebsiteSpec {
    /// The image serving the site (busybox's httpd is enough).
    #[serde(default = "default_image")]
    pub image: String,
    #[serde(default = "default_replicas")]
    pub replicas: i32,
    /// The page every pod serves.
    pub message: String,
}

fn default_image() -> String {
    "minik8s/busybox:latest".into()
}

fn default_replicas() -> i32 {
    1
}

/// What the operator last saw of its site.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    pub ready_replicas: i32,
    pub conditions: Vec<Condition>,
}

/// A status condition, as Kubernetes objects carry them.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the Website has no namespace")]
    NoNamespace,
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

/// What every reconcile needs.
pub struct Context {
    pub client: Client,
}

/// The Deployment a Website wants (pure: desired state from the Website).
pub fn desired_deployment(site: &Website) -> serde_json::Value {
    let name = site.name_any();
    let owner = site
        .controller_owner_ref(&())
        .expect("a stored Website has a uid");
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "ownerReferences": [owner], "labels": {"app.kubernetes.io/managed-by": MANAGER}},
        "spec": {"replicas": site.spec.replicas, "selector": {"matchLabels": {"website": name}},
            "template": {"metadata": {"labels": {"website": name}},
                "spec": {"containers": [{"name": "web", "image": site.spec.image, "imagePullPolicy": "IfNotPresent",
                    "env": [{"name": "MESSAGE", "value": site.spec.message}],
                    "command": ["sh", "-c", "mkdir -p /www && echo \"$MESSAGE\" > /www/index.html && exec httpd -f -p 80 -h /www"],
                    "ports": [{"containerPort": 80}]}]}}}})
}

/// The Service a Website wants.
pub fn desired_service(site: &Website) -> serde_json::Value {
    let name = site.name_any();
    let owner = site
        .controller_owner_ref(&())
        .expect("a stored Website has a uid");
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "ownerReferences": [owner], "labels": {"app.kubernetes.io/managed-by": MANAGER}},
        "spec": {"selector": {"website": name}, "ports": [{"port": 80, "targetPort": 80}]}})
}

/// The status a Website gets from its Deployment's ready replicas.
pub fn desired_status(site: &Website, ready: i32) -> WebsiteStatus {
    let wanted = site.spec.replicas;
    let (status, reason, message) = if ready >= wanted {
        (
            "True",
            "AllReplicasReady",
            format!("{ready} of {wanted} replicas ready"),
        )
    } else {
        (
            "False",
            "ReplicasNotReady",
            format!("{ready} of {wanted} replicas ready"),
        )
    };
    WebsiteStatus {
        ready_replicas: ready,
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message,
        }],
    }
}

/// A site's entry in its namespace's directory, as the site's own field
/// manager applies it (pure). Each site applies only its own key, so
/// server-side apply keeps the entries of different sites apart, and
/// applying the ConfigMap without the key removes exactly that entry.
pub fn directory_entry(site: &Website, present: bool) -> serde_json::Value {
    let name = site.name_any();
    let ns = site.namespace().unwrap_or_default();
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": DIRECTORY}});
    if present {
        cm["data"] = json!({ name.clone(): format!("http://{name}.{ns}.svc.cluster.local/") });
    }
    cm
}

/// The field manager owning one site's directory entry.
pub fn directory_manager(site: &Website) -> String {
    format!("{MANAGER}.{}", site.name_any())
}

/// Reconciles a Website under its finalizer: a live one is brought to what
/// it asks for, a deleted one is cleaned up before it may go.
pub async fn reconcile(site: Arc<Website>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = site.namespace().ok_or(Error::NoNamespace)?;
    let websites: Api<Website> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&websites, FINALIZER, site, |event| async {
        match event {
            Event::Apply(site) => apply(&site, &ctx).await,
            Event::Cleanup(site) => cleanup(&site, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// A deleted Website's entry leaves the directory (the rest goes with the
/// garbage collector).
async fn cleanup(site: &Website, ctx: &Context) -> Result<Action, Error> {
    let ns = site.namespace().ok_or(Error::NoNamespace)?;
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    if configmaps.get_opt(DIRECTORY).await?.is_some() {
        let manager = directory_manager(site);
        configmaps
            .patch(
                DIRECTORY,
                &PatchParams::apply(&manager).force(),
                &Patch::Apply(directory_entry(site, false)),
            )
            .await?;
    }
    tracing::info!(website = %site.name_any(), namespace = %ns, "left the directory");
    Ok(Action::await_change())
}

/// Brings a Website's Deployment, Service, directory entry and status to
/// what it asks for.
async fn apply(site: &Website, ctx: &Context) -> Result<Action, Error> {
    let ns = site.namespace().ok_or(Error::NoNamespace)?;
    let name = site.name_any();
    let apply = PatchParams::apply(MANAGER).force();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let deployment = deployments
        .patch(&name, &apply, &Patch::Apply(desired_deployment(site)))
        .await?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    services
        .patch(&name, &apply, &Patch::Apply(desired_service(site)))
        .await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    configmaps
        .patch(
            DIRECTORY,
            &PatchParams::apply(&directory_manager(site)).force(),
            &Patch::Apply(directory_entry(site, true)),
        )
        .await?;
    let ready = deployment
        .status
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let websites: Api<Website> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({"status": desired_status(site, ready)});
    websites
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await?;
    tracing::info!(website = %name, namespace = %ns, ready, "reconciled");
    // Owned objects changing wake the controller; look again now and then anyway.
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// A failed reconcile is retried after a short wait.
pub fn error_policy(_site: Arc<Website>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the controller until the process stops. Websites are listed with a
/// streaming list (one watch that sends the existing objects first, then a
/// bookmark: `sendInitialEvents=true`), as client-go's WatchList does.
pub async fn run(client: Client) {
    let websites: Api<Website> = Api::all(client.clone());
    let deployments: Api<Deployment> = Api::all(client.clone());
    let services: Api<Service> = Api::all(client.clone());
    Controller::new(websites, watcher::Config::default().streaming_lists())
        .owns(deployments, watcher::Config::default())
        .owns(services, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(Context { client }))
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
}
