//! kubectl's imperative commands, which send protobuf bodies and ask for
//! protobuf answers first: the real kubectl v1.32 against a cluster of hollow
//! nodes (real kubelets on the fake runtime) with every controller.

mod common;

use common::{cluster, kubectl, kubectl_json, kubectl_ok, until};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn imperative_create_commands_work_over_protobuf() {
    let (server, _client) = cluster("imp", 2).await;
    let url = server.url.as_str();

    assert!(kubectl_ok(url, &["create", "namespace", "lab"]).contains("namespace/lab created"));
    let ns = ["-n", "lab"];
    let with_ns = |args: &[&str]| -> Vec<String> {
        // Before the command: args after `--` belong to the container.
        ns.iter()
            .chain(args.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: &[&str]| {
        let args = with_ns(args);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl_ok(url, &refs)
    };

    // ConfigMap and Secret: map values, empty ones included; Secret bytes.
    run(&[
        "create",
        "configmap",
        "app-config",
        "--from-literal=color=blue",
        "--from-literal=empty=",
    ]);
    let cm = kubectl_json(url, &["configmap", "app-config", "-n", "lab"]);
    assert_eq!(
        cm["data"],
        serde_json::json!({"color": "blue", "empty": ""})
    );
    run(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=hunter2",
    ]);
    let secret = kubectl_json(url, &["secret", "creds", "-n", "lab"]);
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
    assert_eq!(secret["type"], "Opaque");
    run(&[
        "create",
        "secret",
        "docker-registry",
        "pull",
        "--docker-server=registry.lab:5000",
        "--docker-username=u",
        "--docker-password=p",
    ]);
    let pull = kubectl_json(url, &["secret", "pull", "-n", "lab"]);
    assert_eq!(pull["type"], "kubernetes.io/dockerconfigjson");
    // --from-file, and a TLS Secret from a certificate and its key.
    let files = tempfile::tempdir().unwrap();
    let props = files.path().join("app.properties");
    std::fs::write(&props, "color=blue\n").unwrap();
    run(&[
        "create",
        "configmap",
        "props",
        &format!("--from-file={}", props.display()),
    ]);
    let props = kubectl_json(url, &["configmap", "props", "-n", "lab"]);
    assert_eq!(props["data"]["app.properties"], "color=blue\n");
    let (cert, key) = (files.path().join("tls.crt"), files.path().join("tls.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=web.lab",
        ])
        .args(["-days", "1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is required for this test (scripts/test.sh installs it)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    run(&[
        "create",
        "secret",
        "tls",
        "web-tls",
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ]);
    let tls = kubectl_json(url, &["secret", "web-tls", "-n", "lab"]);
    assert_eq!(tls["type"], "kubernetes.io/tls");
    assert!(tls["data"]["tls.crt"].is_string() && tls["data"]["tls.key"].is_string());

    // A Deployment that runs, and one with replicas 0 (a pointer: 0 stays 0).
    let out = run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
        "--port=80",
    ]);
    assert!(out.contains("deployment.apps/web created"), "{out}");
    run(&[
        "create",
        "deployment",
        "idle",
        "--image=nginx",
        "--replicas=0",
    ]);
    until("web to have 3 available replicas", 60, || async {
        let d = kubectl_json(url, &["deployment", "web", "-n", "lab"]);
        (d["status"]["availableReplicas"] == 3)
            .then_some(())
            .ok_or(d["status"].to_string())
    })
    .await;
    let idle = kubectl_json(url, &["deployment", "idle", "-n", "lab"]);
    assert_eq!(idle["spec"]["replicas"], 0, "{idle}");
    // Defaults the server fills, as for a JSON body.
    let web = kubectl_json(url, &["deployment", "web", "-n", "lab"]);
    assert_eq!(web["spec"]["strategy"]["type"], "RollingUpdate");
    let container = &web["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(web["spec"]["template"]["spec"]["restartPolicy"], "Always");

    // Services: create and expose.
    run(&["create", "service", "clusterip", "front", "--tcp=80:8080"]);
    let front = kubectl_json(url, &["service", "front", "-n", "lab"]);
    assert_eq!(front["spec"]["ports"][0]["targetPort"], 8080);
    assert!(
        front["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.contains('.')),
        "{front}"
    );
    run(&[
        "expose",
        "deployment",
        "web",
        "--port=8080",
        "--target-port=80",
        "--name=web-svc",
    ]);
    let exposed = kubectl_json(url, &["service", "web-svc", "-n", "lab"]);
    assert_eq!(exposed["spec"]["selector"]["app"], "web");
    run(&["create", "service", "nodeport", "edge", "--tcp=80:80"]);
    let edge = kubectl_json(url, &["service", "edge", "-n", "lab"]);
    assert!(
        edge["spec"]["ports"][0]["nodePort"]
            .as_i64()
            .is_some_and(|p| p >= 30000),
        "{edge}"
    );

    // ServiceAccount, a bare pod, Jobs and a CronJob.
    run(&["create", "serviceaccount", "robot"]);
    kubectl_json(url, &["serviceaccount", "robot", "-n", "lab"]);
    // RBAC objects (stored and listed; enforcement is the security issue's).
    run(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
    ]);
    run(&[
        "create",
        "rolebinding",
        "robot-reads",
        "--role=pod-reader",
        "--serviceaccount=lab:robot",
    ]);
    let binding = kubectl_json(url, &["rolebinding", "robot-reads", "-n", "lab"]);
    assert_eq!(binding["roleRef"]["name"], "pod-reader");
    assert_eq!(binding["subjects"][0]["name"], "robot");
    let role = kubectl_json(url, &["role", "pod-reader", "-n", "lab"]);
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "list"])
    );
    let wide = run(&["get", "rolebindings", "-o", "wide"]);
    assert!(
        wide.contains("Role/pod-reader") && wide.contains("lab/robot"),
        "{wide}"
    );
    run(&[
        "run",
        "one",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sleep",
        "3600",
    ]);
    let one = kubectl_json(url, &["pod", "one", "-n", "lab"]);
    assert_eq!(one["spec"]["restartPolicy"], "Never");
    assert_eq!(
        one["spec"]["containers"][0]["args"],
        serde_json::json!(["sleep", "3600"])
    );
    run(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ]);
    let job = kubectl_json(url, &["job", "once", "-n", "lab"]);
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    run(&[
        "create",
        "cronjob",
        "tick",
        "--image=busybox",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ]);
    let out = run(&["create", "job", "manual", "--from=cronjob/tick"]);
    assert!(out.contains("job.batch/manual created"), "{out}");
    let manual = kubectl_json(url, &["job", "manual", "-n", "lab"]);
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(manual["metadata"]["ownerReferences"][0]["kind"], "CronJob");

    // Changes through the typed clients: set, label, annotate, scale.
    run(&["set", "image", "deployment/web", "nginx=nginx:1.27"]);
    run(&["set", "env", "deployment/web", "MODE=fast"]);
    run(&[
        "set",
        "resources",
        "deployment/web",
        "--limits=cpu=200m,memory=64Mi",
    ]);
    let web = kubectl_json(url, &["deployment", "web", "-n", "lab"]);
    let container = &web["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.27");
    assert_eq!(container["env"][0]["value"], "fast");
    assert_eq!(container["resources"]["limits"]["cpu"], "200m");
    run(&["label", "deployment", "web", "tier=front"]);
    run(&["annotate", "deployment", "web", "owner=class"]);
    run(&["scale", "deployment", "web", "--replicas=1"]);
    let web = kubectl_json(url, &["deployment", "web", "-n", "lab"]);
    assert_eq!(web["metadata"]["labels"]["tier"], "front");
    assert_eq!(web["metadata"]["annotations"]["owner"], "class");
    assert_eq!(web["spec"]["replicas"], 1);

    // kubectl autoscale posts an autoscaling/v1 HPA; it is stored as v2.
    let out = run(&[
        "autoscale",
        "deployment",
        "web",
        "--min=2",
        "--max=5",
        "--cpu-percent=80",
    ]);
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{out}"
    );
    let hpa = kubectl_json(url, &["hpa", "web", "-n", "lab"]);
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    let v1_path = "/apis/autoscaling/v1/namespaces/lab/horizontalpodautoscalers/web";
    let v1: Value = serde_json::from_str(&kubectl_ok(url, &["get", "--raw", v1_path])).unwrap();
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
    assert_eq!(v1["spec"]["minReplicas"], 2);
    run(&[
        "patch",
        "hpa.v1.autoscaling",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"maxReplicas":7}}"#,
    ]);
    let hpa = kubectl_json(url, &["hpa", "web", "-n", "lab"]);
    assert_eq!(hpa["spec"]["maxReplicas"], 7);
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    let (listed, out) = kubectl(url, &["get", "hpa.v1.autoscaling", "-n", "lab"]);
    assert!(listed && out.contains("web"), "{out}");

    // Events print as Kubernetes prints them: no NAME but with -o wide, last.
    let (_, events) = kubectl(url, &["get", "events", "-n", "lab"]);
    assert_eq!(
        common::table_line(&events, 0),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{events}"
    );
    assert!(
        events.contains("Scheduled") && events.contains("pod/web-"),
        "{events}"
    );
    let (_, wide) = kubectl(url, &["get", "events", "-n", "lab", "-o", "wide"]);
    assert_eq!(common::table_line(&wide, 0).last(), Some(&"NAME"), "{wide}");
    let (ok, out) = kubectl(url, &["events", "-n", "lab"]);
    assert!(ok && out.contains("Scheduled"), "kubectl events: {out}");

    // kubectl proxy: a local port that forwards to the API.
    let mut proxy = std::process::Command::new(minik8s_testkit::real_kubectl())
        .args(["--server", url, "proxy", "--port=0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(proxy.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let local = first
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    let through: Value = reqwest::get(format!(
        "http://{local}/api/v1/namespaces/lab/configmaps/app-config"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert_eq!(through["data"]["color"], "blue", "{first}: {through}");

    // `-o yaml` of a dry run goes nowhere; a server dry run stores nothing.
    let out = run(&[
        "create",
        "deployment",
        "ghost",
        "--image=nginx",
        "--dry-run=server",
        "-o",
        "yaml",
    ]);
    assert!(
        out.contains("type: RollingUpdate"),
        "the server's defaults: {out}"
    );
    let (found, _) = kubectl(url, &["get", "deployment", "ghost", "-n", "lab"]);
    assert!(!found, "a server-side dry run stored the object");
    let (created, out) = kubectl(
        url,
        &[
            "create",
            "deployment",
            "web",
            "--image=x",
            "--dry-run=server",
            "-n",
            "lab",
        ],
    );
    assert!(!created && out.contains("already exists"), "{out}");
    run(&["delete", "deployment", "idle", "--dry-run=server"]);
    run(&[
        "scale",
        "deployment",
        "web",
        "--replicas=4",
        "--dry-run=server",
    ]);
    run(&[
        "set",
        "image",
        "deployment/web",
        "nginx=nginx:9",
        "--dry-run=server",
    ]);
    let web = kubectl_json(url, &["deployment", "web", "-n", "lab"]);
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        web["spec"]["replicas"], 1,
        "scale --dry-run=server changed replicas"
    );
    kubectl_json(url, &["deployment", "idle", "-n", "lab"]);
}

/// Raw protobuf on the wire: answers are protobuf when asked first, a
/// malformed body is a 400 that stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_answers_and_bad_bodies() {
    let (server, _client) = cluster("pbw", 0).await;
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/namespaces", server.url);
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wire"}});
    let body = minik8s_wire::protobuf::encode_object(&ns).unwrap().unwrap();
    let resp = http
        .post(&url)
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let created = minik8s_wire::protobuf::decode_object(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(created["metadata"]["name"], "wire");
    assert!(created["metadata"]["uid"].as_str().is_some(), "{created}");
    assert_eq!(created["status"]["phase"], "Active");

    // A 404 is a protobuf Status too.
    let resp = http
        .get(format!("{url}/nowhere"))
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let status = minik8s_wire::protobuf::decode_object(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);

    // Truncated: 400 and nothing stored.
    let mut cut = minik8s_wire::protobuf::encode_object(
        &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "half"}}),
    )
    .unwrap()
    .unwrap();
    cut.truncate(cut.len() - 3);
    let resp = http
        .post(&url)
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(cut)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let status: Value = resp.json().await.unwrap();
    assert!(
        status["message"].as_str().unwrap().contains("protobuf"),
        "{status}"
    );
    let resp = http.get(format!("{url}/half")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
}
