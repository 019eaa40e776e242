//! Lab scenarios of the host-gw lab (`lab.rs` runs them on its cluster):
//! local and NFS volumes across nodes, and exclusive-topology gangs across
//! the lab's zones.

use super::*;

/// Local volumes on three nodes: a WaitForFirstConsumer claim binds to the
/// volume on the node its first pod was scheduled to, and every later pod
/// of that claim is scheduled to that node only; a local-path claim's volume
/// is made on its pod's node.
pub fn local_volumes_follow_their_node() {
    let mut manifest = String::from("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local-disks}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n");
    for node in 1..=3 {
        let dir = format!("{LAB_DIR}/disks/node{node}");
        std::fs::create_dir_all(&dir).unwrap();
        manifest.push_str(&format!("---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: disk-node{node}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  storageClassName: local-disks\n  local: {{path: {dir}}}\n  nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [node{node}]}}]}}]}}}}\n"));
    }
    manifest.push_str("---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: disk}\nspec: {accessModes: [ReadWriteOnce], storageClassName: local-disks, resources: {requests: {storage: 1Gi}}}\n");
    manifest.push_str("---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: scratch}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n");
    apply(&manifest);
    let pending = kubectl_json("get pvc disk");
    assert_eq!(
        pending["status"]["phase"], "Pending",
        "WaitForFirstConsumer"
    );
    let pod = |name: &str, claim: &str, app: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {app}}}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{{name: c, image: minik8s/busybox:latest, imagePullPolicy: IfNotPresent, command: [sh, -c, 'hostname >> /data/seen; sleep 3600'], volumeMounts: [{{name: d, mountPath: /data}}]}}]\n  volumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}]\n")
    };
    apply(&pod("first", "disk", "disk-user"));
    let first = until(60, "the first disk user running", || {
        running_pods("app=disk-user").pop()
    });
    let node = first["spec"]["nodeName"].as_str().unwrap().to_string();
    let claim = kubectl_json("get pvc disk");
    assert_eq!(claim["status"]["phase"], "Bound");
    assert_eq!(
        claim["spec"]["volumeName"],
        format!("disk-{node}"),
        "bound to the volume on the pod's node"
    );
    // Every later user of the claim goes to that node, whatever round robin says.
    for i in 0..3 {
        apply(&pod(&format!("later{i}"), "disk", "disk-user"));
    }
    let users = until(60, "four disk users running", || {
        let pods = running_pods("app=disk-user");
        (pods.len() == 4).then_some(pods)
    });
    assert!(
        users.iter().all(|p| p["spec"]["nodeName"] == node.as_str()),
        "all on {node}"
    );
    let seen = std::fs::read_to_string(format!("{LAB_DIR}/disks/{node}/seen")).unwrap();
    assert_eq!(seen.lines().count(), 4, "{seen}");
    eprintln!("local volumes: the claim bound to disk-{node}; its four pods all ran on {node}");
    // local-path: the volume is made on the node its pod landed on.
    apply(&pod("scratcher", "scratch", "scratch-user"));
    let p = until(60, "the scratch user running", || {
        running_pods("app=scratch-user").pop()
    });
    let claim = kubectl_json("get pvc scratch");
    let pv = kubectl_json(&format!(
        "get pv {}",
        claim["spec"]["volumeName"].as_str().unwrap()
    ));
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
            ["values"][0],
        p["spec"]["nodeName"]
    );
    kubectl("delete pod first later0 later1 later2 scratcher --wait=false");
    until(60, "disk users gone", || {
        (kubectl("get pods -l 'app in (disk-user,scratch-user)' --no-headers")
            .trim()
            .is_empty())
        .then_some(())
    });
    kubectl("delete pvc disk scratch");
}

/// The lab's NFS server (nfs-ganesha in its own namespace): a ReadWriteMany
/// claim of the minik8s.io/nfs class, mounted by pods on node1 and node2,
/// is one directory: each pod sees the other's file.
pub fn nfs_is_shared_across_nodes() {
    let env = std::fs::read_to_string(format!("{LAB_DIR}/env")).unwrap();
    let value = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} in the lab's env"))
            .to_string()
    };
    let (server, export) = (value("LAB_NFS_SERVER"), value("LAB_NFS_EXPORT"));
    apply(&format!("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: lab-nfs}}\nprovisioner: minik8s.io/nfs\nparameters: {{server: \"{server}\", path: {export}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: shared}}\nspec: {{accessModes: [ReadWriteMany], storageClassName: lab-nfs, resources: {{requests: {{storage: 1Gi}}}}}}\n"));
    // Each pod writes its file under another name and renames it: the
    // other pod must not find it created but still empty.
    let pod = |me: &str, other: &str, node: u32| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {me}, labels: {{app: nfs-user}}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  nodeSelector: {{kubernetes.io/hostname: node{node}}}\n  containers: [{{name: c, image: minik8s/busybox:latest, imagePullPolicy: IfNotPresent, command: [sh, -c, 'hostname > /data/.{me}; mv /data/.{me} /data/{me}; until [ -f /data/{other} ]; do sleep 0.2; done; echo \"{me} saw $(cat /data/{other})\"; sleep 3600'], volumeMounts: [{{name: d, mountPath: /data}}]}}]\n  volumes: [{{name: d, persistentVolumeClaim: {{claimName: shared}}}}]\n")
    };
    apply(&pod("left", "right", 1));
    apply(&pod("right", "left", 2));
    until(90, "both NFS users running", || {
        (running_pods("app=nfs-user").len() == 2).then_some(())
    });
    for (me, other) in [("left", "right"), ("right", "left")] {
        let every = Duration::from_millis(250);
        let seen =
            minik8s_testkit::poll_blocking(30, every, "each pod sees the other's file", || {
                let out = run(Command::new(bin_dir().join("kubectl")).args([
                    "--kubeconfig",
                    KUBECONFIG,
                    "logs",
                    me,
                ]));
                let log = String::from_utf8_lossy(&out.stdout).into_owned();
                if log.contains(&format!("{me} saw {other}")) {
                    return Ok(log);
                }
                let listing = try_sh(&format!("ls -la {export}/*/")).unwrap_or_default();
                Err(format!(
                    "logs {me}: {log}{}; the export holds: {listing}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            });
        eprintln!("nfs: {}", seen.trim());
    }
    let claim = kubectl_json("get pvc shared");
    let dir = format!(
        "{export}/default-shared-pvc-{}",
        claim["metadata"]["uid"].as_str().unwrap()
    );
    assert!(
        Path::new(&format!("{dir}/left")).exists() && Path::new(&format!("{dir}/right")).exists()
    );
    kubectl("delete pod left right --wait=false");
    until(60, "NFS users gone", || {
        kubectl("get pods -l app=nfs-user --no-headers")
            .trim()
            .is_empty()
            .then_some(())
    });
    kubectl("delete pvc shared");
    until(60, "the claim's directory removed (Delete)", || {
        (!Path::new(&dir).exists()).then_some(())
    });
}

/// Gang scheduling with exclusive topology across two zones of the lab
/// (node1 in zone-a, node2 and node3 in zone-b): each group of an LWS lands
/// whole in a zone of its own; a third group finds no free zone and waits
/// with none of its pods bound.
pub fn gangs_take_a_zone_each() {
    let zone = |n: u32| if n == 1 { "zone-a" } else { "zone-b" };
    // The real kubectl (ours has no `label`).
    let real = |args: String| {
        sh(&format!(
            "{kubectl} --kubeconfig {KUBECONFIG} {args}",
            kubectl = minik8s_testkit::real_kubectl().display()
        ))
    };
    for n in 1..=3 {
        real(format!(
            "label node node{n} topology.kubernetes.io/zone={} --overwrite",
            zone(n)
        ));
    }
    apply(
        r#"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: zonal
  annotations:
    minik8s.io/gang-scheduling: "true"
    leaderworkerset.sigs.k8s.io/exclusive-topology: topology.kubernetes.io/zone
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        terminationGracePeriodSeconds: 1
        containers:
        - name: c
          image: minik8s/busybox:latest
          imagePullPolicy: Never
          command: ["sleep", "3600"]
          resources: {requests: {cpu: 100m}}
"#,
    );
    let pods = until(90, "both zonal groups running", || {
        let p = running_pods("leaderworkerset.sigs.k8s.io/name=zonal");
        (p.len() == 4).then_some(p)
    });
    let mut zones: std::collections::BTreeMap<String, BTreeSet<&str>> = Default::default();
    for p in &pods {
        let node: u32 = p["spec"]["nodeName"].as_str().unwrap()["node".len()..]
            .parse()
            .unwrap();
        let group = p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"]
            .as_str()
            .unwrap()
            .to_string();
        zones.entry(group).or_default().insert(zone(node));
    }
    assert_eq!(zones.len(), 2, "{zones:?}");
    assert!(
        zones.values().all(|z| z.len() == 1),
        "each group in one zone: {zones:?}"
    );
    assert_ne!(zones["0"], zones["1"], "the groups in different zones");
    // A third group has no zone left: it waits whole.
    kubectl("scale lws zonal --replicas=3");
    until(60, "group 2 waiting as a gang", || {
        let p = kubectl_json(
            "get pods -l leaderworkerset.sigs.k8s.io/name=zonal,leaderworkerset.sigs.k8s.io/group-index=2",
        );
        let items = p["items"].as_array().cloned().unwrap_or_default();
        let waiting = items.iter().filter(|x| {
            x["spec"]["nodeName"].is_null()
                && x["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "PodScheduled"
                            && c["message"].as_str().unwrap_or("").starts_with("gang ")
                    })
                })
        });
        (items.len() == 2 && waiting.count() == 2).then_some(())
    });
    kubectl("delete lws zonal");
    for n in 1..=3 {
        real(format!("label node node{n} topology.kubernetes.io/zone-"));
    }
}

/// The real kubectl (ours lacks some verbs and flags).
fn real(args: &str) -> Option<String> {
    try_sh(&format!(
        "{} --kubeconfig {KUBECONFIG} {args}",
        minik8s_testkit::real_kubectl().display()
    ))
}

/// A Deployment of 6 with `maxSkew: 1` over `kubernetes.io/hostname` lands
/// two pods on each of the three nodes.
pub fn deployment_spreads_two_per_node() {
    apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: spread-web}
spec:
  replicas: 6
  selector: {matchLabels: {app: spread-web}}
  template:
    metadata: {labels: {app: spread-web}}
    spec:
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {matchLabels: {app: spread-web}}
      containers:
      - name: c
        image: minik8s/busybox:latest
        imagePullPolicy: IfNotPresent
        command: ["sleep", "3600"]
"#,
    );
    let pods = until(90, "six spread-web pods running", || {
        let p = running_pods("app=spread-web");
        (p.len() == 6).then_some(p)
    });
    let mut per_node: std::collections::BTreeMap<String, usize> = Default::default();
    for p in &pods {
        *per_node
            .entry(p["spec"]["nodeName"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{per_node:?}"
    );
    kubectl("delete deploy spread-web");
}

/// Preemption with real containers: each node is filled by a pod of low
/// priority, two of them under a PodDisruptionBudget that allows no
/// disruption. A pod of high priority preempts the one the budget does not
/// protect, is nominated to its node, and runs there once it is gone.
pub fn preemption_spares_the_budget() {
    // 70% of the smallest node's CPU: one such pod per node, never two.
    let cpu_millis = (1..=3)
        .map(|n| {
            let node = kubectl_json(&format!("get node node{n}"));
            let cpu = node["status"]["allocatable"]["cpu"]
                .as_str()
                .unwrap()
                .to_string();
            match cpu.strip_suffix('m') {
                Some(m) => m.parse::<i64>().unwrap(),
                None => cpu.parse::<i64>().unwrap() * 1000,
            }
        })
        .min()
        .unwrap();
    let request = format!("{}m", cpu_millis * 7 / 10);
    let mut manifest = String::from(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: lab-low}\nvalue: 100\n\
         ---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: lab-high}\nvalue: 1000\n\
         ---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guarded}\n\
         spec: {minAvailable: 2, selector: {matchLabels: {app: guarded}}}\n",
    );
    let pod = |name: &str, app: &str, class: &str, node: Option<u32>| {
        let selector = node.map_or(String::new(), |n| {
            format!("  nodeSelector: {{kubernetes.io/hostname: node{n}}}\n")
        });
        format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {app}}}}}\nspec:\n  priorityClassName: {class}\n  terminationGracePeriodSeconds: 1\n{selector}  containers: [{{name: c, image: minik8s/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, '3600'], resources: {{requests: {{cpu: {request}}}}}}}]\n")
    };
    manifest.push_str(&pod("guarded-1", "guarded", "lab-low", Some(1)));
    manifest.push_str(&pod("guarded-2", "guarded", "lab-low", Some(2)));
    manifest.push_str(&pod("spare", "spare", "lab-low", Some(3)));
    apply(&manifest);
    until(90, "the three low pods running", || {
        let n = running_pods("app=guarded").len() + running_pods("app=spare").len();
        (n == 3).then_some(())
    });
    until(30, "the budget allowing no disruption", || {
        let b = kubectl_json("get pdb guarded");
        (b["status"]["currentHealthy"] == 2 && b["status"]["disruptionsAllowed"] == 0).then_some(())
    });
    apply(&pod("urgent", "urgent", "lab-high", None));
    let urgent = until(60, "the urgent pod running", || {
        let p = kubectl_json("get pod urgent");
        (p["status"]["phase"] == "Running").then_some(p)
    });
    assert_eq!(
        urgent["spec"]["nodeName"], "node3",
        "the unguarded pod's node"
    );
    assert_eq!(urgent["spec"]["priority"], 1000);
    assert!(
        real("get pod spare -o name").is_none(),
        "the victim is gone"
    );
    let guarded = running_pods("app=guarded");
    assert_eq!(guarded.len(), 2, "the budget's pods kept running");
    let events = real("get events --field-selector involvedObject.name=spare -o json")
        .expect("events listed");
    let events: Value = serde_json::from_str(&events).unwrap();
    let preempted = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "Preempted")
        .unwrap_or_else(|| panic!("no Preempted event: {events}"));
    assert_eq!(
        preempted["message"],
        format!(
            "Preempted by pod {} on node node3",
            urgent["metadata"]["uid"].as_str().unwrap()
        )
    );
    real("delete pod urgent guarded-1 guarded-2 --wait=false").expect("pods deleted");
    real("delete pdb guarded").expect("budget deleted");
    real("delete priorityclass lab-low lab-high").expect("classes deleted");
}

/// NetworkPolicy across nodes, enforced by every node's kube-proxy: the
/// server namespace denies all ingress but from the friends' namespace;
/// the friends' namespace denies all egress but DNS and the server. A pod
/// of the friends (node2) reaches the server (node1) by Service name; a
/// pod of another namespace (node3) does not, by Service or by pod IP.
pub fn network_policies_across_nodes() {
    let pinned = |name: &str, ns: &str, node: u32, app: &str, cmd: &str| {
        format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}, labels: {{app: {app}}}}}\nspec:\n  nodeSelector: {{kubernetes.io/hostname: node{node}}}\n  terminationGracePeriodSeconds: 1\n  containers: [{{name: c, image: minik8s/busybox:latest, imagePullPolicy: IfNotPresent, command: [sh, -c, '{cmd}'], ports: [{{name: http, containerPort: 8080}}]}}]\n")
    };
    let mut manifest = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: np-server}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: np-friend, labels: {team: friends}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: np-other}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: np-server}\n\
         spec: {selector: {app: np-web}, ports: [{port: 80, targetPort: http}]}\n",
    );
    manifest.push_str(&pinned(
        "np-web",
        "np-server",
        1,
        "np-web",
        "mkdir -p /www && echo np-web > /www/index.html && httpd -f -p 8080 -h /www",
    ));
    manifest.push_str(&pinned("np-friend", "np-friend", 2, "client", "sleep 3600"));
    manifest.push_str(&pinned(
        "np-stranger",
        "np-other",
        3,
        "client",
        "mkdir -p /www && echo np-stranger > /www/index.html && httpd -f -p 8080 -h /www",
    ));
    apply(&manifest);
    let running = |ns: &str, name: &str| {
        until(90, &format!("{ns}/{name} running"), || {
            let p = kubectl_json(&format!("get pod {name} -n {ns}"));
            (p["status"]["phase"] == "Running").then_some(p)
        })
    };
    let web = running("np-server", "np-web");
    let friend = running("np-friend", "np-friend");
    let stranger = running("np-other", "np-stranger");
    let web_ip = web["status"]["podIP"].as_str().unwrap().to_string();
    let fetch = |pod: &Value, url: &str| {
        in_pod(pod, &format!("timeout 3 wget -qO- {url}")).map(|s| s.trim().to_string())
    };
    let by_name = "http://web.np-server/";
    let by_ip = format!("http://{web_ip}:8080/");
    let stranger_url = format!(
        "http://{}:8080/",
        stranger["status"]["podIP"].as_str().unwrap()
    );
    until(30, "every pod reaches the others before any policy", || {
        (fetch(&friend, by_name).as_deref() == Some("np-web")
            && fetch(&stranger, &by_ip).as_deref() == Some("np-web")
            && fetch(&friend, &stranger_url).as_deref() == Some("np-stranger"))
        .then_some(())
    });

    apply(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: np-server}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-friends, namespace: np-server}
spec:
  podSelector: {matchLabels: {app: np-web}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: friends}}}]
    ports: [{port: http}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny-egress, namespace: np-friend}
spec: {podSelector: {}, policyTypes: [Egress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-dns-and-web, namespace: np-friend}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: np-server}}, podSelector: {matchLabels: {app: np-web}}}]
    ports: [{port: 8080}]
"#,
    );
    until(
        30,
        "the stranger on node3 refused, by Service and by pod IP",
        || {
            (fetch(&stranger, by_name).is_none() && fetch(&stranger, &by_ip).is_none())
                .then_some(())
        },
    );
    // The friend on node2: DNS and the Service still answer under its egress deny.
    for _ in 0..3 {
        assert_eq!(fetch(&friend, by_name).as_deref(), Some("np-web"));
    }
    // Its egress anywhere else is denied: the stranger's server it reached before.
    let out = in_pod_or_why(&friend, &format!("timeout 3 wget -qO- {stranger_url}"));
    assert!(out.is_err(), "egress beyond the allowed: {out:?}");
    let table = real("get netpol -n np-server").expect("netpol listed");
    assert!(
        table.contains("POD-SELECTOR") && table.contains("app=np-web"),
        "{table}"
    );
    real("delete namespace np-server np-friend np-other --wait=false").expect("namespaces deleted");
}
