//! Hollow nodes: kubelets without a container runtime, for scale benchmarks
//! only. Each registers a Node (Ready, 4 cpu, 16Gi, 110 pods) and renews its
//! Lease (and reports Ready again if the node lifecycle controller marked it
//! Unknown while it was away); pods bound to it go Running at once with a
//! made-up IP, and deleted pods are confirmed at once. Many hollow nodes share one process, one pod
//! watch and a few workers.

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use minik8s_api::meta::now_rfc3339;
use minik8s_api::registry;
use minik8s_client::informer::{object_key, Event};
use minik8s_client::rest::content;
use minik8s_client::{Api, Client, DeleteParams, Informer, ListParams, WorkQueue};
use serde_json::json;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct HollowConfig {
    /// Nodes are named `<prefix>-0` ... `<prefix>-<count-1>`.
    pub prefix: String,
    pub count: usize,
    pub lease_seconds: u64,
}

fn node_name(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i}")
}

/// The made-up IP of the next pod on node `i`: `10.<i/256>.<i%256>.<n>`, with
/// `n` counting the node's pods, so an IP comes back only after 254 newer pods
/// on that node (a hash of the uid could give a replacement its predecessor's IP).
pub fn fake_ip(i: usize) -> String {
    static NEXT: std::sync::Mutex<Option<std::collections::HashMap<usize, u32>>> =
        std::sync::Mutex::new(None);
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    let n = next
        .get_or_insert_with(Default::default)
        .entry(i)
        .or_insert(0);
    let host = *n % 254 + 1;
    *n += 1;
    format!("10.{}.{}.{}", (i / 256) % 256, i % 256, host)
}

/// Registers the nodes (32 at a time).
pub async fn register(client: &Client, cfg: &HollowConfig) -> anyhow::Result<()> {
    let nodes = client.dynamic(registry::of::<Node>(), None);
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..cfg.count)
        .map(|i| {
            let nodes = nodes.clone();
            let name = node_name(&cfg.prefix, i);
            async move {
                let res = json!({"cpu": "4", "memory": "16Gi", "pods": "110"});
                let node = json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "minik8s.io/hollow": "true"},
                                 "annotations": {crate::node::CONFIG_ANNOTATION: "hollow"}},
                    "status": {"capacity": res, "allocatable": res,
                               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}],
                               "addresses": [{"type": "InternalIP", "address": format!("10.255.{}.{}", i / 256, i % 256)}]}});
                match nodes.create(&node).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => Ok(()),
                    Err(e) => Err(anyhow::Error::new(e).context(format!("registering hollow node {name}"))),
                }
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Runs `cfg.count` hollow nodes until the process ends.
pub async fn run(client: Client, cfg: HollowConfig) -> anyhow::Result<()> {
    register(&client, &cfg)
        .await
        .context("registering hollow nodes")?;
    let prefix = format!("{}-", cfg.prefix);
    let mut informer = Informer::new(Api::<Pod>::all(&client), ListParams::default());
    let cache = informer.cache();
    let queue: WorkQueue<String> = WorkQueue::new();
    let (q, p) = (queue.clone(), prefix.clone());
    informer.on_event(move |ev| {
        if let Event::Added(pod) | Event::Updated { new: pod, .. } = ev {
            if pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| n.starts_with(&p))
            {
                q.add(object_key(&pod.metadata));
            }
        }
    });
    // The tasks end with this function (dropping the set aborts them), so a
    // test can "kill" hollow nodes by aborting `run`.
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(informer.run());
    for _ in 0..8 {
        let (queue, cache, client) = (queue.clone(), cache.clone(), client.clone());
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                if let Some(pod) = cache.get(&key) {
                    if let Err(e) = sync_hollow_pod(&client, &pod).await {
                        tracing::debug!(pod = %key, error = %e, "hollow pod");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        });
    }
    let node_informer = Informer::new(
        Api::<Node>::all(&client),
        ListParams::default().labels("minik8s.io/hollow=true"),
    );
    let nodes = node_informer.cache();
    tasks.spawn(node_informer.run());
    let node_api = client.dynamic(registry::of::<Node>(), None);
    loop {
        for i in 0..cfg.count {
            let name = node_name(&cfg.prefix, i);
            if let Err(e) = crate::node::renew_lease(&client, &name).await {
                tracing::debug!(node = %name, error = %e, "hollow lease");
            }
            let ready = nodes.get(&name).is_some_and(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                    .is_some_and(|c| c.status == "True")
            });
            if !ready && nodes.has_synced() {
                let now = now_rfc3339();
                let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
                if let Err(e) = node_api
                    .patch(&name, Some("status"), content::MERGE_PATCH, &status)
                    .await
                {
                    tracing::debug!(node = %name, error = %e, "hollow node status");
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(cfg.lease_seconds.max(1))).await;
    }
}

/// Running at once, or gone at once.
async fn sync_hollow_pod(client: &Client, pod: &Pod) -> anyhow::Result<()> {
    let api = client.dynamic(registry::of::<Pod>(), pod.metadata.namespace.as_deref());
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if pod.metadata.deletion_timestamp.is_some() {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: pod.metadata.uid.clone(),
            ..Default::default()
        };
        return match api.delete(name, &dp).await {
            Err(e) if !(e.is_not_found() || e.is_conflict()) => Err(e.into()),
            _ => Ok(()),
        };
    }
    if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
        return Ok(());
    }
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let index: usize = node
        .rsplit('-')
        .next()
        .and_then(|i| i.parse().ok())
        .unwrap_or(0);
    let ip = fake_ip(index);
    let now = now_rfc3339();
    let statuses: Vec<_> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| json!({"name": c.name, "image": c.image, "imageID": "hollow://", "ready": true, "started": true, "restartCount": 0,
                        "containerID": format!("hollow://{}", c.name), "state": {"running": {"startedAt": now}}}))
        .collect();
    let conditions: Vec<_> = ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now}))
        .collect();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": ip, "startTime": now,
                                   "conditions": conditions, "containerStatuses": statuses}});
    match api
        .patch(name, Some("status"), content::MERGE_PATCH, &status)
        .await
    {
        Err(e) if !e.is_not_found() => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fake_ips_are_per_node() {
        assert!(super::fake_ip(0).starts_with("10.0.0."));
        assert!(super::fake_ip(300).starts_with("10.1.44."));
        let a = super::fake_ip(7);
        assert_ne!(a, super::fake_ip(7), "a node's next pod gets a new IP");
    }
}
