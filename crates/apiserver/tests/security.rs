//! The secure port as a class uses it: the real kubectl over TLS with a
//! client certificate and with static tokens, 401 for strangers, a student
//! confined to one namespace by an `edit` RoleBinding, escalation prevention,
//! impersonation, and `kubectl auth can-i` / `whoami`.

mod common;

use common::Kubectl;
use minik8s_testkit::apiserver::{Backend, TestServer};
use minik8s_testkit::free_port;
use serde_json::Value;
use std::time::Duration;

const TOKENS: &str = "alice-token,alice,1001,students\ncarol-token,carol,1003,\"teachers,lab\"\n";

struct Secure {
    server: TestServer,
    https: String,
    ca: String,
}

async fn secure_server() -> Secure {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), TOKENS).unwrap();
    let token_path = tokens.into_temp_path().keep().unwrap();
    let server = TestServer::start_with(Backend::Embedded, |c| {
        c.secure_listen = Some(format!("127.0.0.1:{}", free_port()));
        c.token_auth_file = Some(token_path);
    })
    .await;
    let addr = *server
        .server
        .secure_addr
        .get()
        .expect("secure port listening");
    let ca = std::fs::read_to_string(server.config.data_dir.join("pki/ca.crt")).unwrap();
    Secure {
        https: format!("https://127.0.0.1:{}", addr.port()),
        server,
        ca,
    }
}

impl Secure {
    fn admin(&self) -> Kubectl {
        let conf =
            std::fs::read_to_string(self.server.config.data_dir.join("pki/admin.conf")).unwrap();
        Kubectl::with_kubeconfig(&conf)
    }
    fn with_token(&self, user: &str, token: &str) -> Kubectl {
        Kubectl::with_kubeconfig(&minik8s_pki::token_kubeconfig(
            "minik8s",
            &self.https,
            &self.ca,
            user,
            token,
        ))
    }
    fn http(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca.as_bytes()).unwrap())
            .build()
            .unwrap()
    }
}

/// Runs until `f` gives Some (the authorizer follows RBAC writes a moment later).
async fn eventually<T, F, Fut>(what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..100 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_on_the_secure_port() {
    let s = secure_server().await;
    let admin = s.admin();

    // Strangers: 401, except the public information.
    let http = s.http();
    for path in [
        "/api/v1/pods",
        "/apis",
        "/api/v1/namespaces/default/secrets",
    ] {
        let resp = http.get(format!("{}{path}", s.https)).send().await.unwrap();
        assert_eq!(resp.status(), 401, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["reason"], "Unauthorized");
        assert_eq!(body["message"], "Unauthorized");
    }
    for path in ["/version", "/healthz", "/readyz", "/livez"] {
        let resp = http.get(format!("{}{path}", s.https)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let resp = http
        .get(format!("{}/api/v1/pods", s.https))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // The admin kubeconfig's client certificate: kubernetes-admin in system:masters.
    let who = admin.ok(&["auth", "whoami", "-o", "json"]).await;
    let who: Value = serde_json::from_str(&who).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "kubernetes-admin");
    let groups = who["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("system:masters") && groups.contains("system:authenticated"),
        "{groups}"
    );
    // The default roles are there, and kubernetes.default is the secure port.
    let roles = admin.ok(&["get", "clusterroles", "-o", "name"]).await;
    for r in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(
            roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{r}\n")),
            "{r} in {roles}"
        );
    }
    let svc = admin
        .ok(&[
            "get",
            "service",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "json",
        ])
        .await;
    let svc: Value = serde_json::from_str(&svc).unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);

    admin.ok(&["create", "namespace", "ns-a"]).await;
    admin.ok(&["create", "namespace", "ns-b"]).await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "alice-edit",
            "--clusterrole=edit",
            "--user=alice",
            "-n",
            "ns-a",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "carol-admin",
            "--clusterrole=admin",
            "--group=teachers",
            "-n",
            "ns-a",
        ])
        .await;

    // alice (static token) can work in ns-a, and nowhere else.
    let alice = s.with_token("alice", "alice-token");
    eventually("alice may create deployments in ns-a", || async {
        let (ok, out, _) = alice
            .run(&["auth", "can-i", "create", "deployments", "-n", "ns-a"])
            .await;
        (ok && out.trim() == "yes").then_some(())
    })
    .await;
    alice
        .ok(&["create", "deployment", "web", "--image=nginx", "-n", "ns-a"])
        .await;
    let (ok, out, _) = alice
        .run(&["auth", "can-i", "create", "deployments", "-n", "ns-b"])
        .await;
    assert_eq!((ok, out.trim()), (false, "no"));
    let (ok, _, err) = alice
        .run(&["create", "deployment", "web", "--image=nginx", "-n", "ns-b"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("deployments.apps is forbidden: User \"alice\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"ns-b\""),
        "{err}"
    );
    let (ok, _, err) = alice.run(&["get", "nodes"]).await;
    assert!(!ok);
    assert!(
        err.contains("nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"),
        "{err}"
    );
    let (ok, _, err) = alice
        .run(&[
            "create",
            "rolebinding",
            "mine",
            "--clusterrole=cluster-admin",
            "--user=alice",
            "-n",
            "ns-a",
        ])
        .await;
    assert!(!ok);
    assert!(
        err.contains("rolebindings.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"ns-a\""),
        "{err}"
    );
    // `can-i --list` shows what edit grants in ns-a.
    let list = alice.ok(&["auth", "can-i", "--list", "-n", "ns-a"]).await;
    let line = |res: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(res))
            .map(str::to_string)
    };
    let deployments =
        line("deployments.apps").unwrap_or_else(|| panic!("deployments.apps in\n{list}"));
    for verb in [
        "create", "delete", "patch", "update", "get", "list", "watch",
    ] {
        assert!(deployments.contains(verb), "{verb} in {deployments}");
    }
    assert!(
        line("selfsubjectaccessreviews.authorization.k8s.io").is_some(),
        "{list}"
    );
    assert!(
        line("rolebindings.rbac.authorization.k8s.io").is_none(),
        "{list}"
    );
    let list_b = alice.ok(&["auth", "can-i", "--list", "-n", "ns-b"]).await;
    assert!(!list_b.contains("deployments.apps"), "{list_b}");

    // carol (admin through her group) may manage RoleBindings in ns-a, but
    // not grant what she does not hold.
    let carol = s.with_token("carol", "carol-token");
    eventually("carol may create rolebindings in ns-a", || async {
        let (ok, out, _) = carol
            .run(&["auth", "can-i", "create", "rolebindings", "-n", "ns-a"])
            .await;
        (ok && out.trim() == "yes").then_some(())
    })
    .await;
    carol
        .ok(&[
            "create",
            "rolebinding",
            "dave-view",
            "--clusterrole=view",
            "--user=dave",
            "-n",
            "ns-a",
        ])
        .await;
    let (ok, _, err) = carol
        .run(&[
            "create",
            "rolebinding",
            "root",
            "--clusterrole=cluster-admin",
            "--user=carol",
            "-n",
            "ns-a",
        ])
        .await;
    assert!(!ok);
    assert!(
        err.contains("rolebindings.rbac.authorization.k8s.io \"root\" is forbidden: user \"carol\" (groups=[\"teachers\" \"lab\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"),
        "{err}"
    );
    assert!(
        err.contains("{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"),
        "{err}"
    );
    let (ok, _, err) = carol
        .run(&[
            "create",
            "role",
            "wide",
            "--verb=get",
            "--resource=nodes",
            "-n",
            "ns-a",
        ])
        .await;
    assert!(!ok);
    assert!(
        err.contains("is attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    carol
        .ok(&[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=pods",
            "-n",
            "ns-a",
        ])
        .await;

    // Impersonation: the admin may act as alice (and is then confined as she
    // is); alice may not act as anyone.
    let (ok, _, err) = admin
        .run(&["get", "pods", "-n", "ns-b", "--as", "alice"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("User \"alice\" cannot list resource \"pods\""),
        "{err}"
    );
    admin
        .ok(&["get", "deployments", "-n", "ns-a", "--as", "alice"])
        .await;
    let (ok, _, err) = alice
        .run(&["get", "pods", "-n", "ns-a", "--as", "bob"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{err}"
    );
    let who = admin
        .ok(&["auth", "whoami", "--as", "alice", "--as-group", "students"])
        .await;
    assert!(who.contains("alice") && who.contains("students"), "{who}");

    // A ServiceAccount token from `kubectl create token` (TokenRequest), used by kubectl.
    admin
        .ok(&["create", "serviceaccount", "robot", "-n", "ns-a"])
        .await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "robot-view",
            "--clusterrole=view",
            "--serviceaccount=ns-a:robot",
            "-n",
            "ns-a",
        ])
        .await;
    let token = admin
        .ok(&["create", "token", "robot", "-n", "ns-a", "--duration=10m"])
        .await;
    let robot = s.with_token("robot", token.trim());
    let who = robot
        .ok(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .await;
    assert_eq!(who, "system:serviceaccount:ns-a:robot");
    eventually("the robot may list deployments in ns-a", || async {
        robot
            .run(&["get", "deployments", "-n", "ns-a"])
            .await
            .0
            .then_some(())
    })
    .await;
    let (ok, _, err) = robot
        .run(&["delete", "deployment", "web", "-n", "ns-a"])
        .await;
    assert!(!ok);
    assert!(
        err.contains(
            "User \"system:serviceaccount:ns-a:robot\" cannot delete resource \"deployments\""
        ),
        "{err}"
    );

    // SubjectAccessReview as a delegating authorizer asks it.
    let sar = admin
        .write("sar.json", r#"{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "resourceAttributes": {"namespace": "ns-a", "verb": "delete", "group": "apps", "resource": "deployments"}}}"#);
    let out: Value =
        serde_json::from_str(&admin.ok(&["create", "-f", &sar, "-o", "json"]).await).unwrap();
    assert_eq!(out["status"]["allowed"], true, "{out}");
    assert!(
        out["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("RoleBinding \"alice-edit/ns-a\""),
        "{out}"
    );
}

/// A pod manifest with `spec` (one container "c" unless `spec` says otherwise).
fn pod_yaml(name: &str, ns: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_levels_per_namespace() {
    let s = secure_server().await;
    let admin = s.admin();
    for (ns, label) in [
        ("locked", "pod-security.kubernetes.io/enforce=restricted"),
        ("open", "pod-security.kubernetes.io/enforce=privileged"),
        ("warned", "pod-security.kubernetes.io/warn=baseline"),
    ] {
        admin.ok(&["create", "namespace", ns]).await;
        admin.ok(&["label", "namespace", ns, label]).await;
    }
    let privileged =
        "  containers: [{name: c, image: busybox, securityContext: {privileged: true}}]";
    let host_path = "  volumes: [{name: root, hostPath: {path: /}}]\n  containers: [{name: c, image: busybox, volumeMounts: [{name: root, mountPath: /host}]}]";
    let compliant_sc =
        "securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}";
    let root = format!("  securityContext: {{runAsNonRoot: true, runAsUser: 0, seccompProfile: {{type: RuntimeDefault}}}}\n  containers: [{{name: c, image: busybox, {compliant_sc}}}]");
    let fine = format!("  securityContext: {{runAsNonRoot: true, runAsUser: 1000, seccompProfile: {{type: RuntimeDefault}}}}\n  containers: [{{name: c, image: busybox, {compliant_sc}}}]");
    let cases = [
        ("priv", privileged.to_string(), "pods \"priv\" is forbidden: violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"),
        ("hostpath", host_path.to_string(), "restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")"),
        ("root", root, "pods \"root\" is forbidden: violates PodSecurity \"restricted:latest\": runAsUser=0 (pod must not set runAsUser=0)"),
    ];
    for (name, spec, want) in &cases {
        let file = admin.write(&format!("{name}.yaml"), &pod_yaml(name, "locked", spec));
        let (ok, _, err) = admin.run(&["create", "-f", &file]).await;
        assert!(!ok, "{name} was admitted into a restricted namespace");
        assert!(err.contains(want), "{name}: {err}");
        // The same pod is fine where the level is privileged.
        let file = admin.write(&format!("{name}-open.yaml"), &pod_yaml(name, "open", spec));
        admin.ok(&["create", "-f", &file]).await;
    }
    let file = admin.write("fine.yaml", &pod_yaml("fine", "locked", &fine));
    admin.ok(&["create", "-f", &file]).await;
    // warn: admitted, with kubectl printing the warning; workloads are warned about too.
    let file = admin.write("warn.yaml", &pod_yaml("priv", "warned", privileged));
    let (ok, _, err) = admin.run(&["create", "-f", &file]).await;
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"),
        "{err}"
    );
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: locked}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {hostNetwork: true, containers: [{name: c, image: busybox}]}\n";
    let file = admin.write("deploy.yaml", deploy);
    let (ok, _, err) = admin.run(&["create", "-f", &file]).await;
    assert!(
        ok,
        "a workload is admitted (its pods are checked when made): {err}"
    );
    assert!(err.contains("Warning: would violate PodSecurity \"restricted:latest\": host namespaces (hostNetwork=true)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_over_tls() {
    let s = secure_server().await;
    let pki = s.server.config.data_dir.join("pki");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python/security_test.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(&s.https)
            .arg(pki.join("admin.conf"))
            .arg(pki.join("ca.crt"))
            .arg("alice-token")
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("python security: all checks passed"),
        "{text}"
    );
}
