//! `sync_pod`: make Docker match one pod, then report the pod's status.
//!
//! ```text
//!  deleting? ──yes──▶ SIGTERM apps, wait grace, SIGKILL, remove all, confirm delete (grace 0)
//!     │no
//!  sandbox running? ──no──▶ (re)create it (a new sandbox means new app containers too)
//!     │
//!  for each container: decide::container_action → start / replace / back off / keep
//!     │
//!  status (phase, conditions, podIP, containerStatuses) ──▶ PUT pods/{name}/status if changed
//! ```

use crate::decide::{self, Action};
use crate::runtime::{
    ContainerInfo, State, LABEL_CONTAINER, LABEL_HASH, LABEL_NODE, LABEL_POD_NAME,
    LABEL_POD_NAMESPACE, LABEL_POD_UID, LABEL_RESTARTS, SANDBOX,
};
use crate::Kubelet;
use bollard::container::Config;
use bollard::models::HostConfig;
use k8s_openapi::api::core::v1::{Container, Pod};
use minik8s_api::meta::now_rfc3339;
use minik8s_api::quantity::Quantity;
use minik8s_api::registry;
use minik8s_client::DeleteParams;
use serde_json::{json, Value};
use std::collections::HashMap;

/// What app containers join: the sandbox, its IP and the pod's volume paths.
struct Sandbox {
    id: String,
    ip: String,
    volumes: HashMap<String, String>,
}

fn short(uid: &str) -> &str {
    &uid[..uid.len().min(8)]
}

/// Docker's name for a pod's container, as dockershim named them.
fn docker_name(pod: &Pod, container: &str, restarts: i32) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    format!(
        "k8s_{container}_{}_{}_{}_{restarts}",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        short(uid)
    )
}

fn labels(pod: &Pod, container: &str, hash: &str, restarts: i32) -> HashMap<String, String> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    HashMap::from([
        (LABEL_NODE.to_string(), node),
        (
            LABEL_POD_UID.to_string(),
            pod.metadata.uid.clone().unwrap_or_default(),
        ),
        (
            LABEL_POD_NAME.to_string(),
            pod.metadata.name.clone().unwrap_or_default(),
        ),
        (
            LABEL_POD_NAMESPACE.to_string(),
            pod.metadata.namespace.clone().unwrap_or_default(),
        ),
        (LABEL_CONTAINER.to_string(), container.to_string()),
        (LABEL_HASH.to_string(), hash.to_string()),
        (LABEL_RESTARTS.to_string(), restarts.to_string()),
    ])
}

/// The value of a downward-API field path.
fn field_value(pod: &Pod, path: &str, pod_ip: &str, host_ip: &str) -> String {
    let map_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    if let Some(k) = map_key("metadata.labels['") {
        return pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&k))
            .cloned()
            .unwrap_or_default();
    }
    if let Some(k) = map_key("metadata.annotations['") {
        return pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|l| l.get(&k))
            .cloned()
            .unwrap_or_default();
    }
    let spec = pod.spec.as_ref();
    match path {
        "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
        "metadata.uid" => pod.metadata.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        _ => String::new(),
    }
}

/// `NAME=value` pairs: literal values, `$(VAR)` references to earlier ones, and the downward API.
pub fn environment(pod: &Pod, c: &Container, pod_ip: &str, host_ip: &str) -> Vec<String> {
    let mut resolved: Vec<(String, String)> = Vec::new();
    for e in c.env.iter().flatten() {
        let value = match (
            &e.value,
            e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()),
        ) {
            (Some(v), _) => expand(v, &resolved),
            (None, Some(fr)) => field_value(pod, &fr.field_path, pod_ip, host_ip),
            _ => String::new(),
        };
        resolved.push((e.name.clone(), value));
    }
    resolved
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// Kubernetes' `$(VAR)` expansion against variables defined earlier (`$$` escapes).
fn expand(s: &str, vars: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(inner) = after
            .strip_prefix('(')
            .and_then(|a| a.find(')').map(|end| (&a[..end], &a[end + 1..])))
        {
            match vars.iter().rev().find(|(k, _)| k == inner.0) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(inner.0);
                    out.push(')');
                }
            }
            rest = inner.1;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

impl Kubelet {
    fn pod_dir(&self, pod: &Pod) -> std::path::PathBuf {
        self.config
            .root_dir
            .join("pods")
            .join(pod.metadata.uid.as_deref().unwrap_or("unknown"))
    }

    /// Host paths for the pod's volumes (emptyDir under the pod's directory, hostPath as given).
    fn prepare_volumes(&self, pod: &Pod) -> anyhow::Result<HashMap<String, String>> {
        let mut out = HashMap::new();
        for v in pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
        {
            let path = if let Some(hp) = &v.host_path {
                if matches!(hp.type_.as_deref(), Some("DirectoryOrCreate")) {
                    std::fs::create_dir_all(&hp.path)?;
                }
                hp.path.clone()
            } else {
                let dir = self.pod_dir(pod).join("volumes").join(&v.name);
                std::fs::create_dir_all(&dir)?;
                dir.display().to_string()
            };
            out.insert(v.name.clone(), path);
        }
        Ok(out)
    }

    /// Makes sure an image is there according to the pull policy; Err is (reason, message).
    async fn ensure_image(&self, image: &str, policy: &str) -> Result<(), (String, String)> {
        let present = self
            .runtime
            .image_present(image)
            .await
            .map_err(|e| ("ErrImageInspect".to_string(), e.to_string()))?;
        match policy {
            "Never" if !present => Err((
                "ErrImageNeverPull".into(),
                format!("Container image \"{image}\" is not present with pull policy of Never"),
            )),
            "Never" => Ok(()),
            "IfNotPresent" if present => Ok(()),
            _ => match self.runtime.pull(image).await {
                Ok(()) => Ok(()),
                // Lab machines have no registry: a local image serves `Always` too.
                Err(_) if present => Ok(()),
                Err(e) => Err((
                    "ErrImagePull".into(),
                    format!("failed to pull image \"{image}\": {e}"),
                )),
            },
        }
    }

    fn container_config(
        &self,
        pod: &Pod,
        c: &Container,
        sb: &Sandbox,
        hash: &str,
        restarts: i32,
    ) -> Config<String> {
        let (sandbox, pod_ip, volumes) = (sb.id.as_str(), sb.ip.as_str(), &sb.volumes);
        let limits = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap_or_default();
        let requests = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default();
        let q = |m: &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
                 k: &str| m.get(k).and_then(|q| Quantity::parse(&q.0).ok());
        let mut binds: Vec<String> = c
            .volume_mounts
            .iter()
            .flatten()
            .filter_map(|m| {
                volumes.get(&m.name).map(|host| {
                    format!(
                        "{host}:{}{}",
                        m.mount_path,
                        if m.read_only == Some(true) { ":ro" } else { "" }
                    )
                })
            })
            .collect();
        match self.write_resolv_conf(pod) {
            Ok(Some(path)) => binds.push(format!("{}:/etc/resolv.conf:ro", path.display())),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "writing the pod's resolv.conf"),
        }
        let mode = format!("container:{sandbox}");
        Config {
            image: c.image.clone(),
            entrypoint: c.command.clone().filter(|v| !v.is_empty()),
            cmd: c.args.clone().filter(|v| !v.is_empty()),
            env: Some(environment(pod, c, pod_ip, &self.config.node_ip)),
            working_dir: c.working_dir.clone(),
            tty: c.tty,
            open_stdin: c.stdin,
            labels: Some(labels(pod, &c.name, hash, restarts)),
            host_config: Some(HostConfig {
                network_mode: Some(mode.clone()),
                ipc_mode: Some(mode.clone()),
                pid_mode: None,
                binds: Some(binds),
                nano_cpus: q(&limits, "cpu").map(|v| v.millis() * 1_000_000),
                memory: q(&limits, "memory").map(|v| v.units()),
                cpu_shares: q(&requests, "cpu").map(|v| (v.millis() * 1024 / 1000).max(2)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Writes the pod's resolv.conf (dnsPolicy, dnsConfig, --cluster-dns) under
    /// the pod's directory, to be mounted at /etc/resolv.conf in each container.
    /// None: Docker's default (the node's resolvers) is what the pod should get.
    /// A file, not Docker's `--dns`: on a user network Docker would put its
    /// embedded resolver (127.0.0.11) in the file instead of the cluster DNS.
    fn write_resolv_conf(&self, pod: &Pod) -> std::io::Result<Option<std::path::PathBuf>> {
        let host = crate::dns::ResolvConf::parse(
            &std::fs::read_to_string(&self.config.resolv_conf).unwrap_or_default(),
        );
        let conf = crate::dns::resolv_conf(
            pod,
            &self.config.cluster_dns,
            &self.config.cluster_domain,
            &host,
        );
        // The node's own configuration is Docker's default too (and Docker
        // knows to drop loopback resolvers a container cannot reach).
        if conf == host || conf == crate::dns::ResolvConf::default() {
            return Ok(None);
        }
        let dir = self.pod_dir(pod);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("resolv.conf");
        std::fs::write(&path, conf.render())?;
        Ok(Some(path))
    }

    /// Starts the sandbox: the pause container owning the network namespace and hostname.
    async fn start_sandbox(&self, pod: &Pod) -> anyhow::Result<ContainerInfo> {
        let spec = pod.spec.as_ref();
        let hostname = spec
            .and_then(|s| s.hostname.clone())
            .or_else(|| pod.metadata.name.clone())
            .unwrap_or_default();
        let domain = match (
            spec.and_then(|s| s.subdomain.as_deref()),
            pod.metadata.namespace.as_deref(),
        ) {
            (Some(sub), Some(ns)) if !sub.is_empty() => {
                Some(format!("{sub}.{ns}.svc.{}", self.config.cluster_domain))
            }
            _ => None,
        };

        let config = Config {
            image: Some(self.config.pause_image.clone()),
            hostname: Some(hostname.chars().take(63).collect()),
            domainname: domain,
            labels: Some(labels(pod, SANDBOX, "", 0)),
            host_config: Some(HostConfig {
                network_mode: Some(self.runtime.network.clone()),
                ipc_mode: Some("shareable".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = self
            .runtime
            .run(&docker_name(pod, SANDBOX, 0), config)
            .await?;
        self.runtime
            .inspect(&id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("sandbox {id} vanished"))
    }

    /// Stops every container of the pod (apps with `grace` seconds, then the sandbox) and removes them.
    pub async fn kill_pod(&self, uid: &str, grace: i64) -> anyhow::Result<()> {
        let containers = self.runtime.list(Some(uid)).await?;
        let apps = containers
            .iter()
            .filter(|c| c.name != SANDBOX && c.state.is_running());
        let stops = apps.map(|c| self.runtime.stop(&c.id, grace));
        for r in futures::future::join_all(stops).await {
            r?;
        }
        for c in &containers {
            self.runtime.stop(&c.id, 0).await?;
            self.runtime.remove(&c.id).await?;
        }
        let _ = std::fs::remove_dir_all(self.config.root_dir.join("pods").join(uid));
        Ok(())
    }

    /// Brings one pod's containers in line with its spec and reports its status.
    /// Returns true when the pod needs no more syncing (it is gone).
    pub async fn sync_pod(&self, pod: &Pod) -> anyhow::Result<bool> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pods_api = self.client.dynamic(registry::of::<Pod>(), Some(&ns));

        if let Some(ts) = &pod.metadata.deletion_timestamp {
            // The grace period runs from the deletion request: after a kubelet restart, only what is left of it.
            let left = (ts.0 - chrono::Utc::now()).num_seconds().max(0);
            self.kill_pod(&uid, left).await?;
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                precondition_uid: Some(uid.clone()),
                ..Default::default()
            };
            match pods_api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(true);
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            // Finished pods keep their exited containers (for logs) until deleted.
            return Ok(false);
        }
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let mut containers = self.runtime.list(Some(&uid)).await?;

        // The sandbox.
        let sandbox = containers
            .iter()
            .find(|c| c.name == SANDBOX && c.state.is_running())
            .cloned();
        let sandbox = match sandbox {
            Some(s) => s,
            None => {
                // A new sandbox means a new network namespace: the old app containers go too.
                for c in &containers {
                    self.runtime.stop(&c.id, 0).await?;
                    self.runtime.remove(&c.id).await?;
                }
                containers.clear();
                self.start_sandbox(pod).await?
            }
        };
        let pod_ip = sandbox.ip.clone().unwrap_or_default();
        let sb = Sandbox {
            id: sandbox.id.clone(),
            ip: pod_ip.clone(),
            volumes: self.prepare_volumes(pod)?,
        };

        let now = chrono::Utc::now();
        let mut waiting: HashMap<String, (String, String)> = HashMap::new();
        for c in &spec.containers {
            let hash = decide::container_hash(c);
            let latest = latest_of(&containers, &c.name, 0);
            match decide::container_action(&hash, latest, &policy, now) {
                Action::Keep => {}
                Action::BackOff { wait_secs } => {
                    let secs = decide::backoff_secs(latest.map(|l| l.restart_count).unwrap_or(0));
                    waiting.insert(c.name.clone(), ("CrashLoopBackOff".into(), format!("back-off {secs}s restarting failed container={} pod={name}_{ns}({uid})", c.name)));
                    tracing::debug!(pod = %name, container = %c.name, wait_secs, "crash loop back-off");
                }
                Action::Start {
                    restart_count,
                    replace,
                } => {
                    let image = c.image.clone().unwrap_or_default();
                    let policy = c
                        .image_pull_policy
                        .clone()
                        .unwrap_or_else(|| "IfNotPresent".into());
                    if let Err((reason, message)) = self.ensure_image(&image, &policy).await {
                        waiting.insert(c.name.clone(), (reason, message));
                        continue;
                    }
                    if let Some(old) = replace {
                        self.runtime.stop(&old, 0).await?;
                        self.runtime.remove(&old).await?;
                    }
                    // Keep one exited container per name (for `logs --previous`), drop older ones.
                    for old in containers
                        .iter()
                        .filter(|x| x.name == c.name && x.restart_count < restart_count - 1)
                    {
                        self.runtime.remove(&old.id).await?;
                    }
                    let config = self.container_config(pod, c, &sb, &hash, restart_count);
                    match self
                        .runtime
                        .run(&docker_name(pod, &c.name, restart_count), config)
                        .await
                    {
                        Ok(_) => {}
                        Err(e) => {
                            waiting.insert(
                                c.name.clone(),
                                ("CreateContainerError".into(), e.to_string()),
                            );
                        }
                    }
                }
            }
        }
        let containers = self.runtime.list(Some(&uid)).await?;
        // Probes: readiness feeds the status; a failed liveness probe stops the
        // container, and the next sync restarts it under the restart policy.
        let mut unready = std::collections::HashSet::new();
        for c in &spec.containers {
            let Some(cur) = latest_of(&containers, &c.name, 0).filter(|x| x.state.is_running())
            else {
                continue;
            };
            let (ready, alive) = self.probe_container(c, cur, &pod_ip).await;
            if !ready {
                unready.insert(c.name.clone());
            }
            if !alive {
                tracing::info!(pod = %name, container = %c.name, "liveness probe failed; restarting the container");
                self.runtime
                    .stop(&cur.id, spec.termination_grace_period_seconds.unwrap_or(30))
                    .await?;
            }
        }
        let containers = self.runtime.list(Some(&uid)).await?;
        self.report_status(pod, &containers, &pod_ip, &waiting, &unready)
            .await?;
        Ok(false)
    }

    /// Runs the container's due probes; returns (ready, alive).
    async fn probe_container(
        &self,
        c: &Container,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> (bool, bool) {
        use crate::probe::{Kind, Settings};
        let started = match &cur.state {
            State::Running { started_at } => chrono::DateTime::parse_from_rfc3339(started_at).ok(),
            _ => None,
        };
        let running_for = started
            .map(|s| {
                (chrono::Utc::now() - s.with_timezone(&chrono::Utc))
                    .to_std()
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let (mut ready, mut alive) = (true, true);
        for (kind, probe) in [
            (Kind::Readiness, &c.readiness_probe),
            (Kind::Liveness, &c.liveness_probe),
        ] {
            let Some(p) = probe else { continue };
            let s = Settings::of(p);
            let mut tally = self.probes.get(&cur.id, kind);
            let now = std::time::Instant::now();
            if tally.due(&s, running_for, now) {
                let ok = tokio::time::timeout(s.timeout, self.probe_once(c, p, cur, pod_ip))
                    .await
                    .unwrap_or(false);
                tally.record(ok, &s, now);
                self.probes.put(&cur.id, kind, tally.clone());
            }
            match kind {
                Kind::Readiness => ready = tally.result == Some(true),
                Kind::Liveness => alive = tally.result != Some(false),
            }
        }
        (ready, alive)
    }

    /// One probe attempt: exec in the container, HTTP GET or TCP connect to the pod IP.
    async fn probe_once(
        &self,
        c: &Container,
        p: &k8s_openapi::api::core::v1::Probe,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> bool {
        if let Some(e) = &p.exec {
            return self
                .runtime
                .exec(&cur.id, e.command.clone().unwrap_or_default())
                .await
                .is_ok_and(|code| code == 0);
        }
        if let Some(h) = &p.http_get {
            let Some(port) = crate::probe::port(c, &h.port) else {
                return false;
            };
            let host = h
                .host
                .clone()
                .filter(|x| !x.is_empty())
                .unwrap_or_else(|| pod_ip.to_string());
            let scheme = h
                .scheme
                .clone()
                .unwrap_or_else(|| "HTTP".into())
                .to_lowercase();
            let url = format!(
                "{scheme}://{host}:{port}{}",
                h.path.clone().unwrap_or_else(|| "/".into())
            );
            let mut req = reqwest::Client::new()
                .get(&url)
                .header("User-Agent", "kube-probe/1.32");
            for hh in h.http_headers.iter().flatten() {
                req = req.header(&hh.name, &hh.value);
            }
            return req
                .send()
                .await
                .is_ok_and(|r| (200..400).contains(&r.status().as_u16()));
        }
        if let Some(t) = &p.tcp_socket {
            let Some(port) = crate::probe::port(c, &t.port) else {
                return false;
            };
            let host = t
                .host
                .clone()
                .filter(|x| !x.is_empty())
                .unwrap_or_else(|| pod_ip.to_string());
            return tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .is_ok();
        }
        false
    }

    async fn report_status(
        &self,
        pod: &Pod,
        containers: &[ContainerInfo],
        pod_ip: &str,
        waiting: &HashMap<String, (String, String)>,
        unready: &std::collections::HashSet<String>,
    ) -> anyhow::Result<()> {
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let mut statuses = Vec::new();
        let mut states: Vec<Option<&State>> = Vec::new();
        for c in &spec.containers {
            let current = latest_of(containers, &c.name, 0);
            let previous = latest_of(containers, &c.name, 1);
            let w = waiting.get(&c.name).map(|(r, m)| (r.as_str(), m.as_str()));
            statuses.push(decide::container_status(
                c,
                current,
                previous,
                w,
                !unready.contains(&c.name),
            ));
            // The phase follows what really ran: a container backing off still counts as started.
            states.push(current.map(|c| &c.state));
        }
        let phase = decide::pod_phase(&policy, &states);
        let all_ready = !statuses.is_empty() && statuses.iter().all(|s| s["ready"] == true);
        let old = serde_json::to_value(&pod.status).unwrap_or(Value::Null);
        let old_conditions: Vec<Value> = old
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now_rfc3339();
        let condition = |ty: &str, ok: bool| {
            let status = if ok { "True" } else { "False" };
            let prev = old_conditions.iter().find(|c| c["type"] == ty);
            let since = prev
                .filter(|p| p["status"] == status)
                .and_then(|p| p.get("lastTransitionTime").cloned())
                .unwrap_or(json!(now));
            let mut c = json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
            if !ok && (ty == "Ready" || ty == "ContainersReady") {
                let not_ready: Vec<&str> = statuses
                    .iter()
                    .filter(|s| s["ready"] != true)
                    .filter_map(|s| s["name"].as_str())
                    .collect();
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(format!(
                    "containers with unready status: [{}]",
                    not_ready.join(" ")
                ));
            }
            if ok && ty == "Ready" && phase == "Succeeded" {
                c["status"] = json!("False");
                c["reason"] = json!("PodCompleted");
            }
            c
        };
        let done = phase == "Succeeded" || phase == "Failed";
        let ready = all_ready && !done;
        let conditions = vec![
            condition("PodReadyToStartContainers", true),
            condition("Initialized", true),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled", true),
        ];
        let start_time = old.get("startTime").cloned().unwrap_or(json!(now));
        let mut status = json!({
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.config.node_ip,
            "hostIPs": [{"ip": self.config.node_ip}],
            "startTime": start_time,
            "containerStatuses": statuses,
            "qosClass": old.get("qosClass").cloned().unwrap_or(json!("BestEffort")),
        });
        if !pod_ip.is_empty() {
            status["podIP"] = json!(pod_ip);
            status["podIPs"] = json!([{"ip": pod_ip}]);
        }
        if normalized(&status) == normalized(&old) {
            return Ok(());
        }
        let mut obj = serde_json::to_value(pod)?;
        obj["status"] = status;
        let api = self
            .client
            .dynamic(registry::of::<Pod>(), pod.metadata.namespace.as_deref());
        match api
            .replace_sub(pod.metadata.name.as_deref().unwrap_or(""), "status", &obj)
            .await
        {
            Ok(_) => Ok(()),
            // A newer version is on its way through the watch; the next sync writes again.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Status without the fields that change on every write, for "did anything change".
fn normalized(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(conds) = s.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds {
            if let Some(m) = c.as_object_mut() {
                m.remove("lastProbeTime");
            }
        }
    }
    s
}

/// The `back`-th most recent container (by restart count) of a spec container: 0 = current, 1 = previous.
fn latest_of<'a>(
    containers: &'a [ContainerInfo],
    name: &str,
    back: usize,
) -> Option<&'a ContainerInfo> {
    let mut mine: Vec<&ContainerInfo> = containers.iter().filter(|c| c.name == name).collect();
    mine.sort_by_key(|c| std::cmp::Reverse(c.restart_count));
    mine.get(back).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_references_and_downward_api() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "$(A)-2 $$(A) $(NOPE)"},
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}))
        .unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            environment(&pod, c, "10.244.0.5", "192.168.1.2"),
            vec![
                "A=1",
                "B=1-2 $(A) $(NOPE)",
                "NAME=p",
                "NS=ns",
                "IP=10.244.0.5",
                "APP=x",
                "NODE=n1"
            ]
        );
    }
}
