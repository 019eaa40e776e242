//! kube-proxy end to end. The cluster DNS answers real UDP queries from a real
//! apiserver's objects. The iptables proxier runs on real iptables inside a private network
//! namespace: a real apiserver, a Service with user-managed EndpointSlices,
//! "pods" that are busybox httpd / python UDP servers on addresses of the
//! namespace's loopback, and clients that connect to the VIP and NodePort from
//! inside the namespace (OUTPUT DNAT, the path a node's own traffic takes).

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_proxy::proxier::{self, Iptables};
use minik8s_api::registry;
use minik8s_client::{Client, DynamicApi};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod common;
use common::{need, sh, stdout_of};

/// A network namespace with lo up, endpoint addresses and a service route;
/// deleted (with every process started in it) on drop.
struct Netns {
    name: String,
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Netns {
    fn new() -> Netns {
        for t in [
            "ip",
            "iptables-restore",
            "iptables-save",
            "nsenter",
            "busybox",
            "python3",
        ] {
            need(t);
        }
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("kp-test-{}-{seq}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns {
            name,
            children: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        for a in ["10.244.1.2/32", "10.244.2.2/32", "192.168.99.1/32"] {
            ns.exec(&["ip", "addr", "add", a, "dev", "lo"]);
        }
        // The node's own connections to a VIP need a route before OUTPUT DNAT.
        ns.exec(&["ip", "route", "add", "10.96.0.0/12", "dev", "lo"]);
        ns
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path())).arg("--").args(args);
        c
    }

    fn exec(&self, args: &[&str]) -> String {
        stdout_of(self.cmd(args), args)
    }

    /// An HTTP server on `ip:8080` answering `body`.
    fn httpd(&mut self, ip: &str, body: &str) {
        let root = self.dir.path().join(ip);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("index.html"), format!("{body}\n")).unwrap();
        let child = self
            .cmd(&[
                "busybox",
                "httpd",
                "-f",
                "-p",
                &format!("{ip}:8080"),
                "-h",
                root.to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// A UDP server on `ip:5353` answering every datagram with `body`.
    fn udp_server(&mut self, ip: &str, body: &str) {
        let prog = format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('{ip}',5353))\nwhile True:\n  d,a=s.recvfrom(512)\n  s.sendto(b'{body}',a)\n"
        );
        let child = self.cmd(&["python3", "-c", &prog]).spawn().unwrap();
        self.children.push(child);
    }

    fn get(&self, url: &str) -> String {
        let out = self
            .cmd(&["timeout", "3", "busybox", "wget", "-qO-", url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// An HTTP GET of `ip:port` from the source address `src` (a client
    /// of its own, as far as ClientIP affinity can tell).
    fn get_from(&self, src: &str, ip: &str, port: u16) -> String {
        let prog = format!(
            "import socket\ns=socket.create_connection(('{ip}',{port}),timeout=3,source_address=('{src}',0))\ns.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\nd=b''\nwhile True:\n  c=s.recv(4096)\n  if not c: break\n  d+=c\nprint(d.split(b'\\r\\n\\r\\n',1)[-1].decode().strip())\n"
        );
        let out = self.cmd(&["python3", "-c", &prog]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn udp(&self, ip: &str, port: u16) -> String {
        let prog = format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(2)\ns.sendto(b'hi',('{ip}',{port}))\nprint(s.recv(512).decode())\n"
        );
        let out = self.cmd(&["python3", "-c", &prog]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn save(&self) -> String {
        self.exec(&["iptables-save", "-t", "nat"])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Polls `f` (every 50 ms: rules apply fast) until it gives Some, for up to `secs`.
async fn within<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let every = Duration::from_millis(50);
    minik8s_testkit::poll(secs, every, what, || {
        let got = f().ok_or_else(|| "not yet".to_string());
        async move { got }
    })
    .await
}

/// An apiserver, its client, and the default namespace's Services and EndpointSlices.
async fn apiserver() -> (TestServer, Client, DynamicApi, DynamicApi) {
    let server = TestServer::start(Backend::Embedded).await;
    let client = Client::new(&server.url);
    let svcs = client.dynamic(registry::of::<Service>(), Some("default"));
    let slices = client.dynamic(registry::of::<EndpointSlice>(), Some("default"));
    (server, client, svcs, slices)
}

/// kube-proxy's iptables proxier for `client`'s cluster, writing into `ns`,
/// as the node `node` (empty: none, so no endpoint is local).
fn start_proxy(
    client: &Client,
    ns: &Netns,
    node: &str,
) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    let cfg = proxier::Config {
        node_name: node.into(),
        iptables: Iptables {
            netns: Some(ns.path()),
        },
        ..Default::default()
    };
    tokio::spawn(kube_proxy::run(
        client.clone(),
        kube_proxy::Parts {
            proxy: Some(cfg),
            ..Default::default()
        },
    ))
}

fn slice(endpoints: &[&str]) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
        "endpoints": endpoints.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_balance_follow_endpoints_and_clean_up() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut ns = Netns::new();
    ns.httpd("10.244.1.2", "one");
    ns.httpd("10.244.2.2", "two");
    ns.udp_server("10.244.1.2", "udp-one");
    // A chain left by an earlier run must go at start.
    ns.exec(&["iptables", "-t", "nat", "-N", "KUBE-SVC-STALE0000000000"]);
    assert!(
        ns.save().contains(":KUBE-SVC-STALE0000000000"),
        "{}",
        ns.save()
    );

    let (_server, client, svcs, slices) = apiserver().await;
    // No selector: the endpoints are the user's (as for a database outside the cluster).
    let svc = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}),
        )
        .await
        .unwrap();
    let vip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let node_port = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    slices
        .create(&slice(&["10.244.1.2", "10.244.2.2"]))
        .await
        .unwrap();

    let proxy = start_proxy(&client, &ns, "");

    // Round robin: the nth rules alternate exactly, connection by connection.
    let url = format!("http://{vip}/");
    let first = within(10, "the VIP answers", || {
        Some(ns.get(&url)).filter(|b| !b.is_empty())
    })
    .await;
    let mut seen = vec![first];
    for _ in 0..5 {
        seen.push(ns.get(&url));
    }
    let other = |b: &str| if b == "one" { "two" } else { "one" };
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1],
            other(&pair[0]),
            "round robin over both endpoints: {seen:?}"
        );
    }
    assert!(
        !ns.save().contains("KUBE-SVC-STALE0000000000"),
        "the stale chain was removed at start"
    );

    // NodePort on the node's address, and the UDP port.
    let np = format!("http://192.168.99.1:{node_port}/");
    let via_np: Vec<String> = (0..2).map(|_| ns.get(&np)).collect();
    assert!(
        via_np.contains(&"one".to_string()) && via_np.contains(&"two".to_string()),
        "{via_np:?}"
    );
    assert_eq!(
        ns.udp(&vip, 53),
        "udp-one",
        "UDP to the VIP reaches the (only) UDP server"
    );

    // A Service with no ready endpoint is refused at once, not left to time out.
    let empty = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "empty"},
            "spec": {"ports": [{"port": 80}]}}),
        )
        .await
        .unwrap();
    let empty_url = format!("http://{}/", empty["spec"]["clusterIP"].as_str().unwrap());
    within(5, "the empty Service's reject rule", || {
        let filter = ns.exec(&["iptables-save", "-t", "filter"]);
        filter
            .contains("default/empty:/TCP has no endpoints")
            .then_some(())
    })
    .await;
    let t = Instant::now();
    let out = ns
        .cmd(&["timeout", "5", "busybox", "wget", "-qO-", &empty_url])
        .output()
        .unwrap();
    let refused = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused"),
        "connection refused: {err} {:?} after {refused:?}; {}",
        out.status,
        ns.exec(&["iptables-save"])
    );
    assert!(
        refused < Duration::from_secs(1),
        "refused after {refused:?}"
    );

    // An endpoint leaves: within a second every request goes to the other.
    let t = Instant::now();
    slices
        .replace("web-1", &slice(&["10.244.2.2"]))
        .await
        .unwrap();
    within(5, "the removed endpoint leaves the rules", || {
        (!ns.save().contains("10.244.1.2:8080")).then_some(())
    })
    .await;
    let applied = t.elapsed();
    assert!(
        applied < Duration::from_secs(1),
        "applied after {applied:?}"
    );
    for _ in 0..3 {
        assert_eq!(ns.get(&url), "two");
    }

    // A resync with nothing new writes nothing: the rules' packet counters survive.
    let before = ns.save();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        ns.save()
            .lines()
            .filter(|l| l.starts_with("-A KUBE-"))
            .collect::<Vec<_>>(),
        before
            .lines()
            .filter(|l| l.starts_with("-A KUBE-"))
            .collect::<Vec<_>>()
    );

    // The Service goes: so do its chains (the base chains stay).
    svcs.delete("web", &Default::default()).await.unwrap();
    within(5, "the service's chains go", || {
        let save = ns.save();
        (!save.contains("KUBE-SVC-") && !save.contains("KUBE-SEP-")).then_some(())
    })
    .await;
    assert!(ns.get(&url).is_empty(), "nothing answers on the old VIP");
    let save = ns.save();
    for jump in ["-A PREROUTING", "-A OUTPUT", "-A POSTROUTING"] {
        assert!(
            save.lines()
                .any(|l| l.starts_with(jump) && l.contains("KUBE-")),
            "{jump} jump kept: {save}"
        );
    }
    proxy.abort();

    // `kube-proxy --cleanup`: no chain and no jump of ours is left.
    let tools = Iptables {
        netns: Some(ns.path()),
    };
    tools.cleanup().await.unwrap();
    let save = ns.exec(&["iptables-save"]);
    assert!(!save.contains("KUBE-"), "cleanup left rules behind: {save}");
}

/// `sessionAffinity: ClientIP`: every connection of one client reaches the
/// endpoint its first one reached; the next client is balanced on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ip_affinity_keeps_each_client_on_one_endpoint() {
    let mut ns = Netns::new();
    ns.httpd("10.244.1.2", "one");
    ns.httpd("10.244.2.2", "two");
    for client in ["192.168.99.2/32", "192.168.99.3/32"] {
        ns.exec(&["ip", "addr", "add", client, "dev", "lo"]);
    }
    let (_server, client, svcs, slices) = apiserver().await;
    let svc = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                          {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}),
        )
        .await
        .unwrap();
    let vip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    slices
        .create(&slice(&["10.244.1.2", "10.244.2.2"]))
        .await
        .unwrap();
    let proxy = start_proxy(&client, &ns, "");
    within(10, "the affinity rules", || {
        ns.save()
            .contains("--rcheck --seconds 600 --reap")
            .then_some(())
    })
    .await;
    let first: Vec<String> = (0..20)
        .map(|_| ns.get_from("192.168.99.2", &vip, 80))
        .collect();
    assert!(
        ["one", "two"].contains(&first[0].as_str()) && first.iter().all(|b| *b == first[0]),
        "one client, one endpoint: {first:?}"
    );
    let second: Vec<String> = (0..10)
        .map(|_| ns.get_from("192.168.99.3", &vip, 80))
        .collect();
    assert!(
        second.iter().all(|b| *b == second[0]) && second[0] != first[0],
        "the next client goes to the other endpoint and stays: {first:?} {second:?}"
    );
    proxy.abort();
}

/// `trafficDistribution`: with every endpoint hinted, the node's zone keeps
/// its traffic; the node moving to another zone moves it; one endpoint
/// without a hint spreads it over all again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_hints_keep_traffic_in_the_nodes_zone() {
    let mut ns = Netns::new();
    ns.httpd("10.244.1.2", "zone-a");
    ns.httpd("10.244.2.2", "zone-b");
    let (_server, client, svcs, slices) = apiserver().await;
    let nodes = client.dynamic(registry::of::<k8s_openapi::api::core::v1::Node>(), None);
    let node = |zone: &str| {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": zone}}})
    };
    nodes.create(&node("a")).await.unwrap();
    let svc = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"trafficDistribution": "PreferClose",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                          {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}),
        )
        .await
        .unwrap();
    let vip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let url = format!("http://{vip}/");
    let mut hinted = slice(&["10.244.1.2", "10.244.2.2"]);
    for (i, zone) in ["a", "b"].iter().enumerate() {
        hinted["endpoints"][i]["zone"] = json!(zone);
        hinted["endpoints"][i]["hints"] = json!({"forZones": [{"name": zone}]});
    }
    slices.create(&hinted).await.unwrap();
    let proxy = start_proxy(&client, &ns, "n1");
    let answers = |n: usize| -> Vec<String> { (0..n).map(|_| ns.get(&url)).collect() };
    within(10, "only zone a's endpoint", || {
        let seen = answers(6);
        seen.iter().all(|b| b == "zone-a").then_some(())
    })
    .await;
    // The node is relabelled into zone b: its kube-proxy follows.
    let mut moved = nodes.get("n1").await.unwrap();
    moved["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("b");
    nodes.replace("n1", &moved).await.unwrap();
    within(10, "only zone b's endpoint", || {
        answers(6).iter().all(|b| b == "zone-b").then_some(())
    })
    .await;
    // One endpoint without a hint: cluster-wide again.
    let mut half = slices.get("web-1").await.unwrap();
    half["endpoints"][0]
        .as_object_mut()
        .unwrap()
        .remove("hints");
    slices.replace("web-1", &half).await.unwrap();
    within(10, "both endpoints again", || {
        let seen = answers(12);
        (seen.iter().any(|b| b == "zone-a") && seen.iter().any(|b| b == "zone-b")).then_some(())
    })
    .await;
    proxy.abort();
}

/// `internalTrafficPolicy: Local`: the ClusterIP reaches only this node's
/// endpoint, and nothing once it has none; `externalTrafficPolicy: Local`
/// rules apply on real iptables and read back unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_local_policies_keep_traffic_on_the_node() {
    let mut ns = Netns::new();
    ns.httpd("10.244.1.2", "here");
    ns.httpd("10.244.2.2", "elsewhere");
    let (_server, client, svcs, slices) = apiserver().await;
    let svc = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "internalTrafficPolicy": "Local", "externalTrafficPolicy": "Local",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                          {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}),
        )
        .await
        .unwrap();
    let vip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let on_nodes = |here: bool| {
        let mut s = slice(&["10.244.1.2", "10.244.2.2"]);
        s["endpoints"][0]["nodeName"] = json!(if here { "n1" } else { "n3" });
        s["endpoints"][1]["nodeName"] = json!("n2");
        s
    };
    slices.create(&on_nodes(true)).await.unwrap();
    let proxy = start_proxy(&client, &ns, "n1");
    let url = format!("http://{vip}/");
    within(10, "the VIP answers", || {
        Some(ns.get(&url)).filter(|b| !b.is_empty())
    })
    .await;
    let seen: Vec<String> = (0..6).map(|_| ns.get(&url)).collect();
    assert!(
        seen.iter().all(|b| b == "here"),
        "only the local endpoint: {seen:?}"
    );
    // Every chain reads back from iptables-save exactly as written, so
    // resyncs find nothing to change.
    let typed_svc: Service = serde_json::from_value(svcs.get("web").await.unwrap()).unwrap();
    let typed_slice: EndpointSlice =
        serde_json::from_value(slices.get("web-1").await.unwrap()).unwrap();
    let ports = kube_proxy::service_ports(&typed_svc, &[&typed_slice], "n1", "");
    let want = kube_proxy::iptables::desired(&ports, Some("10.244.0.0/16"));
    let saved = kube_proxy::iptables::parse_save_table(&ns.save(), "nat");
    for (chain, rules) in want
        .iter()
        .filter(|(c, _)| c.starts_with("KUBE-EXT-") || c.starts_with("KUBE-SVL-"))
    {
        assert_eq!(
            saved.get(chain),
            Some(rules),
            "{chain} as iptables-save prints it"
        );
    }
    assert!(want.keys().any(|c| c.starts_with("KUBE-EXT-")));
    // The local endpoint moves away: the ClusterIP is dropped here, not sent across.
    slices.replace("web-1", &on_nodes(false)).await.unwrap();
    within(5, "the has-no-local-endpoints drop", || {
        ns.exec(&["iptables-save", "-t", "filter"])
            .contains("default/web:http/TCP has no local endpoints")
            .then_some(())
    })
    .await;
    assert_eq!(ns.get(&url), "", "no answer from the other node's endpoint");

    // A LoadBalancer with the Local policy gets a health check node port,
    // where this node answers whether it has endpoints of the Service.
    let lb = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        )
        .await
        .unwrap();
    let hc = lb["spec"]["healthCheckNodePort"].as_u64().unwrap();
    // Policies where they do not apply are refused with the field named.
    for (spec, message) in [
        (
            json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
            "Service \"bad\" is invalid: spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services",
        ),
        (
            json!({"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}, "ports": [{"port": 80}]}),
            "Service \"bad\" is invalid: spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None",
        ),
        (
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 70000, "ports": [{"port": 80}]}),
            "Service \"bad\" is invalid: spec.healthCheckNodePort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
    ] {
        let err = svcs
            .create(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad"}, "spec": spec}))
            .await
            .unwrap_err();
        let status = err.api().unwrap();
        assert_eq!((status.code, status.message.as_str()), (422, message));
    }
    assert!((30000..=32767).contains(&hc), "{hc}");
    let mut lb_slice = on_nodes(true);
    lb_slice["metadata"] = json!({"name": "lb-1", "labels": {"kubernetes.io/service-name": "lb"}});
    slices.create(&lb_slice).await.unwrap();
    let probe = || async {
        let r = reqwest::get(format!("http://127.0.0.1:{hc}/")).await.ok()?;
        Some((r.status().as_u16(), r.json::<Value>().await.ok()?))
    };
    let answered = minik8s_testkit::until(10, "the health check port answers 200", || async {
        match probe().await {
            Some((200, body)) => Ok(body),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(
        answered,
        json!({"service": {"namespace": "default", "name": "lb"}, "localEndpoints": 1, "serviceProxyHealthy": true})
    );
    lb_slice["endpoints"][0]["nodeName"] = json!("n3");
    slices.replace("lb-1", &lb_slice).await.unwrap();
    minik8s_testkit::until(10, "503 once no endpoint is here", || async {
        match probe().await {
            Some((503, body)) if body["localEndpoints"] == 0 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    proxy.abort();
}

/// kube-proxy with `parts` and a DNS server for `domain` on a port it really
/// got, once it answers (any answer, even SERVFAIL: it is serving). A port
/// chosen free can be taken (by another test's UDP socket) before the server
/// binds it, and then kube-proxy ends at once with the bind error: choose
/// again then. The first answer waits for the informers' first lists, which
/// took over 10 s once on a loaded 2-core CI machine: allow 60.
async fn serve_dns(
    client: &Client,
    domain: &str,
    upstreams: Vec<std::net::SocketAddr>,
    proxy: Option<proxier::Config>,
) -> (
    std::net::SocketAddr,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    for _ in 0..5 {
        let listen: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let cfg = kube_proxy::dns::Config {
            listen,
            domain: domain.into(),
            upstreams: upstreams.clone(),
        };
        let parts = kube_proxy::Parts {
            proxy: proxy.clone(),
            dns: Some(cfg),
            ingress: None,
        };
        let task = tokio::spawn(kube_proxy::run(client.clone(), parts));
        let probe = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut req = hickory_proto::op::Message::query();
        req.add_query(hickory_proto::op::Query::query(
            hickory_proto::rr::Name::from_ascii(format!("probe.{domain}.")).unwrap(),
            hickory_proto::rr::RecordType::A,
        ));
        let mut buf = vec![0u8; 512];
        for _ in 0..300 {
            if task.is_finished() {
                break;
            }
            probe.send_to(&req.to_vec().unwrap(), listen).await.unwrap();
            let answer = tokio::time::timeout(Duration::from_millis(200), probe.recv(&mut buf));
            if answer.await.is_ok() {
                return (listen, task);
            }
        }
        if !task.is_finished() {
            panic!("the DNS for {domain} on {listen} does not answer within 60 s");
        }
        let ended = task.await.unwrap();
        eprintln!("kube-proxy with a DNS on {listen} ended ({ended:?}): choosing another port");
    }
    panic!("no port for the DNS for {domain} after 5 tries");
}

/// Asks `server` for the A records of `name` over UDP: (rcode, addresses).
async fn ask(server: std::net::SocketAddr, name: &str) -> (String, Vec<String>) {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let mut req = Message::query();
    req.metadata.id = 7;
    req.metadata.recursion_desired = true;
    req.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut buf = vec![0u8; 4096];
    // UDP: a lost query is asked again, as resolvers do.
    let mut n = None;
    for _ in 0..60 {
        sock.send_to(&req.to_vec().unwrap(), server).await.unwrap();
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(500), sock.recv(&mut buf)).await {
            n = Some(r.unwrap());
            break;
        }
    }
    let n = n.expect("the DNS server answers within 30 s");
    let resp = Message::from_vec(&buf[..n]).unwrap();
    let ips = resp
        .answers
        .iter()
        .map(|r| match &r.data {
            RData::A(a) => a.0.to_string(),
            other => other.to_string(),
        })
        .collect();
    (resp.metadata.response_code.to_string(), ips)
}

/// The cluster DNS answers from the apiserver's Services and EndpointSlices,
/// follows their changes, and forwards other names upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_dns_names_services_and_pods() {
    let ns = Netns::new();
    let (_server, client, svcs, slices) = apiserver().await;
    let web = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]}}),
        )
        .await
        .unwrap();
    let vip = web["spec"]["clusterIP"].as_str().unwrap().to_string();
    svcs.create(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lws"},
        "spec": {"clusterIP": "None", "selector": {"app": "x"}}}),
    )
    .await
    .unwrap();
    slices
        .create(&json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "lws-0", "labels": {"kubernetes.io/service-name": "lws"}},
            "addressType": "IPv4", "endpoints": [
                {"addresses": ["10.244.1.5"], "hostname": "lws-0", "conditions": {"ready": true}},
                {"addresses": ["10.244.2.6"], "hostname": "lws-0-1", "conditions": {"ready": true}}]}))
        .await
        .unwrap();

    // An upstream for other names: a second server of ours, answering its own zone.
    let outside = TestServer::start(Backend::Embedded).await;
    let outside_client = Client::new(&outside.url);
    outside_client
        .dynamic(registry::of::<Service>(), Some("default"))
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
            "spec": {"ports": [{"port": 5432}]}}),
        )
        .await
        .unwrap();
    let iptables = || proxier::Config {
        iptables: Iptables {
            netns: Some(ns.path()),
        },
        ..Default::default()
    };
    let (upstream, _upstream_task) =
        serve_dns(&outside_client, "example.org", Vec::new(), None).await;

    let (listen, _dns_task) =
        serve_dns(&client, "cluster.local", vec![upstream], Some(iptables())).await;

    // The server binds at once and answers once the caches are synced.
    let (code, ips) = ask(listen, "web.default.svc.cluster.local.").await;
    assert_eq!((code.as_str(), ips), ("No Error", vec![vip.clone()]));
    assert_eq!(
        ask(listen, "lws.default.svc.cluster.local.").await.1,
        vec!["10.244.1.5", "10.244.2.6"],
        "headless: the ready endpoints"
    );
    assert_eq!(
        ask(listen, "lws-0-1.lws.default.svc.cluster.local.")
            .await
            .1,
        vec!["10.244.2.6"],
        "a pod by hostname.subdomain"
    );
    assert_eq!(
        ask(listen, "10-244-9-9.default.pod.cluster.local.").await.1,
        vec!["10.244.9.9"]
    );
    assert_eq!(
        ask(listen, "nope.default.svc.cluster.local.").await.0,
        "Non-Existent Domain"
    );
    // Forwarded: the upstream knows db.default.svc.example.org (once its own
    // caches have synced: until then it answers SERVFAIL, as ours does).
    let every = Duration::from_millis(100);
    minik8s_testkit::poll(20, every, "the forwarded name", || async {
        let db = ask(listen, "db.default.svc.example.org.").await;
        (db.0 == "No Error" && db.1.len() == 1)
            .then_some(())
            .ok_or_else(|| format!("{db:?}"))
    })
    .await;

    // Changes show at once: a new service, a deleted one.
    let api = svcs
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"},
            "spec": {"ports": [{"port": 443}]}}),
        )
        .await
        .unwrap();
    let api_ip = api["spec"]["clusterIP"].as_str().unwrap().to_string();
    answers_within(listen, "api.default.svc.cluster.local.", vec![api_ip]).await;
    svcs.delete("web", &Default::default()).await.unwrap();
    answers_within(listen, "web.default.svc.cluster.local.", vec![]).await;
    assert_eq!(
        ask(listen, "web.default.svc.cluster.local.").await.0,
        "Non-Existent Domain"
    );
}

async fn answers_within(server: std::net::SocketAddr, name: &str, want: Vec<String>) {
    let every = Duration::from_millis(50);
    minik8s_testkit::poll(2, every, name, || async {
        let (_, got) = ask(server, name).await;
        (got == want)
            .then_some(())
            .ok_or_else(|| format!("{got:?}, want {want:?}"))
    })
    .await
}

fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
