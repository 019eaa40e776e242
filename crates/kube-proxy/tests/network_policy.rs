//! NetworkPolicy end to end on real iptables: a "node" network namespace
//! with a bridge, three "pods" (namespaces of their own on veths, busybox
//! httpd / wget), their Pod and Namespace objects in a real apiserver, and
//! kube-proxy enforcing the policies in the node's FORWARD chain. Checked
//! from the pods: what connects and what is refused, as policies come and go.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube_proxy::iptables::backend::policy_pod;
use kube_proxy::iptables::network_policy::{self, Cluster, NamespaceLabels};
use kube_proxy::iptables::parse_save_table;
use kube_proxy::proxier::{self, Iptables};
use minik8s_api::registry;
use minik8s_client::rest::content;
use minik8s_client::Client;
use minik8s_testkit::{Backend, TestServer};
use serde_json::json;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{need, sh};

/// The node and its pods' network namespaces; removed on drop.
struct Lab {
    prefix: String,
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Lab {
    fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn exec(&self, ns: &str, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(ns)])
            .args(args)
            .output()
            .unwrap()
    }

    fn up(pods: &[(&str, &str)]) -> Lab {
        for tool in [
            "ip",
            "iptables-save",
            "iptables-restore",
            "busybox",
            "nsenter",
        ] {
            need(tool);
        }
        let lab = Lab {
            prefix: format!("np-{}", std::process::id()),
            children: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        let node = lab.ns("node");
        sh(&["ip", "netns", "add", &node]);
        let in_node = |args: &[&str]| {
            let mut all = vec!["ip", "netns", "exec", node.as_str()];
            all.extend_from_slice(args);
            sh(&all)
        };
        in_node(&["ip", "link", "set", "lo", "up"]);
        in_node(&["ip", "link", "add", "br0", "type", "bridge"]);
        in_node(&["ip", "addr", "add", "10.244.1.1/24", "dev", "br0"]);
        in_node(&["ip", "link", "set", "br0", "up"]);
        for (i, (name, ip)) in pods.iter().enumerate() {
            let ns = lab.ns(name);
            sh(&["ip", "netns", "add", &ns]);
            let host_end = format!("v{}{i}", std::process::id() % 10000);
            sh(&[
                "ip", "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]);
            sh(&["ip", "link", "set", &host_end, "netns", &node]);
            in_node(&["ip", "link", "set", &host_end, "master", "br0", "up"]);
            for args in [
                vec!["ip", "link", "set", "lo", "up"],
                vec!["ip", "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
                vec!["ip", "link", "set", "eth0", "up"],
            ] {
                let out = lab.exec(name, &args);
                assert!(
                    out.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        lab
    }

    fn httpd(&mut self, pod: &str, ip: &str) {
        let root = self.dir.path().join(pod);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("index.html"), format!("{pod}\n")).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(pod),
                "busybox",
                "httpd",
                "-f",
                "-p",
            ])
            .arg(format!("{ip}:8080"))
            .args(["-h", root.to_str().unwrap()])
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// The node's filter table, as `iptables-save` prints it.
    fn filter_table(&self) -> String {
        let out = self.exec("node", &["iptables-save", "-t", "filter"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What `pod` gets from `url` ("" when refused or timed out).
    fn get(&self, pod: &str, url: &str) -> String {
        // (busybox 1.35's `wget -T` crashes; `timeout` bounds it instead.)
        let out = self.exec(pod, &["timeout", "3", "busybox", "wget", "-qO-", url]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in ["node", "web", "friend", "stranger"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(ns)])
                .status();
        }
    }
}

async fn within<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    minik8s_testkit::poll(secs, Duration::from_millis(100), what, || {
        let got = f().ok_or_else(|| "not yet".to_string());
        async move { got }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_allow_and_deny_between_pods() {
    let pods = [
        ("web", "10.244.1.2"),
        ("friend", "10.244.1.3"),
        ("stranger", "10.244.1.4"),
    ];
    let mut lab = Lab::up(&pods);
    lab.httpd("web", "10.244.1.2");
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let namespaces = client.dynamic(registry::of::<Namespace>(), None);
    for (ns, labels) in [
        ("alice", json!({})),
        ("bob", json!({"team": "friends"})),
        ("carol", json!({})),
    ] {
        namespaces
            .create(&json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels}}))
            .await
            .unwrap();
    }
    // The Pod objects a kubelet would have written: addresses in status.
    for ((name, ip), ns) in pods.iter().zip(["alice", "bob", "carol"]) {
        let api = client.dynamic(registry::of::<Pod>(), Some(ns));
        api.create(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeName": "node", "containers": [{"name": "c", "image": "busybox",
                "ports": [{"name": "http", "containerPort": 8080}]}]}}))
            .await
            .unwrap();
        api.patch(
            name,
            Some("status"),
            content::MERGE_PATCH,
            &json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}),
        )
        .await
        .unwrap();
    }
    let cfg = proxier::Config {
        iptables: Iptables {
            netns: Some(format!("/run/netns/{}", lab.ns("node"))),
        },
        resync: Duration::from_secs(2),
        ..Default::default()
    };
    let proxy = tokio::spawn(kube_proxy::run(
        client.clone(),
        kube_proxy::Parts {
            proxy: Some(cfg),
            ..Default::default()
        },
    ));
    let url = "http://10.244.1.2:8080/";
    within(10, "both clients reach web without policies", || {
        (lab.get("friend", url) == "web" && lab.get("stranger", url) == "web").then_some(())
    })
    .await;

    // As Docker and the kubelet do when they set a pod network up: a rule
    // accepting pod traffic put above kube-proxy's jumps.
    let accept = lab.exec(
        "node",
        &[
            "iptables",
            "-I",
            "FORWARD",
            "1",
            "-s",
            "10.244.1.0/24",
            "-j",
            "ACCEPT",
        ],
    );
    assert!(accept.status.success(), "{accept:?}");
    let policies = client.dynamic(registry::of::<NetworkPolicy>(), Some("alice"));
    let default_deny = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny"}, "spec": {"podSelector": {}}});
    // A malformed CIDR is refused with its field path, and nothing is stored.
    let bad = policies
        .create(
            &json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "bad"}, "spec": {"podSelector": {},
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}}),
        )
        .await
        .unwrap_err();
    let bad = bad.api().expect("a Status from the apiserver");
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
    assert!(
        bad.message.contains("spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value"),
        "{}",
        bad.message
    );
    assert!(policies.get("bad").await.is_err());
    policies.create(&default_deny).await.unwrap();
    within(10, "default deny: nobody reaches web", || {
        (lab.get("friend", url).is_empty() && lab.get("stranger", url).is_empty()).then_some(())
    })
    .await;
    policies
        .create(&json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "friends"}, "spec": {"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "friends"}}}],
                         "ports": [{"port": "http"}]}]}}))
        .await
        .unwrap();
    within(10, "the friends' namespace gets through", || {
        (lab.get("friend", url) == "web").then_some(())
    })
    .await;
    assert_eq!(lab.get("stranger", url), "", "carol's pod is still refused");
    // Web itself is not isolated for egress: it reaches the others' ports
    // (refused by nobody but the closed port: wget fails fast, no policy drop).
    let egress = lab.exec(
        "web",
        &[
            "timeout",
            "3",
            "busybox",
            "wget",
            "-qO-",
            "http://10.244.1.4:9/",
        ],
    );
    assert!(
        String::from_utf8_lossy(&egress.stderr).contains("refused"),
        "{egress:?}"
    );

    // What iptables-save prints back is exactly what was written: a resync
    // rewrites nothing.
    let save = lab.filter_table();
    let applied: kube_proxy::iptables::Chains = parse_save_table(&save, "filter")
        .into_iter()
        .filter(|(name, _)| name.starts_with(network_policy::POLICIES))
        .collect();
    let all_pods: Vec<Pod> = {
        let list = client.get_json("/api/v1/pods").await.unwrap();
        serde_json::from_value(list["items"].clone()).unwrap()
    };
    let policy_pods: Vec<_> = all_pods.iter().filter_map(policy_pod).collect();
    let mut policy_pods = policy_pods;
    policy_pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let list = client
        .get_json("/apis/networking.k8s.io/v1/networkpolicies")
        .await
        .unwrap();
    let policy_objects: Vec<Arc<NetworkPolicy>> =
        serde_json::from_value::<Vec<NetworkPolicy>>(list["items"].clone())
            .unwrap()
            .into_iter()
            .map(Arc::new)
            .collect();
    let labels: NamespaceLabels = serde_json::from_value::<Vec<Namespace>>(
        client.get_json("/api/v1/namespaces").await.unwrap()["items"].clone(),
    )
    .unwrap()
    .into_iter()
    .filter_map(|n| Some((n.metadata.name?, n.metadata.labels.unwrap_or_default())))
    .collect();
    let desired = network_policy::desired(&Cluster {
        policies: &policy_objects,
        pods: &policy_pods,
        namespaces: &labels,
    });
    assert_eq!(applied, desired, "{save}");

    // Policies gone: everyone reaches web again, and no policy chain is left
    // but the empty entry chain.
    policies
        .delete("friends", &Default::default())
        .await
        .unwrap();
    policies
        .delete("default-deny", &Default::default())
        .await
        .unwrap();
    within(10, "both clients reach web again", || {
        (lab.get("friend", url) == "web" && lab.get("stranger", url) == "web").then_some(())
    })
    .await;
    let save = lab.filter_table();
    let left: Vec<&str> = save
        .lines()
        .filter(|l| l.starts_with(":KUBE-NWPLCY"))
        .collect();
    assert_eq!(left, [":KUBE-NWPLCY - [0:0]"], "{save}");
    proxy.abort();
    let _ = proxy.await;

    // The same chains kept on their own, as the ipvs proxier keeps them
    // (it writes no filter chains of its own).
    policies.create(&default_deny).await.unwrap();
    let informers = minik8s_client::SharedInformers::new(&client);
    let wake = Arc::new(tokio::sync::Notify::new());
    let source = kube_proxy::iptables::backend::PolicySource::new(&informers, wake);
    informers.start();
    informers.wait_synced().await;
    let node = Iptables {
        netns: Some(format!("/run/netns/{}", lab.ns("node"))),
    };
    let mut enforcer = kube_proxy::iptables::backend::PolicyEnforcer::new(source, node);
    assert!(enforcer.sync().await.unwrap(), "the deny written");
    assert!(!enforcer.sync().await.unwrap(), "nothing left to write");
    assert_eq!(
        lab.get("friend", url),
        "",
        "denied by the enforcer's chains"
    );
    enforcer.resync_from_kernel();
    assert!(
        !enforcer.sync().await.unwrap(),
        "the kernel's chains read back equal"
    );
    policies
        .delete("default-deny", &Default::default())
        .await
        .unwrap();
    // Until the informer sees the deletion, a sync keeps the deny.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        enforcer.sync().await.unwrap();
        if lab.get("friend", url) == "web" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "web still denied after the policy went"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
