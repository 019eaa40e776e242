//! The kube-rs operator against minik8s: an in-process apiserver with the
//! scheduler, the controller manager and hollow nodes; the operator talks to
//! it through kube-rs exactly as it would to a Kubernetes cluster.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
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
        fake_gpus: 0,
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
    // The operator's finalizer holds the Website; its directory entry is there.
    let held = websites.get("hello").await.unwrap();
    assert_eq!(
        held.metadata.finalizers,
        Some(vec![website_operator::FINALIZER.to_string()])
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let directory = || async {
        let cm = configmaps
            .get_opt(website_operator::DIRECTORY)
            .await
            .ok()??;
        Some(cm.data.unwrap_or_default())
    };
    eventually(30, "hello in the directory", || async {
        let data = directory().await?;
        (data.get("hello").map(String::as_str) == Some("http://hello.default.svc.cluster.local/"))
            .then_some(())
    })
    .await;
    // A second site: its own field manager owns its own key, so the two
    // entries live side by side in one ConfigMap.
    websites
        .create(
            &PostParams::default(),
            &Website::new(
                "other",
                WebsiteSpec {
                    image: "minik8s/busybox:latest".into(),
                    replicas: 1,
                    message: "another".into(),
                },
            ),
        )
        .await
        .unwrap();
    eventually(30, "both sites in the directory", || async {
        let data = directory().await?;
        (data.len() == 2 && data.contains_key("other")).then_some(())
    })
    .await;

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
    // The finalizer let the Website go only after its entry left the
    // directory; the other site's entry stays.
    eventually(30, "hello gone, its entry too", || async {
        let gone = websites.get_opt("hello").await.ok()?.is_none();
        let data = directory().await?;
        (gone && !data.contains_key("hello") && data.contains_key("other")).then_some(())
    })
    .await;
}

/// A kube-rs watcher with streaming lists (`sendInitialEvents=true`): the
/// objects that exist come as initial events, then the end of the initial
/// list, then live changes — one watch, no list call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_watcher_sees_existing_objects_then_changes() {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let s = TestServer::start(Backend::Embedded).await;
    let client = kube::Client::try_from(kube::Config::new(s.url.parse().unwrap())).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"watched": "yes"}}}),
        )
        .unwrap();
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let config = watcher::Config::default()
        .labels("watched=yes")
        .streaming_lists();
    let mut events = watcher::watcher(configmaps.clone(), config).boxed();
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .expect("no watch error");
        match event {
            Event::Init => {}
            Event::InitApply(cm) => initial.push(cm.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("before the initial list ended: {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "b"]);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c", "labels": {"watched": "yes"}}}))
            .unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
        .await
        .expect("the new object within 10 s")
        .unwrap()
        .unwrap();
    match next {
        Event::Apply(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("c")),
        other => panic!("expected the new ConfigMap, got {other:?}"),
    }
}

/// The CRD the operator's `crd` command prints is a valid CRD here too.
#[test]
fn the_derived_crd_has_the_printer_columns_and_short_name() {
    let crd = serde_json::to_value(Website::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "websites.minik8s.io");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["ws"]));
    let errs = minik8s_validation::validate_crd(&crd, None);
    assert!(errs.is_empty(), "{errs:?}");
}
