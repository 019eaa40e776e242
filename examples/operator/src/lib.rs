//! A Kubernetes operator written with kube-rs, as a learner would write one
//! for a real cluster, run against minik8s (`doc/operators.md` walks through it).
//!
//! ```text
//!  Website (CRD minik8s.io/v1) ──watch──▶ Controller ──▶ reconcile(website)
//!        ▲                                   ▲   │          ├─ apply Deployment <name>  (owner: the Website)
//!        │ status: readyReplicas, Ready      │   │          ├─ apply Service <name>     (owner: the Website)
//!        └───────────────────────────────────┼───┘          └─ patch Website status
//!                        owned Deployments and Services changing wake it too
//! ```
//!
//! Deleting a Website needs no code here: its Deployment and Service carry
//! owner references, and the cluster's garbage collector deletes them.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, ResourceExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The field manager of every write this operator makes (server-side apply).
pub const MANAGER: &str = "website-operator";

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

/// Brings a Website's Deployment, Service and status to what it asks for.
pub async fn reconcile(site: Arc<Website>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = site.namespace().ok_or(Error::NoNamespace)?;
    let name = site.name_any();
    let apply = PatchParams::apply(MANAGER).force();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let deployment = deployments
        .patch(&name, &apply, &Patch::Apply(desired_deployment(&site)))
        .await?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    services
        .patch(&name, &apply, &Patch::Apply(desired_service(&site)))
        .await?;
    let ready = deployment
        .status
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let websites: Api<Website> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({"status": desired_status(&site, ready)});
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

/// Runs the controller until the process stops.
pub async fn run(client: Client) {
    let websites: Api<Website> = Api::all(client.clone());
    let deployments: Api<Deployment> = Api::all(client.clone());
    let services: Api<Service> = Api::all(client.clone());
    Controller::new(websites, watcher::Config::default())
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
