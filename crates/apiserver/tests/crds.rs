//! CustomResourceDefinitions with the real kubectl, on both stores: the
//! CronTab example of the Kubernetes documentation ("Extend the Kubernetes
//! API with CustomResourceDefinitions"), its validation, pruning, defaults,
//! printer columns, status and scale subresources, selectors, patches,
//! watch, explain, and what deleting the CRD does.

#[macro_use]
mod common;

use common::{assert_status, Http, Kubectl};
use minik8s_testkit::{Backend, TestServer};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [cronSpec]
              x-kubernetes-validations:
                - rule: "!has(self.image) || !self.image.startsWith('bad')"
                  message: image must not start with bad
              properties:
                cronSpec:
                  type: string
                  pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
                  description: The cron spec defining the interval a CronJob is run
                  x-kubernetes-validations:
                    - rule: self == oldSelf
                      message: cronSpec is immutable
                image:
                  type: string
                color:
                  type: string
                  enum: [red, blue]
                replicas:
                  type: integer
                  minimum: 0
                  maximum: 10
                  default: 1
            status:
              type: object
              properties:
                replicas: {type: integer}
                labelSelector: {type: string}
      subresources:
        status: {}
        scale:
          specReplicasPath: .spec.replicas
          statusReplicasPath: .status.replicas
          labelSelectorPath: .status.labelSelector
      selectableFields:
        - jsonPath: .spec.color
      additionalPrinterColumns:
        - name: Spec
          type: string
          description: The cron spec defining the interval a CronJob is run
          jsonPath: .spec.cronSpec
        - name: Replicas
          type: integer
          jsonPath: .spec.replicas
        - name: Age
          type: date
          jsonPath: .metadata.creationTimestamp
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
      - ct
"#;

fn crontab(name: &str, cron: &str, extra: &str) -> String {
    format!("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\n  labels: {{app: {name}}}\nspec:\n  cronSpec: \"{cron}\"\n  image: my-awesome-cron-image\n{extra}")
}

async fn crontabs(backend: Backend) {
    let s = TestServer::start(backend).await;
    let k = Kubectl::new(&s.url);
    let http = Http::new(&s.url);

    let crd = k.write("crd.yaml", CRD);
    assert_eq!(
        k.ok(&["apply", "-f", &crd]).await.trim(),
        "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
    );
    k.ok(&[
        "wait",
        "--for",
        "condition=Established",
        "--timeout=30s",
        "crd/crontabs.stable.example.com",
    ])
    .await;
    let (_, stored) = http
        .get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com")
        .await;
    assert_eq!(
        stored["spec"]["names"]["listKind"], "CronTabList",
        "defaulted"
    );
    assert_eq!(
        stored["status"]["acceptedNames"]["shortNames"],
        json!(["ct"])
    );
    assert_eq!(stored["status"]["storedVersions"], json!(["v1"]));
    let crds = k.ok(&["get", "crd"]).await;
    assert!(
        crds.starts_with("NAME") && crds.contains("CREATED AT"),
        "{crds}"
    );
    assert!(crds.contains("crontabs.stable.example.com"), "{crds}");

    // Created, defaulted, printed with the CRD's columns, found by short name.
    let obj = k.write("ct.yaml", &crontab("my-new-cron-object", "* * * * */5", ""));
    assert_eq!(
        k.ok(&["apply", "-f", &obj]).await.trim(),
        "crontab.stable.example.com/my-new-cron-object created"
    );
    let table = k.ok(&["get", "ct"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SPEC", "REPLICAS", "AGE"], "{table}");
    assert!(
        table.contains("my-new-cron-object   * * * * */5   1"),
        "{table}"
    );
    let live: Value = serde_json::from_str(
        &k.ok(&["get", "crontab", "my-new-cron-object", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(live["spec"]["replicas"], 1, "the schema's default");
    assert_eq!(live["metadata"]["generation"], 1);

    // Unknown fields: refused under kubectl's Strict validation, pruned otherwise.
    let junk = k.write("junk.yaml", &crontab("junk", "* * * * *", "  bogus: 1\n"));
    let (ok, _, err) = k.run(&["create", "-f", &junk]).await;
    assert!(
        !ok && err.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{err}"
    );
    k.ok(&["create", "--validate=false", "-f", &junk]).await;
    let pruned: Value =
        serde_json::from_str(&k.ok(&["get", "ct", "junk", "-o", "json"]).await).unwrap();
    assert!(pruned["spec"].get("bogus").is_none(), "{pruned}");

    // Invalid objects get 422 with the field path and are not stored.
    for (name, cron, extra, want) in [
        ("bad-type", "* * * * *", "  replicas: many\n", "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""),
        ("bad-pattern", "every minute", "", "spec.cronSpec: Invalid value: \"every minute\": spec.cronSpec in body should match"),
        ("bad-range", "* * * * *", "  replicas: 11\n", "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
        ("bad-enum", "* * * * *", "  color: green\n", "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""),
    ] {
        let f = k.write("bad.yaml", &crontab(name, cron, extra));
        let (ok, _, err) = k.run(&["create", "-f", &f]).await;
        assert!(!ok && err.contains(&format!("The CronTab \"{name}\" is invalid")) && err.contains(want), "{name}: {err}");
        let (ok, _, err) = k.run(&["get", "ct", name]).await;
        assert!(!ok && err.contains("NotFound"), "{name} stored: {err}");
    }
    let bad_image = k.write(
        "bad.yaml",
        &crontab("bad-image", "* * * * *", "").replace("my-awesome", "bad"),
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad_image]).await;
    assert!(
        !ok && err.contains("spec: Invalid value: \"object\": image must not start with bad"),
        "{err}"
    );
    let (ok, _, err) = k
        .run(&[
            "patch",
            "ct",
            "junk",
            "--type=merge",
            "-p",
            r#"{"spec":{"cronSpec":"1 * * * *"}}"#,
        ])
        .await;
    assert!(
        !ok && err.contains("spec.cronSpec: Invalid value: \"string\": cronSpec is immutable"),
        "transition rule: {err}"
    );
    let missing = http
        .post("/apis/stable.example.com/v1/namespaces/default/crontabs", "application/json",
              r#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"nospec"},"spec":{}}"#)
        .await;
    assert_status(&missing, 422, "Invalid");
    assert_eq!(missing.1["details"]["causes"][0]["field"], "spec.cronSpec");

    // Patches: merge and JSON; strategic merge is refused for custom resources.
    k.ok(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/image","value":"v2"}]"#,
    ])
    .await;
    let (ok, _, err) = k
        .run(&[
            "patch",
            "ct",
            "my-new-cron-object",
            "-p",
            r#"{"spec":{"image":"v3"}}"#,
        ])
        .await;
    assert!(
        !ok && err.contains("application/strategic-merge-patch+json is not supported"),
        "{err}"
    );
    let (ok, _, err) = k
        .run(&[
            "patch",
            "ct",
            "my-new-cron-object",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":-1}}"#,
        ])
        .await;
    assert!(
        !ok && err.contains("spec.replicas in body should be greater than or equal to 0"),
        "{err}"
    );
    let live: Value = serde_json::from_str(
        &k.ok(&["get", "ct", "my-new-cron-object", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(
        (
            live["spec"]["color"].as_str(),
            live["spec"]["image"].as_str()
        ),
        (Some("blue"), Some("v2"))
    );
    assert_eq!(live["metadata"]["generation"], 3, "two spec changes");

    // Label and field selectors (selectableFields).
    let by_label = k.ok(&["get", "ct", "-l", "app=junk", "-o", "name"]).await;
    assert_eq!(by_label.trim(), "crontab.stable.example.com/junk");
    let by_field = k
        .ok(&[
            "get",
            "ct",
            "--field-selector",
            "spec.color=blue",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        by_field.trim(),
        "crontab.stable.example.com/my-new-cron-object"
    );
    let (ok, _, err) = k
        .run(&["get", "ct", "--field-selector", "spec.image=v2"])
        .await;
    assert!(!ok && err.contains("spec.image"), "{err}");

    // The status subresource: status written only there, generation unchanged.
    let path = "/apis/stable.example.com/v1/namespaces/default/crontabs/my-new-cron-object";
    let mut body = live.clone();
    body["status"] = json!({"replicas": 1, "labelSelector": "app=my-new-cron-object"});
    let (code, out) = http
        .call(
            reqwest::Method::PUT,
            &format!("{path}/status"),
            "application/json",
            &body.to_string(),
        )
        .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["status"]["replicas"], 1);
    assert_eq!(out["metadata"]["generation"], 3);
    let mut main = out.clone();
    main["status"]["replicas"] = json!(7);
    let (_, out) = http
        .call(
            reqwest::Method::PUT,
            path,
            "application/json",
            &main.to_string(),
        )
        .await;
    assert_eq!(
        out["status"]["replicas"], 1,
        "a PUT of the object ignores status"
    );

    // The scale subresource, through kubectl scale.
    assert_eq!(
        k.ok(&["scale", "ct", "my-new-cron-object", "--replicas=3"])
            .await
            .trim(),
        "crontab.stable.example.com/my-new-cron-object scaled"
    );
    let (_, scale) = http.get(&format!("{path}/scale")).await;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(
        (
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["replicas"].as_i64()
        ),
        (Some(3), Some(1))
    );
    assert_eq!(scale["status"]["selector"], "app=my-new-cron-object");

    // Server-side apply.
    let applied = k.write(
        "ssa.yaml",
        &crontab("applied", "0 * * * *", "  replicas: 2\n"),
    );
    k.ok(&["apply", "--server-side", "-f", &applied]).await;
    let (_, live) = http
        .get("/apis/stable.example.com/v1/namespaces/default/crontabs/applied")
        .await;
    assert_eq!(live["spec"]["replicas"], 2);
    assert_eq!(
        live["metadata"]["managedFields"][0]["manager"], "kubectl",
        "{live}"
    );
    assert_eq!(
        live["metadata"]["managedFields"][0]["operation"], "Apply",
        "{live}"
    );

    // kubectl explain reads the CRD's schema.
    let explain = k.ok(&["explain", "crontab.spec"]).await;
    assert!(
        explain.contains("KIND:       CronTab")
            && explain.contains("cronSpec")
            && explain.contains("replicas"),
        "{explain}"
    );

    // A watch sees changes.
    let mut watch = k
        .command(&["get", "ct", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    async fn next(
        lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    ) -> String {
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a watch event")
            .unwrap()
            .unwrap()
    }
    let header = next(&mut lines).await;
    assert!(
        header.starts_with("EVENT") && header.contains("SPEC"),
        "{header}"
    );
    assert!(next(&mut lines).await.starts_with("ADDED"));
    k.ok(&["label", "ct", "applied", "seen=yes"]).await;
    let mut seen = Vec::new();
    while !seen
        .last()
        .is_some_and(|l: &String| l.starts_with("MODIFIED") && l.contains("applied"))
    {
        seen.push(next(&mut lines).await);
        assert!(seen.len() < 10, "{seen:?}");
    }
    watch.kill().await.unwrap();

    // Deleting the CRD deletes its objects and stops serving the kind.
    k.ok(&["delete", "crd", "crontabs.stable.example.com"])
        .await;
    let (ok, _, err) = k.run(&["get", "ct"]).await;
    assert!(
        !ok && err.contains("NotFound"),
        "the kind is no longer served: {err}"
    );
    // A kubectl without a discovery cache no longer knows the name.
    let fresh = Kubectl::new(&s.url);
    let (ok, _, err) = fresh.run(&["get", "ct"]).await;
    assert!(
        !ok && err.contains("the server doesn't have a resource type \"ct\""),
        "{err}"
    );
    let (code, _) = http.get("/apis/stable.example.com/v1").await;
    assert_eq!(code, 404, "the group version left discovery");
    let (left, _) = s
        .server
        .store
        .list("/registry/stable.example.com/", None)
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "objects left: {:?}",
        left.iter().map(|kv| &kv.key).collect::<Vec<_>>()
    );
}

/// A CRD whose names are taken, a cluster-scoped kind, and a restart that serves stored CRDs again.
async fn names_scope_and_restart(backend: Backend) {
    let mut s = TestServer::start(backend).await;
    let http = Http::new(&s.url);
    let crd = |plural: &str, kind: &str, group: &str, scope: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
        .to_string()
    };
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = http
        .post(
            crds,
            "application/json",
            &crd(
                "leaderworkersets",
                "LeaderWorkerSet",
                "leaderworkerset.x-k8s.io",
                "Namespaced",
            ),
        )
        .await;
    assert_eq!(created.0, 201, "{:?}", created.1);
    let cond = |v: &Value, t: &str| {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t)
            .cloned()
    };
    let conflict = minik8s_testkit::eventually(10, "NamesAccepted=False", || async {
        let (_, v) = http
            .get(&format!("{crds}/leaderworkersets.leaderworkerset.x-k8s.io"))
            .await;
        cond(&v, "NamesAccepted").filter(|c| c["status"] == "False")
    })
    .await;
    assert_eq!(conflict["reason"], "NameConflict");
    assert_eq!(
        conflict["message"],
        "\"leaderworkersets\" is already in use"
    );
    // The built-in keeps being served as before, and deleting the CRD that
    // never served anything deletes no LeaderWorkerSet.
    let lws = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets";
    let made = http
        .post(lws, "application/json", r#"{"apiVersion":"leaderworkerset.x-k8s.io/v1","kind":"LeaderWorkerSet","metadata":{"name":"keep"},
            "spec":{"replicas":1,"leaderWorkerTemplate":{"size":1,"workerTemplate":{"spec":{"containers":[{"name":"w","image":"i"}]}}}}}"#)
        .await;
    assert_eq!(made.0, 201, "{:?}", made.1);
    let (code, _) = http
        .call(
            reqwest::Method::DELETE,
            &format!("{crds}/leaderworkersets.leaderworkerset.x-k8s.io"),
            "",
            "",
        )
        .await;
    assert_eq!(code, 200);
    minik8s_testkit::eventually(10, "the clashing CRD is gone", || async {
        let (code, _) = http
            .get(&format!("{crds}/leaderworkersets.leaderworkerset.x-k8s.io"))
            .await;
        (code == 404).then_some(())
    })
    .await;
    assert_eq!(
        http.get(&format!("{lws}/keep")).await.0,
        200,
        "the built-in LWS object is kept"
    );

    let created = http
        .post(
            crds,
            "application/json",
            &crd(
                "clusterthings",
                "ClusterThing",
                "example.minik8s.io",
                "Cluster",
            ),
        )
        .await;
    assert_eq!(created.0, 201, "{:?}", created.1);
    let things = "/apis/example.minik8s.io/v1/clusterthings";
    let made = minik8s_testkit::eventually(10, "clusterthings served", || async {
        let r = http.post(things, "application/json", r#"{"apiVersion":"example.minik8s.io/v1","kind":"ClusterThing","metadata":{"name":"one"},"anything":{"goes":1}}"#).await;
        (r.0 == 201).then_some(r.1)
    })
    .await;
    assert!(made["metadata"].get("namespace").is_none());
    assert_eq!(
        made["anything"]["goes"], 1,
        "kept: the schema preserves unknown fields"
    );
    let bad = http
        .post(
            crds,
            "application/json",
            &crd("Bad", "bad", "nodot", "Nowhere"),
        )
        .await;
    assert_status(&bad, 422, "Invalid");

    s.restart_http().await;
    let http = Http::new(&s.url);
    let (code, thing) = minik8s_testkit::eventually(10, "served after a restart", || async {
        let r = http.get(&format!("{things}/one")).await;
        (r.0 == 200).then_some(r)
    })
    .await;
    assert_eq!((code, thing["anything"]["goes"].as_i64()), (200, Some(1)));
}

/// Several served versions with conversion None: one storage version, and
/// each client sees the version it asked for.
async fn served_versions(backend: Backend) {
    let s = TestServer::start(backend).await;
    let http = Http::new(&s.url);
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}})
    };
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.minik8s.io"},
        "spec": {"group": "example.minik8s.io", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [version("v1beta1", false), version("v1", true)]}});
    let created = http
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "application/json",
            &crd.to_string(),
        )
        .await;
    assert_eq!(created.0, 201, "{:?}", created.1);
    let beta = "/apis/example.minik8s.io/v1beta1/namespaces/default/gizmos";
    let made = minik8s_testkit::eventually(10, "v1beta1 served", || async {
        let r = http.post(beta, "application/json", r#"{"apiVersion":"example.minik8s.io/v1beta1","kind":"Gizmo","metadata":{"name":"g"},"spec":{"size":1}}"#).await;
        (r.0 == 201).then_some(r.1)
    })
    .await;
    assert_eq!(made["apiVersion"], "example.minik8s.io/v1beta1");
    let stored = s
        .server
        .store
        .get("/registry/example.minik8s.io/gizmos/default/g")
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(
        stored["apiVersion"], "example.minik8s.io/v1",
        "stored in the storage version"
    );
    let (_, v1) = http
        .get("/apis/example.minik8s.io/v1/namespaces/default/gizmos/g")
        .await;
    assert_eq!(v1["apiVersion"], "example.minik8s.io/v1");
    let (_, list) = http.get(beta).await;
    assert_eq!(list["items"][0]["apiVersion"], "example.minik8s.io/v1beta1");
    let (code, patched) = http
        .call(
            reqwest::Method::PATCH,
            &format!("{beta}/g"),
            "application/merge-patch+json",
            r#"{"spec":{"size":2}}"#,
        )
        .await;
    assert_eq!(
        (
            code,
            patched["apiVersion"].as_str(),
            patched["spec"]["size"].as_i64()
        ),
        (200, Some("example.minik8s.io/v1beta1"), Some(2))
    );
    let discovery = http.get("/apis/example.minik8s.io").await.1;
    assert_eq!(
        discovery["preferredVersion"]["version"], "v1",
        "{discovery}"
    );
}

both_backends!(crontabs, names_scope_and_restart, served_versions);
