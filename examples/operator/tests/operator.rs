//! The kube-rs operator against minik8s: an in-process apiserver with the
//! scheduler, the controller manager and hollow nodes; the operator talks to
//! it through kube-rs exactly as it would to a Kubernetes cluster.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::CustomResourceExt;
use minik8s_testkit::{eventually, Backend, TestServer};
use serde_json::json;
use website_operator::{Website, WebsiteSpec};

async fn cluster() -> TestServer {
    let server = TestServer::start(Backend::Embedded).await;
    let client = minik8s_client::Client::new(&server.url);
    let hollow = kubelet::hollow::HollowConfig {
        prefix: "op".into(),
        count: 2,
        lease_seconds: 10,
        sync_seconds: 10,
    };
    let nodes = kubelet::hollow::start(&client, &hollow).await.unwrap();
    tokio::spawn(nodes.run_forever());
    let (sched, informers) = scheduler::build(client.clone(), scheduler::Config::default());
    for inf in informers {
        tokio::spawn(inf);
    }
    tokio::spawn(scheduler::worker(sched));
    tokio::spawn(controller_manager::run(
        client,
        controller_manager::Config::default(),
    ));
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_website_becomes_a_deployment_and_a_service() {
    let s = cluster().await;
    let config = kube::Config::new(s.url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();

    // The CRD kube-rs derives from the Rust type, applied as a user would.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Website::crd())
        .await
        .unwrap();
    let websites: Api<Website> = Api::namespaced(client.clone(), "default");
    eventually(10, "the Website kind is served", || async {
        websites.list(&Default::default()).await.ok()
    })
    .await;
    tokio::spawn(website_operator::run(client.clone()));

    let site = Website::new(
        "hello",
        WebsiteSpec {
            image: "minik8s/busybox:latest".into(),
            replicas: 2,
            message: "hello from minik8s".into(),
        },
    );
    let site = websites
        .create(&PostParams::default(), &site)
        .await
        .unwrap();
    let uid = site.metadata.uid.clone().unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let deploy = eventually(30, "the Website's Deployment", || async {
        deployments.get("hello").await.ok()
    })
    .await;
    let owner = &deploy.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Website", uid.as_str(), Some(true))
    );
    let container = &deploy.spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        container.env.as_ref().unwrap()[0].value.as_deref(),
        Some("hello from minik8s")
    );
    let svc = eventually(30, "the Website's Service", || async {
        services.get("hello").await.ok()
    })
    .await;
    assert_eq!(svc.metadata.owner_references.as_ref().unwrap()[0].uid, uid);

    // The status follows the pods (hollow nodes run them at once).
    eventually(60, "the Website reports 2 ready replicas", || async {
        let w = websites.get("hello").await.ok()?;
        let st = w.status?;
        (st.ready_replicas == 2 && st.conditions[0].status == "True").then_some(())
    })
    .await;

    // Editing replicas flows through to the Deployment.
    websites
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    eventually(
        30,
        "the Deployment follows the Website to 3 replicas",
        || async {
            let d = deployments.get("hello").await.ok()?;
            (d.spec.replicas == Some(3)).then_some(())
        },
    )
    .await;

    // Deleting the Website deletes what it owns (the garbage collector, not the operator).
    websites
        .delete("hello", &DeleteParams::default())
        .await
        .unwrap();
    eventually(60, "the Deployment and Service are gone", || async {
        let d = deployments.get_opt("hello").await.ok()?;
        let s = services.get_opt("hello").await.ok()?;
        (d.is_none() && s.is_none()).then_some(())
    })
    .await;
}

/// The CRD the operator's `crd` command prints is a valid CRD here too.
#[test]
fn the_derived_crd_has_the_printer_columns_and_short_name() {
    let crd = serde_json::to_value(Website::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "websites.minik8s.io");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["ws"]));
    let errs = minik8s_api::validation::validate_crd(&crd, None);
    assert!(errs.is_empty(), "{errs:?}");
}
