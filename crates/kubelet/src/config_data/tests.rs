use super::*;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
        .unwrap()
}

/// (kind, name, its keys and values, or None when it does not exist).
type Object<'a> = (Kind, &'a str, Option<&'a [(&'a str, &'a str)]>);

fn cfg(objects: &[Object]) -> PodConfig {
    PodConfig {
        namespace: "ns".into(),
        objects: objects
            .iter()
            .map(|(k, n, d)| {
                let data = d.map(|kv| {
                    kv.iter()
                        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                        .collect()
                });
                ((*k, n.to_string()), data)
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn references_cover_env_env_from_and_volumes() {
    let p = pod(json!({"containers": [{"name": "c", "image": "i",
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "a"}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "b"}}}],
        "envFrom": [{"configMapRef": {"name": "cm2"}}, {"secretRef": {"name": "s2"}}]}],
        "volumes": [{"name": "v1", "configMap": {"name": "cm3"}}, {"name": "v2", "secret": {"secretName": "s3"}},
                    {"name": "v3", "projected": {"sources": [{"configMap": {"name": "cm4"}}, {"secret": {"name": "s4"}}]}},
                    {"name": "v4", "emptyDir": {}}]}));
    let refs: Vec<String> = references(&p)
        .into_iter()
        .map(|(k, n)| format!("{k:?}/{n}"))
        .collect();
    assert_eq!(
        refs,
        [
            "ConfigMap/cm1",
            "ConfigMap/cm2",
            "ConfigMap/cm3",
            "ConfigMap/cm4",
            "Secret/s1",
            "Secret/s2",
            "Secret/s3",
            "Secret/s4"
        ]
    );
}

#[test]
fn missing_objects_and_keys_say_what_kubernetes_says() {
    let c = cfg(&[
        (Kind::ConfigMap, "app", Some(&[("mode", "prod")])),
        (Kind::Secret, "gone", None),
    ]);
    assert_eq!(
        c.key(Kind::ConfigMap, "app", "mode", false),
        Ok(Some(b"prod".to_vec()))
    );
    assert_eq!(
        c.key(Kind::ConfigMap, "app", "color", false),
        Err("couldn't find key color in ConfigMap ns/app".into())
    );
    assert_eq!(c.key(Kind::ConfigMap, "app", "color", true), Ok(None));
    assert_eq!(
        c.key(Kind::Secret, "gone", "x", false),
        Err("secret \"gone\" not found".into())
    );
    assert_eq!(c.key(Kind::Secret, "gone", "x", true), Ok(None));
}

#[test]
fn volume_files_follow_items_and_modes() {
    let v: Volume = serde_json::from_value(json!({"name": "v", "configMap": {"name": "app", "defaultMode": 0o600,
        "items": [{"key": "mode", "path": "conf/mode"}, {"key": "color", "path": "color", "mode": 0o444}]}}))
    .unwrap();
    let c = cfg(&[(
        Kind::ConfigMap,
        "app",
        Some(&[("mode", "prod"), ("color", "blue"), ("other", "x")]),
    )]);
    let files = volume_files(&v, &c).unwrap();
    assert_eq!(files.len(), 2, "only the items");
    assert_eq!(files["conf/mode"], (b"prod".to_vec(), 0o600));
    assert_eq!(files["color"], (b"blue".to_vec(), 0o444));
    let missing = cfg(&[(Kind::ConfigMap, "app", Some(&[("mode", "prod")]))]);
    assert_eq!(
        volume_files(&v, &missing),
        Err("configmap references non-existent config key: color".into())
    );
    assert_eq!(
        volume_files(&v, &cfg(&[])),
        Err("configmap \"app\" not found".into())
    );
}

#[test]
fn publishing_swaps_the_whole_content_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, (Vec<u8>, u32)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), (v.as_bytes().to_vec(), 0o644)))
            .collect()
    };
    assert!(publish(dir.path(), &files(&[("a", "1"), ("sub/b", "2")]), None).unwrap());
    assert_eq!(std::fs::read_to_string(dir.path().join("a")).unwrap(), "1");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/b")).unwrap(),
        "2"
    );
    assert_eq!(
        std::fs::read_link(dir.path().join("a")).unwrap(),
        Path::new("..data/a")
    );
    let first = std::fs::read_link(dir.path().join("..data")).unwrap();
    assert!(
        !publish(dir.path(), &files(&[("a", "1"), ("sub/b", "2")]), None).unwrap(),
        "unchanged: no write"
    );
    assert!(publish(dir.path(), &files(&[("a", "3")]), None).unwrap());
    assert_eq!(std::fs::read_to_string(dir.path().join("a")).unwrap(), "3");
    assert!(!dir.path().join("sub").exists(), "a key that went is gone");
    assert!(
        !dir.path().join(first).exists(),
        "the old content is removed"
    );
    let dirs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("..2")
        })
        .count();
    assert_eq!(dirs, 1);
}

#[test]
fn item_paths_stay_inside_the_volume() {
    let v: Volume = serde_json::from_value(json!({"name": "v", "configMap": {"name": "app",
        "items": [{"key": "mode", "path": "../../etc/passwd"}]}}))
    .unwrap();
    let c = cfg(&[(Kind::ConfigMap, "app", Some(&[("mode", "prod")]))]);
    assert_eq!(
        volume_files(&v, &c),
        Err("invalid path \"../../etc/passwd\": must not contain '..'".into())
    );
}
