//! doc/web-view.md in a real browser (Debian's headless Chromium, driven
//! by `tests/ui/browser.py` over the DevTools protocol) on the quick
//! start's cluster: the admin and a student sign in with login codes from
//! their own kubeconfigs; the admin sees the quick start's pods on their
//! node and, within 5 s of creating a pod, its journey through the
//! apiserver, the scheduler and the kubelet in that order; the student sees
//! only their namespace. The screenshots are kept in target/ui-screenshots.

use super::doc_command::repo;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const SECURE: &str = "https://127.0.0.1:6443";

fn kubectl(config: &Path, args: &[&str]) -> String {
    let out = Command::new(minik8s_testkit::real_kubectl())
        .arg("--kubeconfig")
        .arg(config)
        .args(args)
        .output()
        .expect("running the real kubectl (1.37)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// doc/web-view.md's sign-in: a login code for the kubeconfig's user.
fn login_url(config: &Path) -> String {
    let answer = kubectl(
        config,
        &["create", "--raw", "/ui/session", "-f", "/dev/null"],
    );
    let login: Value = serde_json::from_str(&answer).expect("the login code as JSON");
    format!(
        "{SECURE}{}",
        login["loginPath"].as_str().expect("loginPath")
    )
}

/// Runs the browser through `steps`; its JSON answer.
fn browse(profile: &Path, steps: &Value) -> Value {
    browse_or(profile, steps, |_| String::new())
}

/// [`browse`], with `why` adding to a failure's message what the cluster
/// says (given the browser's answer).
fn browse_or(profile: &Path, steps: &Value, why: impl Fn(&Value) -> String) -> Value {
    assert!(
        Command::new("chromium")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "Debian's chromium is needed for the web view's test (scripts/test.sh installs it)"
    );
    let mut child = Command::new("python3")
        .arg(repo().join("tests/ui/browser.py"))
        .arg("--profile")
        .arg(profile)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 tests/ui/browser.py");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(steps.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        let answer = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
        panic!(
            "the browser: {text}{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            why(&answer)
        );
    }
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The journey of pod default/`name` as the apiserver keeps it: each step's
/// start and end in seconds after `created` (a Unix time), to tell which
/// component was late when the page was.
fn journey_times(name: &str, created: f64) -> String {
    let out = Command::new("curl")
        .args(["-s", &format!("http://127.0.0.1:8080/ui/api/journey?resource=pods&group=&namespace=default&name={name}")])
        .output()
        .expect("curl");
    let journey: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let Some(steps) = journey["steps"].as_array() else {
        return format!("the journey: {}", String::from_utf8_lossy(&out.stdout));
    };
    let at = |s: &Value, key: &str| s[key].as_f64().unwrap_or(0.0) / 1e9 - created;
    let lines: Vec<String> = steps
        .iter()
        .map(|s| {
            format!(
                "{:>8.3} s .. {:>8.3} s  {} {}",
                at(s, "startUnixNano"),
                at(s, "endUnixNano"),
                s["component"].as_str().unwrap_or("?"),
                s["name"].as_str().unwrap_or("?")
            )
        })
        .collect();
    format!("the journey now, after its create:\n{}", lines.join("\n"))
}

/// A JS expression: the pods the page shows on a node, as "ns/name".
const PODS_ON_NODES: &str =
    "[...document.querySelectorAll('[data-node] [data-pod]')].map(p => p.dataset.pod)";
/// The journey's steps as "component:step", in the page's order.
const STEPS: &str =
    "[...document.querySelectorAll('#steps > li')].map(l => l.dataset.component + ':' + l.dataset.step)";

/// doc/web-view.md's commands, in its order, with a text each answer must
/// contain (the journey's, once the kubelet's steps reached the master).
const DOC_COMMANDS: &[(&str, &[&str])] = &[
    (
        "kubectl create deployment journey --image=minik8s/busybox:latest --replicas=2 -- httpd -f -p 8080",
        &["deployment.apps/journey created"],
    ),
    (
        "kubectl expose deployment journey --port=80 --target-port=8080",
        &["service/journey exposed"],
    ),
    ("kubectl rollout status deploy/journey --timeout=90s", &["successfully rolled out"]),
    ("kubectl create --raw /ui/session -f /dev/null", &["\"loginPath\":\"/ui/login?code="]),
    (
        "curl -s \"http://127.0.0.1:8080/ui/api/journey?resource=deployments&group=apps&namespace=default&name=journey\"",
        &["\"component\":\"controller-manager\"", "\"component\":\"scheduler\"", "\"component\":\"kubelet\"", "\"container started\"", "\"component\":\"kube-proxy\"", "\"name\":\"endpoints\""],
    ),
    (
        "kubectl delete deployment,service journey",
        &["deployment.apps \"journey\" deleted", "service \"journey\" deleted"],
    ),
];

fn doc_commands(admin: &str) {
    let scratch = tempfile::tempdir().unwrap();
    for (command, expect) in DOC_COMMANDS {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let (ok, text) = super::doc_command::run(command, scratch.path(), admin, &[]);
            if ok && expect.iter().all(|e| text.contains(e)) {
                break;
            }
            // Only the journey is waited for: the other commands answer at once.
            assert!(
                command.starts_with("curl") && std::time::Instant::now() < deadline,
                "doc/web-view.md: `{command}` (wanted {expect:?}):\n{text}"
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}

pub fn passes(admin_config: &str) {
    doc_commands(admin_config);
    let admin = Path::new(admin_config);
    let shots = repo().join("target/ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A pod left by an earlier run on the same store is gone before this one's.
    let _ = kubectl(
        admin,
        &[
            "delete",
            "pod",
            "ui-journey",
            "--ignore-not-found",
            "--wait=true",
            "--timeout=60s",
        ],
    );

    // The admin: the quick start's pods on their node, then a new pod's journey.
    let shot = |name: &str| shots.join(name).display().to_string();
    let config = admin.display().to_string();
    let journey_done = "(() => { const s = [...document.querySelectorAll('#steps > li')]; \
        const c = [...new Set(s.map(l => l.dataset.component))]; \
        return c.slice(0, 3).join() === 'apiserver,scheduler,kubelet' && s.some(l => l.dataset.step === 'container'); })()";
    let steps = json!([
        {"open": login_url(admin), "until": "document.querySelector('[data-node] [data-pod=\"default/hello\"]')",
         "screenshot": shot("admin-overview.png")},
        {"eval": PODS_ON_NODES, "as": "pods"},
        // Created when kubectl returns (its own start and discovery are
        // not the cluster's time).
        {"run": format!("{} --kubeconfig {config} run ui-journey --image=minik8s/busybox:latest --image-pull-policy=Never --restart=Never -- sleep 3600",
            minik8s_testkit::real_kubectl().display())},
        {"mark": "created"},
        {"hash": "#journey/pods/default/ui-journey", "until": journey_done, "since": "created", "within": 5,
         "name": "journey", "watch": STEPS, "screenshot": shot("admin-journey.png")},
        {"eval": STEPS, "as": "steps"},
    ]);
    let admin_view = browse_or(&dir.path().join("admin"), &steps, |answer| {
        journey_times(
            "ui-journey",
            answer["marks"]["created"].as_f64().unwrap_or(0.0),
        )
    });
    let pods: Vec<String> = serde_json::from_value(admin_view["values"]["pods"].clone()).unwrap();
    assert!(pods.iter().any(|p| p == "default/hello"), "{pods:?}");
    assert!(
        pods.iter()
            .filter(|p| p.starts_with("default/web-"))
            .count()
            >= 3,
        "the web Deployment's pods on their node: {pods:?}"
    );
    let journey: Vec<String> =
        serde_json::from_value(admin_view["values"]["steps"].clone()).unwrap();
    let first = |c: &str| {
        journey
            .iter()
            .position(|s| s.starts_with(c))
            .unwrap_or(usize::MAX)
    };
    assert!(
        first("apiserver:") < first("scheduler:") && first("scheduler:") < first("kubelet:"),
        "{journey:?}"
    );
    eprintln!(
        "the journey of ui-journey showed in the browser {}s after its create",
        admin_view["elapsed"]["journey"]
    );

    // A student: their namespace only.
    let student = dir.path().join("ui-student.kubeconfig");
    let out = Command::new("bash")
        .arg(repo().join("scripts/add-user.sh"))
        .args(["ui-student", "--out"])
        .arg(&student)
        .output()
        .expect("scripts/add-user.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod = dir.path().join("student-pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mine}\nspec:\n  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - name: main\n    image: minik8s/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, '3600']\n    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}\n",
    )
    .unwrap();
    kubectl(&student, &["apply", "-f", pod.to_str().unwrap()]);
    let steps = json!([
        {"open": login_url(&student), "until": "document.querySelector('[data-pod=\"ui-student/mine\"]')",
         "screenshot": shot("student-overview.png")},
        {"eval": "[...document.querySelectorAll('[data-pod]')].map(p => p.dataset.pod)", "as": "pods"},
        {"eval": "document.getElementById('who').textContent", "as": "who"},
    ]);
    let student_view = browse(&dir.path().join("student"), &steps);
    let pods: Vec<String> = serde_json::from_value(student_view["values"]["pods"].clone()).unwrap();
    assert!(
        !pods.is_empty() && pods.iter().all(|p| p.starts_with("ui-student/")),
        "the student sees their namespace only: {pods:?}"
    );
    let who = student_view["values"]["who"].as_str().unwrap_or("");
    assert!(who.contains("ui-student"), "{who}");

    // The view without credentials: 401.
    let out = Command::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{SECURE}/ui/"),
        ])
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
    kubectl(admin, &["delete", "pod", "ui-journey", "--wait=false"]);
    kubectl(
        admin,
        &["delete", "namespace", "ui-student", "--wait=false"],
    );
}
