//! `cordon`, `uncordon` and `drain`: take a node out of scheduling and move
//! its pods elsewhere through the Eviction API, so PodDisruptionBudgets are
//! honoured (a rolling upgrade drains one node at a time with them).
//!
//! The real kubectl's drain: cordon, list the node's pods, sort them with the
//! filters below (each pod is evicted, skipped with a warning, or stops the
//! drain with the flag that would allow it), evict each one — retrying every
//! 5 s while a disruption budget says no — and wait until every evicted pod
//! is gone. [`plan`] is the filtering, pure; the rest is I/O.

use super::*;
use minik8s_api::k8s::api::core::v1::{Node, Pod};
use minik8s_client::Api;
use std::time::Instant;

/// How long kubectl waits before asking again for an eviction a disruption
/// budget refused.
const EVICTION_RETRY: Duration = Duration::from_secs(5);
/// How often the evicted pods are looked up until they are gone.
const POLL: Duration = Duration::from_millis(500);

const DAEMONSET_FATAL: &str =
    "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)";
const DAEMONSET_WARNING: &str = "ignoring DaemonSet-managed Pods";
const LOCAL_STORAGE_FATAL: &str =
    "cannot delete Pods with local storage (use --delete-emptydir-data to override)";
const LOCAL_STORAGE_WARNING: &str = "deleting Pods with local storage";
const UNMANAGED_FATAL: &str =
    "cannot delete Pods that declare no controller (use --force to override)";
const UNMANAGED_WARNING: &str = "deleting Pods that declare no controller";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The flags that decide what a drain may remove.
#[derive(Clone, Debug, Default)]
pub(crate) struct DrainOptions {
    pub ignore_daemonsets: bool,
    pub delete_emptydir_data: bool,
    pub force: bool,
    /// Seconds for each pod to stop; None: the pod's own.
    pub grace_period: Option<i64>,
    /// None: wait as long as it takes (kubectl's `--timeout=0s`).
    pub timeout: Option<Duration>,
    /// Delete instead of evict (no disruption budget is asked).
    pub disable_eviction: bool,
    pub pod_selector: Option<String>,
}

/// What a drain does with a node's pods.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// (namespace, name, uid) of the pods to evict.
    pub evict: Vec<(String, String, String)>,
    /// "ignoring DaemonSet-managed Pods: ns/a, ns/b", printed as warnings.
    pub warnings: Vec<String>,
    /// "cannot delete ...: ns/a": any one of them stops the drain.
    pub errors: Vec<String>,
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The node's pods sorted as kubectl's filters sort them, in its order:
/// DaemonSet pods, mirror pods, pods with emptyDir data, pods without a
/// controller.
pub(crate) fn plan(pods: &[Pod], opts: &DrainOptions) -> Plan {
    // kind of problem -> the pods that have it, to print one line per kind.
    let mut warned: Vec<(&str, Vec<String>)> = Vec::new();
    let mut fatal: Vec<(&str, Vec<String>)> = Vec::new();
    let note =
        |list: &mut Vec<(&'static str, Vec<String>)>, what: &'static str, pod: String| match list
            .iter_mut()
            .find(|(w, _)| *w == what)
        {
            Some((_, pods)) => pods.push(pod),
            None => list.push((what, vec![pod])),
        };
    let mut evict = Vec::new();
    for pod in pods {
        let meta = &pod.metadata;
        let ns = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let id = format!("{ns}/{name}");
        let controller = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        let finished = is_finished(pod);
        if controller.is_some_and(|c| c.kind == "DaemonSet") && !finished {
            // The DaemonSet controller would put it back at once: leave it.
            if opts.ignore_daemonsets {
                note(&mut warned, DAEMONSET_WARNING, id);
            } else {
                note(&mut fatal, DAEMONSET_FATAL, id);
            }
            continue;
        }
        if meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
        {
            // A static pod's mirror: the kubelet owns it, the API cannot remove it.
            continue;
        }
        let emptydir = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()));
        if emptydir && !finished {
            if opts.delete_emptydir_data {
                note(&mut warned, LOCAL_STORAGE_WARNING, id.clone());
            } else {
                note(&mut fatal, LOCAL_STORAGE_FATAL, id);
                continue;
            }
        }
        if controller.is_none() && !finished {
            // Nothing would recreate it elsewhere.
            if opts.force {
                note(&mut warned, UNMANAGED_WARNING, id);
            } else {
                note(&mut fatal, UNMANAGED_FATAL, id);
                continue;
            }
        }
        evict.push((ns, name, meta.uid.clone().unwrap_or_default()));
    }
    let line = |(what, pods): (&str, Vec<String>)| format!("{what}: {}", pods.join(", "));
    Plan {
        evict,
        warnings: warned.into_iter().map(line).collect(),
        errors: fatal.into_iter().map(line).collect(),
    }
}

/// `kubectl cordon|uncordon NODE...`.
pub(crate) async fn set_unschedulable(
    client: &Client,
    nodes: &[String],
    unschedulable: bool,
) -> Result<i32> {
    if nodes.is_empty() {
        bail!("resource(s) were provided, but no name was specified");
    }
    for node in nodes {
        cordon(client, node, unschedulable).await?;
    }
    Ok(0)
}

async fn cordon(client: &Client, node: &str, unschedulable: bool) -> Result<()> {
    let api: Api<Node> = Api::all(client);
    let current = api.get(node).await?;
    let verb = if unschedulable {
        "cordoned"
    } else {
        "uncordoned"
    };
    let is = current
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if is == unschedulable {
        println!("node/{node} already {verb}");
        return Ok(());
    }
    // null removes the field, as kubectl's patch leaves an uncordoned node.
    let value = if unschedulable {
        json!(true)
    } else {
        Value::Null
    };
    api.merge_patch(node, &json!({"spec": {"unschedulable": value}}))
        .await?;
    println!("node/{node} {verb}");
    Ok(())
}

/// `kubectl drain NODE`: cordon, evict, wait.
pub(crate) async fn drain(client: &Client, node: &str, opts: &DrainOptions) -> Result<i32> {
    cordon(client, node, true).await?;
    let mut lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    if let Some(s) = &opts.pod_selector {
        lp = lp.labels(s);
    }
    let (pods, _) = Api::<Pod>::all(client).list(&lp).await?;
    let plan = plan(&pods, opts);
    if !plan.errors.is_empty() {
        eprintln!(
            "error: unable to drain node {node:?} due to error: [{}], continuing command...",
            plan.errors.join(", ")
        );
        eprintln!("There are pending nodes to be drained:\n {node}");
        return Ok(1);
    }
    for w in &plan.warnings {
        eprintln!("Warning: {w}");
    }
    let deadline = opts.timeout.map(|t| Instant::now() + t);
    // Every pod at once, as kubectl does: one budget's refusal does not hold
    // up the pods it does not cover.
    let results = futures::future::join_all(plan.evict.iter().map(|pod| async move {
        remove(client, &pod.0, &pod.1, opts, deadline).await?;
        wait_gone(client, pod, deadline).await
    }))
    .await;
    let errors: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    println!("node/{node} drained");
    Ok(0)
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// Evicts (or deletes) one pod; a disruption budget's refusal is asked
/// again every 5 s until the deadline.
async fn remove(
    client: &Client,
    ns: &str,
    name: &str,
    opts: &DrainOptions,
    deadline: Option<Instant>,
) -> Result<()> {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let delete_options = match opts.grace_period {
        Some(g) if g >= 0 => json!({"gracePeriodSeconds": g}),
        _ => json!({}),
    };
    if opts.disable_eviction {
        let body = serde_json::to_vec(&delete_options)?;
        match client
            .request(
                reqwest::Method::DELETE,
                &path,
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
        {
            Ok(_) => println!("pod/{name} deleted"),
            Err(ClientError::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(());
    }
    let eviction = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
        "deleteOptions": delete_options,
    });
    println!("evicting pod {ns}/{name}");
    loop {
        let body = serde_json::to_vec(&eviction)?;
        match client
            .request(
                reqwest::Method::POST,
                &format!("{path}/eviction"),
                Some((content::JSON, body)),
                content::JSON,
            )
            .await
        {
            Ok(_) => return Ok(()),
            // Gone already: nothing to evict.
            Err(ClientError::Api(e)) if e.code == 404 => return Ok(()),
            Err(ClientError::Api(e)) if e.code == 429 && !past(deadline) => {
                eprintln!(
                    "error when evicting pods/{name:?} -n {ns:?} (will retry after 5s): {}",
                    e.message
                );
                tokio::time::sleep(EVICTION_RETRY).await;
            }
            Err(ClientError::Api(e)) if e.code == 429 => {
                bail!("drain did not complete within the timeout: evicting pods/{name:?} -n {ns:?}: {}", e.message)
            }
            Err(e) => {
                return Err(
                    anyhow!(e).context(format!("error when evicting pods/{name:?} -n {ns:?}"))
                )
            }
        }
    }
}

/// Waits until the evicted pod is gone (deleted, or replaced by a pod of the
/// same name with another uid).
async fn wait_gone(
    client: &Client,
    (ns, name, uid): &(String, String, String),
    deadline: Option<Instant>,
) -> Result<()> {
    let api = Api::<Pod>::namespaced(client, ns);
    loop {
        match api.get(name).await {
            Ok(pod) if pod.metadata.uid.as_deref() != Some(uid.as_str()) => break,
            Ok(_) => {}
            Err(ClientError::Api(e)) if e.code == 404 => break,
            Err(e) => return Err(e.into()),
        }
        if past(deadline) {
            bail!(
                "drain did not complete within the timeout: pod {ns}/{name} is still on the node"
            );
        }
        tokio::time::sleep(POLL).await;
    }
    println!("pod/{name} evicted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, owner: Option<&str>, emptydir: bool, phase: &str) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": phase},
        });
        if let Some(kind) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
                "name": "owner", "uid": "o", "controller": true}]);
        }
        if emptydir {
            v["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn managed_pods_are_evicted_and_daemonset_pods_refuse_without_the_flag() {
        let pods = [
            pod("web-1", Some("ReplicaSet"), false, "Running"),
            pod("proxy", Some("DaemonSet"), false, "Running"),
        ];
        let refused = plan(&pods, &DrainOptions::default());
        assert_eq!(
            refused.errors,
            ["cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/proxy"]
        );
        let opts = DrainOptions {
            ignore_daemonsets: true,
            ..Default::default()
        };
        let p = plan(&pods, &opts);
        assert!(p.errors.is_empty());
        assert_eq!(
            p.warnings,
            ["ignoring DaemonSet-managed Pods: default/proxy"]
        );
        assert_eq!(
            p.evict,
            [("default".into(), "web-1".into(), "uid-web-1".into())]
        );
    }

    #[test]
    fn local_data_and_bare_pods_need_their_flags_and_finished_pods_do_not() {
        let pods = [
            pod("cache", Some("ReplicaSet"), true, "Running"),
            pod("bare", None, false, "Running"),
            pod("done", None, true, "Succeeded"),
        ];
        let p = plan(&pods, &DrainOptions::default());
        assert_eq!(
            p.errors,
            [
                "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/cache",
                "cannot delete Pods that declare no controller (use --force to override): default/bare",
            ]
        );
        let all = DrainOptions {
            delete_emptydir_data: true,
            force: true,
            ..Default::default()
        };
        let p = plan(&pods, &all);
        assert!(p.errors.is_empty());
        let names: Vec<&str> = p.evict.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["cache", "bare", "done"]);
        assert_eq!(
            p.warnings,
            [
                "deleting Pods with local storage: default/cache",
                "deleting Pods that declare no controller: default/bare",
            ]
        );
    }

    #[test]
    fn mirror_pods_are_left_alone() {
        let mut mirror = pod("static-web-node1", None, false, "Running");
        mirror.metadata.annotations =
            Some([(MIRROR_ANNOTATION.to_string(), "x".to_string())].into());
        let p = plan(&[mirror], &DrainOptions::default());
        assert_eq!(p, Plan::default());
    }
}
