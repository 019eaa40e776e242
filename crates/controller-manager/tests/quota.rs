//! ResourceQuota and LimitRange with the real kubectl (1.37) against a
//! cluster of hollow nodes with every controller: a student namespace's
//! quota refuses the pod over it with Kubernetes' message, `status.used`
//! follows creates and deletes, object counts limit Deployments, and a
//! LimitRange gives a pod without resources its defaults and refuses one
//! over its max.

mod common;

use common::{cluster, kubectl, kubectl_json, kubectl_ok, table_line, until};

fn manifest(dir: &tempfile::TempDir, name: &str, yaml: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    path.to_string_lossy().into_owned()
}

fn pod_yaml(name: &str, ns: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  containers:\n  - name: app\n    image: busybox\n{resources}"
    )
}

fn cpu_request(cpu: &str) -> String {
    format!("    resources:\n      requests:\n        cpu: {cpu}\n")
}

/// The quota's `status.used` once it holds `want` for `resource`.
async fn used_becomes(url: &str, ns: &str, quota: &str, resource: &str, want: &str) {
    until(
        &format!("{quota}: used {resource} = {want}"),
        30,
        || async {
            let q = kubectl_json(url, &["resourcequota", quota, "-n", ns]);
            let got = q["status"]["used"][resource]
                .as_str()
                .unwrap_or("")
                .to_string();
            if got == want {
                Ok(())
            } else {
                Err(format!("used {resource} = {got:?}: {}", q["status"]))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quotas_and_limit_ranges_as_kubernetes_applies_them() {
    let (server, _client) = cluster("quota", 1).await;
    let url = server.url.as_str();
    let dir = tempfile::tempdir().unwrap();

    // A quota of 2 pods and 500m CPU in a student's namespace.
    kubectl_ok(url, &["create", "namespace", "student1"]);
    let out = kubectl_ok(
        url,
        &[
            "create",
            "quota",
            "q",
            "--hard=pods=2,requests.cpu=500m",
            "-n",
            "student1",
        ],
    );
    assert!(out.contains("resourcequota/q created"), "{out}");
    used_becomes(url, "student1", "q", "pods", "0").await;

    for (name, cpu) in [("p1", "200m"), ("p2", "200m")] {
        let f = manifest(&dir, name, &pod_yaml(name, "student1", &cpu_request(cpu)));
        kubectl_ok(url, &["create", "-f", &f]);
    }
    used_becomes(url, "student1", "q", "requests.cpu", "400m").await;
    let third = manifest(
        &dir,
        "p3",
        &pod_yaml("p3", "student1", &cpu_request("100m")),
    );
    let (created, out) = kubectl(url, &["create", "-f", &third]);
    assert!(!created);
    assert!(
        out.contains(r#"pods "p3" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"#),
        "{out}"
    );
    // Without a CPU request a pod cannot be counted against requests.cpu.
    let bare = manifest(&dir, "bare", &pod_yaml("bare", "student1", ""));
    let (created, out) = kubectl(url, &["create", "-f", &bare]);
    assert!(!created);
    assert!(
        out.contains(
            r#"pods "bare" is forbidden: failed quota: q: must specify requests.cpu for: app"#
        ),
        "{out}"
    );

    // The table and describe, as kubectl prints them.
    let table = kubectl_ok(url, &["get", "quota", "-n", "student1"]);
    assert_eq!(table_line(&table, 0), ["NAME", "AGE", "REQUEST", "LIMIT"]);
    assert!(
        table.contains("pods: 2/2, requests.cpu: 400m/500m"),
        "{table}"
    );
    let described = kubectl_ok(url, &["describe", "quota", "q", "-n", "student1"]);
    let line = |name: &str| -> Vec<String> {
        described
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|w| w.first().map(String::as_str) == Some(name))
            .unwrap_or_default()
    };
    assert_eq!(line("pods"), ["pods", "2", "2"], "{described}");
    assert_eq!(
        line("requests.cpu"),
        ["requests.cpu", "400m", "500m"],
        "{described}"
    );

    // A deletion gives the quota back; the third pod then fits.
    kubectl_ok(
        url,
        &[
            "delete",
            "pod",
            "p1",
            "-n",
            "student1",
            "--grace-period=0",
            "--force",
        ],
    );
    used_becomes(url, "student1", "q", "pods", "1").await;
    used_becomes(url, "student1", "q", "requests.cpu", "200m").await;
    kubectl_ok(url, &["create", "-f", &third]);
    used_becomes(url, "student1", "q", "requests.cpu", "300m").await;

    // Object counts: one Deployment at most.
    kubectl_ok(
        url,
        &[
            "create",
            "quota",
            "objects",
            "--hard=count/deployments.apps=1",
            "-n",
            "student1",
        ],
    );
    used_becomes(url, "student1", "objects", "count/deployments.apps", "0").await;
    kubectl_ok(
        url,
        &[
            "create",
            "deployment",
            "d1",
            "--image=busybox",
            "--replicas=0",
            "-n",
            "student1",
        ],
    );
    let (created, out) = kubectl(
        url,
        &[
            "create",
            "deployment",
            "d2",
            "--image=busybox",
            "--replicas=0",
            "-n",
            "student1",
        ],
    );
    assert!(!created);
    assert!(
        out.contains("exceeded quota: objects, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1"),
        "{out}"
    );

    // Custom resources are counted too (listed through discovery).
    let crd = manifest(
        &dir,
        "crd",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, kind: Widget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
    );
    kubectl_ok(url, &["create", "-f", &crd]);
    kubectl_ok(
        url,
        &[
            "create",
            "quota",
            "widgets",
            "--hard=count/widgets.example.com=1",
            "-n",
            "student1",
        ],
    );
    used_becomes(url, "student1", "widgets", "count/widgets.example.com", "0").await;
    let widget = |name: &str| {
        manifest(
            &dir,
            name,
            &format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: student1\n"),
        )
    };
    let (w1, w2) = (widget("w1"), widget("w2"));
    until("the Widget kind is served", 20, || async {
        let (created, out) = kubectl(url, &["create", "-f", &w1]);
        if created {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;
    let (created, out) = kubectl(url, &["create", "-f", &w2]);
    assert!(!created);
    assert!(out.contains("exceeded quota: widgets"), "{out}");
    kubectl_ok(url, &["delete", "widget", "w1", "-n", "student1"]);
    // A deleted custom object is given back at the controller's next recount.
    used_becomes(url, "student1", "widgets", "count/widgets.example.com", "0").await;
    kubectl_ok(url, &["create", "-f", &w2]);

    // Bad quotas are refused with the field path.
    let (created, out) = kubectl(
        url,
        &["create", "quota", "bad", "--hard=foo=1", "-n", "student1"],
    );
    assert!(!created);
    assert!(
        out.contains(
            r#"spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota"#
        ),
        "{out}"
    );

    // A LimitRange gives a pod without resources its defaults.
    kubectl_ok(url, &["create", "namespace", "student2"]);
    let limits = manifest(
        &dir,
        "limits",
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: limits\n  namespace: student2\nspec:\n  limits:\n  - type: Container\n    default:\n      cpu: 300m\n      memory: 128Mi\n    defaultRequest:\n      cpu: 100m\n    max:\n      cpu: '1'\n",
    );
    kubectl_ok(url, &["create", "-f", &limits]);
    let lr = kubectl_json(url, &["limitrange", "limits", "-n", "student2"]);
    // Defaulted as Kubernetes does: the memory request from the default limit.
    assert_eq!(lr["spec"]["limits"][0]["defaultRequest"]["memory"], "128Mi");
    let plain = manifest(&dir, "plain", &pod_yaml("plain", "student2", ""));
    until("the LimitRange applies", 10, || async {
        let (created, out) = kubectl(url, &["create", "-f", &plain]);
        if created {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;
    let pod = kubectl_json(url, &["pod", "plain", "-n", "student2"]);
    let res = &pod["spec"]["containers"][0]["resources"];
    assert_eq!(res["requests"]["cpu"], "100m", "{res}");
    assert_eq!(res["requests"]["memory"], "128Mi", "{res}");
    assert_eq!(res["limits"]["cpu"], "300m", "{res}");
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app"
    );
    let big = manifest(
        &dir,
        "big",
        &pod_yaml(
            "big",
            "student2",
            "    resources:\n      limits:\n        cpu: '2'\n",
        ),
    );
    let (created, out) = kubectl(url, &["create", "-f", &big]);
    assert!(!created);
    assert!(
        out.contains(
            r#"pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#
        ),
        "{out}"
    );
    let described = kubectl_ok(url, &["describe", "limitrange", "limits", "-n", "student2"]);
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["Container", "cpu", "-", "1", "100m", "300m", "-"]),
        "{described}"
    );
    let bad = manifest(
        &dir,
        "badlimits",
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: bad\n  namespace: student2\nspec:\n  limits:\n  - type: Container\n    min:\n      cpu: '2'\n    max:\n      cpu: '1'\n",
    );
    let (created, out) = kubectl(url, &["create", "-f", &bad]);
    assert!(!created);
    assert!(
        out.contains(r#"spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1"#),
        "{out}"
    );
}
