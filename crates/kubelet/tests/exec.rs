//! `kubectl exec` end to end: the real kubectl v1.32 (WebSocket
//! `v5.channel.k8s.io`, and SPDY/3.1 when told to fall back) and the
//! official Python client (`v4.channel.k8s.io`)
//! through the apiserver to the kubelet and Docker: output, piped stdin, a
//! terminal, exit codes, several containers, `kubectl cp` both ways,
//! `kubectl run -i --rm` (attach), `kubectl logs` with its flags (-f, -l,
//! --all-containers, --timestamps, --tail, --since, --limit-bytes, -f through
//! a restart), `kubectl attach` on its own, the
//! Python client's port-forward to a listener on the pod's localhost,
//! `kubectl debug` (an ephemeral container in the target's PID namespace), and
//! refusals with Kubernetes' messages.

mod common;

use common::*;
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs the real kubectl until its output contains `wanted` (30 s at most).
async fn poll_kubectl(c: &Cluster, args: &[&str], wanted: &str) -> String {
    minik8s_testkit::poll(
        30,
        std::time::Duration::from_millis(300),
        wanted,
        || async {
            let out = c.real_kubectl(args);
            let (stdout, stderr) = text(&out);
            if stdout.contains(wanted) {
                Ok(stdout)
            } else {
                Err(format!("{stdout} {stderr}"))
            }
        },
    )
    .await
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_through_the_apiserver_to_docker() {
    let c = Cluster::start().await;
    let sleeper = |name: &str| {
        json!({"name": name, "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
               // Says it started, then ticks on stdout (for `kubectl logs`).
               "command": ["sh", "-c", format!("echo {name} started; echo {name} > /tmp/who; \
                   i=0; while true; do i=$((i+1)); echo {name} tick $i; sleep 0.2; done")]})
    };
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "shell", "labels": {"app": "shell"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [sleeper("main"), sleeper("side"),
            // Listens on the pod's localhost only: port-forward must reach it from inside.
            {"name": "web", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
             "command": ["sh", "-c", "mkdir /www; echo hello from web > /www/index.html; httpd -f -p 127.0.0.1:8080 -h /www"]}]}}))
        .await;
    c.wait_pod("shell", "Running", 60, |p| {
        phase(p) == "Running" && all_ready(p)
    })
    .await;

    // Plain output, and the container chosen with -c.
    let out = c.real_kubectl(&[
        "exec", "shell", "-c", "main", "--", "echo", "hello", "world",
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(text(&out).0, "hello world\n");
    let out = c.real_kubectl(&["exec", "shell", "-c", "side", "--", "cat", "/tmp/who"]);
    assert_eq!(text(&out).0, "side\n", "{:?}", text(&out));

    // stderr apart from stdout; the exit code becomes kubectl's.
    let out = c.real_kubectl(&[
        "exec",
        "shell",
        "-c",
        "main",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout} {stderr}");
    assert_eq!(stdout, "out\n");
    assert!(stderr.contains("err"), "{stderr}");

    // Piped stdin (-i): kubectl closes it at EOF (v5) and cat ends.
    let mut child = Command::new(minik8s_testkit::real_kubectl())
        .args([
            "--server",
            &c.server.url,
            "exec",
            "-i",
            "shell",
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            "cat | tr a-z A-Z",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"piped in\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(text(&out).0, "PIPED IN\n");

    // A terminal (-it) under a pty: the process sees a tty.
    let kubeconfig = c.root.path().join("kubeconfig");
    let _ = c.real_kubectl(&["version", "--client"]); // writes the kubeconfig
    let script = format!(
        "{kubectl} --kubeconfig {} exec -it shell -c main -- sh -c 'tty; stty size'",
        kubeconfig.display(),
        kubectl = minik8s_testkit::real_kubectl().display()
    );
    let out = Command::new("script")
        .args(["-qec", &script, "/dev/null"])
        .env("HOME", c.root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("/dev/pts/"), "no tty: {stdout} {stderr}");

    // The same over SPDY/3.1, kubectl's fallback (forced here as kubectl allows).
    let spdy = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(minik8s_testkit::real_kubectl())
            .args(["--server", &c.server.url])
            .args(args)
            .env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = spdy(
        &[
            "-v=8",
            "exec",
            "shell",
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        b"",
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "SPDY: {stdout} {stderr}");
    assert_eq!(stdout, "out\n");
    assert!(stderr.contains("err"), "{stderr}");
    assert!(
        stderr.contains("Upgrade: SPDY/3.1"),
        "not over SPDY: {stderr}"
    );
    let out = spdy(
        &[
            "exec",
            "-i",
            "shell",
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            "cat | tr a-z A-Z",
        ],
        b"over spdy\n",
    );
    assert_eq!(text(&out).0, "OVER SPDY\n", "{:?}", text(&out));
    let script = format!(
        "KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false {kubectl} --kubeconfig {} exec -it shell -c main -- sh -c 'tty; stty size'",
        kubeconfig.display(),
        kubectl = minik8s_testkit::real_kubectl().display()
    );
    let out = Command::new("script")
        .args(["-qec", &script, "/dev/null"])
        .env("HOME", c.root.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("/dev/pts/"),
        "SPDY, no tty: {stdout} {stderr}"
    );

    // kubectl cp both ways (tar over exec; busybox has tar).
    let local = c.root.path().join("notes.txt");
    std::fs::write(&local, "copied in\n").unwrap();
    let dest = "shell:/tmp/notes.txt";
    let out = c.real_kubectl(&["cp", local.to_str().unwrap(), dest, "-c", "main"]);
    assert!(out.status.success(), "cp in: {:?}", text(&out));
    let out = c.real_kubectl(&["exec", "shell", "-c", "main", "--", "cat", "/tmp/notes.txt"]);
    assert_eq!(text(&out).0, "copied in\n");
    let back = c.root.path().join("who.txt");
    let out = c.real_kubectl(&["cp", "shell:/tmp/who", back.to_str().unwrap(), "-c", "side"]);
    assert!(out.status.success(), "cp out: {:?}", text(&out));
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "side\n");

    // kubectl debug --copy-to reads and creates the pod in protobuf: the
    // copy keeps its projected ConfigMap volume's name (Go's embedded
    // LocalObjectReference) and runs.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"greeting": "from the config"}});
    let f = c.root.path().join("cfg.json");
    std::fs::write(&f, cm.to_string()).unwrap();
    let out = c.real_kubectl(&["create", "-f", f.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "projected"},
        "spec": {"terminationGracePeriodSeconds": 0,
            "volumes": [{"name": "cfg", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}],
            "containers": [{"name": "main", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                "command": ["sh", "-c", "cat /cfg/greeting; echo; sleep 3600"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}]}}))
        .await;
    c.wait_pod("projected", "Running", 60, |p| phase(p) == "Running")
        .await;
    let out = c.real_kubectl(&[
        "debug",
        "projected",
        "--copy-to=projected-copy",
        "--same-node",
        "--container=main",
        "--",
        "sh",
        "-c",
        "echo copy; cat /cfg/greeting; echo; sleep 3600",
    ]);
    assert!(
        out.status.success(),
        "kubectl debug --copy-to: {:?}",
        text(&out)
    );
    let copy = c
        .wait_pod("projected-copy", "Running", 60, |p| phase(p) == "Running")
        .await;
    assert_eq!(
        copy["spec"]["volumes"][0]["projected"]["sources"][0]["configMap"]["name"],
        "cfg"
    );
    let log = minik8s_testkit::poll(
        30,
        std::time::Duration::from_millis(200),
        "the copy's log",
        || async {
            let log = c.pod_log("projected-copy/log").await;
            if log.contains("from the config") {
                Ok(log)
            } else {
                Err(log)
            }
        },
    )
    .await;
    assert!(log.starts_with("copy\n"), "{log}");

    // kubectl run -i --rm: create, wait for Running, attach with stdin, delete.
    c.spawn_scheduler();
    let mut child = Command::new(minik8s_testkit::real_kubectl())
        .args([
            "--server",
            &c.server.url,
            "run",
            "greeter",
            "-i",
            "--rm",
            "--restart=Never",
            "--image=minik8s/busybox:latest",
            "--image-pull-policy=Never",
            "--",
            "sh",
            "-c",
            "read x; echo got $x",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("got hello"), "{stdout} {stderr}");
    assert!(
        stdout.contains("pod \"greeter\" deleted"),
        "{stdout} {stderr}"
    );

    // kubectl debug: an ephemeral container joins the running pod and sees
    // its target's processes (one PID namespace), not the other containers'.
    let out = c.real_kubectl(&[
        "debug",
        "shell",
        "--image=minik8s/busybox:latest",
        "--image-pull-policy=Never",
        "--target=main",
        "--container=dbg",
        "--",
        "sh",
        "-c",
        "ps -o args; sleep 60",
    ]);
    assert!(out.status.success(), "debug: {:?}", text(&out));
    c.wait_pod("shell", "the debug container running", 60, |p| {
        p.pointer("/status/ephemeralContainerStatuses/0/state/running")
            .is_some()
    })
    .await;
    let ps = poll_kubectl(&c, &["logs", "shell", "-c", "dbg"], "main started").await;
    assert!(!ps.contains("side started"), "{ps}");
    // -i: kubectl waits for the container, then attaches to its stdin.
    let mut child = Command::new(minik8s_testkit::real_kubectl())
        .args([
            "--server",
            &c.server.url,
            "debug",
            "-i",
            "shell",
            "--image=minik8s/busybox:latest",
            "--image-pull-policy=Never",
            "--container=dbg2",
            "--",
            "sh",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo from the debugger\nexit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("from the debugger"), "{stdout} {stderr}");
    // Ephemeral containers cannot have ports (422), nor be added to the pod itself.
    let bad = c
        .pods()
        .patch(
            "shell",
            Some("ephemeralcontainers"),
            minik8s_client::rest::content::STRATEGIC_MERGE_PATCH,
            &json!({"spec": {"ephemeralContainers": [{"name": "bad", "image": "minik8s/busybox:latest",
                                                      "ports": [{"containerPort": 80}]}]}}),
        )
        .await
        .unwrap_err();
    assert!(
        bad.to_string().contains(
            "spec.ephemeralContainers[2].ports: Forbidden: cannot be set for an Ephemeral Container"
        ),
        "{bad}"
    );

    // kubectl port-forward (SPDY/3.1 after kubectl's WebSocket tunnel is
    // refused): to the pod, and to a Service resolved to it; 20 parallel requests.
    let services = c.client.dynamic(
        minik8s_api::registry::of::<k8s_openapi::api::core::v1::Service>(),
        Some("default"),
    );
    services
        .create(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "shell"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        )
        .await
        .unwrap();
    for target in ["pod/shell", "svc/web"] {
        let remote = if target == "svc/web" { ":80" } else { ":8080" };
        let mut pf = Command::new(minik8s_testkit::real_kubectl())
            .args(["--server", &c.server.url, "port-forward", target, remote])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(pf.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        // kubectl prints a line per connection: keep its stdout open (a Go
        // program writing to a closed pipe dies of SIGPIPE).
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        // "Forwarding from 127.0.0.1:PORT -> 8080"
        let local = first
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("kubectl port-forward said: {first}"))
            .to_string();
        let http = reqwest::Client::new();
        let gets = (0..20).map(|_| {
            let http = http.clone();
            let url = format!("http://{local}/index.html");
            async move { http.get(&url).send().await?.text().await }
        });
        let bodies = futures::future::join_all(gets).await;
        let _ = pf.kill();
        let out = pf.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        for body in bodies {
            let body = body.unwrap_or_else(|e| panic!("through {target}: {e}; kubectl: {stderr}"));
            assert_eq!(body, "hello from web\n", "through {target}");
        }
        assert!(!stderr.contains("error"), "{target}: {stderr}");
    }

    // kubectl logs: a container, all of them, by label, timestamps, tail, bytes, follow.
    let logs = |args: &[&str]| {
        let mut all = vec!["logs"];
        all.extend_from_slice(args);
        let out = c.real_kubectl(&all);
        assert!(out.status.success(), "kubectl {all:?}: {:?}", text(&out));
        text(&out).0
    };
    assert!(logs(&["shell", "-c", "main"]).starts_with("main started\n"));
    let every = logs(&["shell", "--all-containers"]);
    assert!(
        every.contains("main started") && every.contains("side started"),
        "{every}"
    );
    // With a selector kubectl asks for the last 10 lines unless told otherwise.
    let selected = logs(&["-l", "app=shell", "-c", "side"]);
    assert_eq!(selected.lines().count(), 10, "{selected}");
    assert!(
        selected.lines().all(|l| l.starts_with("side tick")),
        "{selected}"
    );
    assert!(logs(&["-l", "app=shell", "-c", "side", "--tail=-1"]).contains("side started"));
    let stamped = logs(&["shell", "-c", "main", "--timestamps", "--tail=1"]);
    assert_eq!(stamped.lines().count(), 1, "{stamped}");
    let (stamp, line) = stamped.trim().split_once(' ').unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
        "{stamped}"
    );
    assert!(line.starts_with("main tick "), "{stamped}");
    assert_eq!(logs(&["shell", "-c", "main", "--limit-bytes=4"]), "main");
    let recent = logs(&["shell", "-c", "main", "--since=1s"]);
    assert!(!recent.contains("main started"), "--since=1s: {recent}");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let since_time = format!("--since-time={now}");
    let recent = logs(&["shell", "-c", "main", &since_time]);
    assert!(!recent.contains("main started"), "{since_time}: {recent}");
    let mut follow = Command::new(minik8s_testkit::real_kubectl())
        .args([
            "--server",
            &c.server.url,
            "logs",
            "-f",
            "shell",
            "-c",
            "side",
            "--tail=1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(follow.stdout.take().unwrap()));
    let tick = |l: String| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
    let first = tick(lines.next().unwrap().unwrap());
    let later = tick(lines.nth(4).unwrap().unwrap());
    let _ = follow.kill();
    let _ = follow.wait();
    assert_eq!(
        later,
        first + 5,
        "-f keeps delivering lines written after it started"
    );

    // -f stays on through a restart: each life of the container counts itself
    // in an emptyDir, and the followed log shows the second life too.
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lives"},
        "spec": {"terminationGracePeriodSeconds": 0, "volumes": [{"name": "d", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never",
                "volumeMounts": [{"name": "d", "mountPath": "/d"}],
                "command": ["sh", "-c", "n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n; \
                    echo life $n; sleep 2; exit 1"]}]}}))
        .await;
    c.wait_pod("lives", "Running", 60, |p| phase(p) == "Running")
        .await;
    let mut follow = Command::new(minik8s_testkit::real_kubectl())
        .args(["--server", &c.server.url, "logs", "-f", "lives"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l| l == "life 2") {
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("logs -f did not go on into the next life: {seen:?}"),
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();

    // kubectl attach on its own: the output of a container's own process,
    // and its stdin (the process ends on "bye", and so does the attach).
    c.create_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker"},
        "spec": {"terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "minik8s/busybox:latest", "imagePullPolicy": "Never", "stdin": true,
                "command": ["sh", "-c", "while read l; do echo heard $l; [ \"$l\" = bye ] && exit 0; done"]}]}}))
        .await;
    c.wait_pod("talker", "Running", 60, |p| phase(p) == "Running")
        .await;
    let mut child = Command::new(minik8s_testkit::real_kubectl())
        .args(["--server", &c.server.url, "attach", "-i", "talker"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\nbye\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("heard hello\nheard bye"),
        "{stdout} {stderr}"
    );

    // Refusals, as Kubernetes words them.
    let out = c.real_kubectl(&["exec", "nope", "--", "true"]);
    assert!(
        text(&out).1.contains("pods \"nope\" not found"),
        "{:?}",
        text(&out)
    );
    let out = c.real_kubectl(&["exec", "shell", "-c", "zz", "--", "true"]);
    assert!(
        text(&out)
            .1
            .contains("container zz is not valid for pod shell"),
        "{:?}",
        text(&out)
    );
    let out = c.real_kubectl(&["exec", "shell", "--", "true"]);
    assert!(
        text(&out).1.contains("a container name must be specified") || out.status.success(),
        "kubectl picks the default container or the server asks for one: {:?}",
        text(&out)
    );
    let plain = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/namespaces/default/pods/shell/exec?command=true&stdout=1&container=main",
            c.server.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 400, "an exec without an upgrade");
    let status: serde_json::Value = plain.json().await.unwrap();
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Upgrade request required"),
        "{status}"
    );

    // The official Python client: stream() over v4.channel.k8s.io, stdin and returncode.
    let py = r#"
import sys
from kubernetes import client
from kubernetes.stream import stream
cfg = client.Configuration(); cfg.host = sys.argv[1]
api = client.CoreV1Api(client.ApiClient(cfg))
out = stream(api.connect_get_namespaced_pod_exec, "shell", "default", container="main",
             command=["sh", "-c", "echo from python"], stderr=True, stdin=False, stdout=True, tty=False)
assert out.strip() == "from python", out
print("one-shot ok", flush=True)
resp = stream(api.connect_get_namespaced_pod_exec, "shell", "default", container="main",
              command=["sh", "-c", "read line; echo got:$line; exit 7"], stderr=True, stdin=True,
              stdout=True, tty=False, _preload_content=False)
resp.write_stdin("hello\n")
got = ""
while resp.is_open():
    resp.update(timeout=1)
    got += resp.read_stdout()
resp.close()
assert "got:hello" in got, got
assert resp.returncode == 7, resp.returncode
print("python exec ok", flush=True)
from kubernetes.stream import portforward
for attempt in range(2):
    pf = portforward(api.connect_get_namespaced_pod_portforward, "shell", "default", ports="8080")
    sock = pf.socket(8080)
    sock.setblocking(True)
    sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    assert b"200 OK" in data and b"hello from web" in data, data
    assert pf.error(8080) is None, pf.error(8080)
print("python port-forward ok", flush=True)
# A WebSocket that offers no subprotocol (kr8s' port-forward) gets the
# binary channel framing: each channel's first message is its port.
import websocket
url = sys.argv[1].replace("http", "ws", 1) + "/api/v1/namespaces/default/pods/shell/portforward?ports=8080"
ws = websocket.create_connection(url, timeout=10)
assert not ws.getsubprotocol(), ws.getsubprotocol()
ws.send_binary(b"\x00GET /index.html HTTP/1.0\r\n\r\n")
seen, data = set(), b""
while b"hello from web" not in data:
    frame = ws.recv()
    frame = frame.encode() if isinstance(frame, str) else frame
    if not frame:
        break
    if frame[0] not in seen:
        seen.add(frame[0])
        assert frame[1:] == (8080).to_bytes(2, "little"), frame
        continue
    if frame[0] == 0:
        data += frame[1:]
ws.close()
assert b"200 OK" in data and b"hello from web" in data, data
print("websocket without subprotocol ok", flush=True)
# pods/log over a WebSocket (the conformance test's binary.k8s.io), then a close.
url = sys.argv[1].replace("http", "ws", 1) + "/api/v1/namespaces/default/pods/shell/log?container=main&tailLines=3"
ws = websocket.create_connection(url, subprotocols=["binary.k8s.io"], timeout=10)
assert ws.getsubprotocol() == "binary.k8s.io", ws.getsubprotocol()
logs = b""
while True:
    try:
        frame = ws.recv()
    except websocket.WebSocketConnectionClosedException:
        break
    if not frame:
        break
    logs += frame.encode() if isinstance(frame, str) else frame
assert logs.count(b"main tick") == 3, logs
print("logs over websocket ok")
"#;
    let out = Command::new("timeout")
        .args(["60", "python3", "-c", py, &c.server.url])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("python exec ok"), "{stdout} {stderr}");
    assert!(
        stdout.contains("python port-forward ok"),
        "{stdout} {stderr}"
    );
    assert!(
        stdout.contains("websocket without subprotocol ok"),
        "{stdout} {stderr}"
    );
    assert!(
        stdout.contains("logs over websocket ok"),
        "{stdout} {stderr}"
    );
}
