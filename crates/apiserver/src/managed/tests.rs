use super::*;

const NOW: &str = "2026-11-24T16:00:00Z";

fn writer<'a>(manager: &'a str, api_version: &'a str) -> Writer<'a> {
    Writer {
        manager,
        api_version,
        subresource: "",
        now: NOW,
    }
}

fn config_map(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "default"}, "data": data})
}

fn deployment(image: &str, replicas: Option<i64>) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image,
                                          "ports": [{"containerPort": 80}]}]}
            }
        }
    });
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

#[test]
fn an_objects_fields_are_written_as_fields_v1() {
    let set = fields_of(&deployment("nginx:1", Some(2)));
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        })
    );
    // Reading it back gives the same set.
    assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()), set);
    assert!(set
        .paths()
        .contains(&".spec.template.spec.containers[name=\"nginx\"].image".to_string()));
}

#[test]
fn a_create_belongs_to_its_manager_and_an_update_moves_what_it_changed() {
    let mut created = config_map(json!({"a": "1", "b": "2"}));
    track_update(None, &mut created, &writer("kubectl-create", "v1"));
    let e = entries(&created);
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].manager.as_str(), e[0].operation.as_str()),
        ("kubectl-create", UPDATE)
    );
    assert_eq!(
        e[0].fields.to_fields_v1(),
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}})
    );

    let mut edited = created.clone();
    edited["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    carry_over(Some(&created), &mut edited);
    edited["data"]["a"] = json!("changed");
    edited["data"]["c"] = json!("3");
    track_update(Some(&created), &mut edited, &writer("kubectl-edit", "v1"));
    let e = entries(&edited);
    assert_eq!(
        e[0].fields.to_fields_v1(),
        json!({"f:data": {".": {}, "f:b": {}}})
    );
    assert_eq!(e[1].manager, "kubectl-edit");
    assert_eq!(
        e[1].fields.to_fields_v1(),
        json!({"f:data": {"f:a": {}, "f:c": {}}})
    );

    // Removing a field takes it from everyone; an entry left empty goes.
    let mut trimmed = edited.clone();
    trimmed["data"] = json!({"b": "2"});
    track_update(Some(&edited), &mut trimmed, &writer("kubectl-edit", "v1"));
    let e = entries(&trimmed);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].manager, "kubectl-create");
}

#[test]
fn apply_after_an_edit_conflicts_and_force_takes_the_field() {
    let applied = config_map(json!({"a": "1", "b": "2"}));
    let live = apply(None, &applied, &writer("kubectl", "v1"), false).unwrap();
    assert_eq!(live["data"], json!({"a": "1", "b": "2"}));
    let e = entries(&live);
    assert_eq!(
        (e[0].manager.as_str(), e[0].operation.as_str()),
        ("kubectl", APPLY)
    );

    let mut edited = live.clone();
    edited["data"]["a"] = json!("edited");
    track_update(Some(&live), &mut edited, &writer("kubectl-edit", "v1"));

    // Applying the same configuration again would undo the edit: a conflict.
    let err = apply(Some(&edited), &applied, &writer("kubectl", "v1"), false).unwrap_err();
    let ApplyError::Conflicts(c) = err;
    assert_eq!(
        conflict_message(&c),
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
    );

    // Applying the edited value shares the field: no conflict.
    let agreeing = config_map(json!({"a": "edited", "b": "2"}));
    let shared = apply(Some(&edited), &agreeing, &writer("kubectl", "v1"), false).unwrap();
    let e = entries(&shared);
    assert!(e
        .iter()
        .all(|e| e.fields.to_fields_v1()["f:data"].get("f:a").is_some()));

    // Forcing takes the field from the editor.
    let forced = apply(Some(&edited), &applied, &writer("kubectl", "v1"), true).unwrap();
    assert_eq!(forced["data"]["a"], "1");
    let e = entries(&forced);
    assert_eq!(e.len(), 1, "the editor owned nothing else: {e:?}");
    assert_eq!(e[0].manager, "kubectl");
}

#[test]
fn fields_an_applier_drops_are_removed_unless_someone_else_owns_them() {
    let first = config_map(json!({"a": "1", "b": "2", "c": "3"}));
    let live = apply(None, &first, &writer("kubectl", "v1"), false).unwrap();
    // Another applier sets c to the same value: both own it.
    let other = config_map(json!({"c": "3"}));
    let live = apply(Some(&live), &other, &writer("ci", "v1"), false).unwrap();

    let second = config_map(json!({"a": "1"}));
    let out = apply(Some(&live), &second, &writer("kubectl", "v1"), false).unwrap();
    assert_eq!(out["data"], json!({"a": "1", "c": "3"}));

    // Dropping every label drops the map, not just its keys.
    let mut labelled = config_map(json!({"a": "1"}));
    labelled["metadata"]["labels"] = json!({"x": "1", "y": "2"});
    let live = apply(Some(&out), &labelled, &writer("kubectl", "v1"), false).unwrap();
    let out = apply(Some(&live), &second, &writer("kubectl", "v1"), false).unwrap();
    assert!(out["metadata"].get("labels").is_none(), "{out}");
}

#[test]
fn keyed_lists_merge_item_by_item_and_name_the_item_in_conflicts() {
    let live = apply(
        None,
        &deployment("nginx:1", Some(2)),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap();
    // A sidecar added by someone else stays when the applier applies again.
    let mut with_sidecar = live.clone();
    with_sidecar["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "log", "image": "busybox"}));
    track_update(
        Some(&live),
        &mut with_sidecar,
        &writer("injector", "apps/v1"),
    );
    let again = apply(
        Some(&with_sidecar),
        &deployment("nginx:2", Some(2)),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap();
    let names: Vec<&str> = again["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nginx", "log"]);
    assert_eq!(
        again["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );

    // `kubectl set image` then apply: the conflict names the container.
    let mut set_image = again.clone();
    set_image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:3");
    set_image["spec"]["replicas"] = json!(5);
    track_update(
        Some(&again),
        &mut set_image,
        &writer("kubectl-set", "apps/v1"),
    );
    let ApplyError::Conflicts(c) = apply(
        Some(&set_image),
        &deployment("nginx:2", Some(2)),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap_err();
    assert_eq!(
        conflict_message(&c),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-set\" using apps/v1:\n\
         - .spec.replicas\n\
         - .spec.template.spec.containers[name=\"nginx\"].image"
    );
    // Leaving replicas out of the configuration leaves them to the scaler.
    let without_replicas = apply(
        Some(&set_image),
        &deployment("nginx:3", None),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap();
    assert_eq!(without_replicas["spec"]["replicas"], 5);
}

#[test]
fn a_selector_is_one_field() {
    let live = apply(
        None,
        &deployment("nginx:1", None),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap();
    let mut changed = deployment("nginx:1", None);
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "web", "tier": "x"}});
    let mut edited = live.clone();
    edited["spec"]["selector"] = changed["spec"]["selector"].clone();
    track_update(Some(&live), &mut edited, &writer("kubectl-edit", "apps/v1"));
    let ApplyError::Conflicts(c) = apply(
        Some(&edited),
        &deployment("nginx:1", None),
        &writer("kubectl", "apps/v1"),
        false,
    )
    .unwrap_err();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].field, ".spec.selector");
}

#[test]
fn the_first_apply_to_an_untracked_object_conflicts_with_what_was_there() {
    let untracked = config_map(json!({"a": "old"}));
    let ApplyError::Conflicts(c) = apply(
        Some(&untracked),
        &config_map(json!({"a": "new"})),
        &writer("kubectl", "v1"),
        false,
    )
    .unwrap_err();
    assert_eq!(c[0].manager, "\"before-first-apply\" using v1");
}

#[test]
fn a_client_may_clear_or_replace_managed_fields() {
    let mut created = config_map(json!({"a": "1"}));
    track_update(None, &mut created, &writer("kubectl-create", "v1"));
    let mut cleared = created.clone();
    cleared["metadata"]["managedFields"] = json!([{}]);
    carry_over(Some(&created), &mut cleared);
    track_update(Some(&created), &mut cleared, &writer("kubectl-edit", "v1"));
    assert!(cleared["metadata"].get("managedFields").is_none());

    // An update that changes nothing of the data leaves ownership as it was.
    let mut relabelled = created.clone();
    relabelled["metadata"]["labels"] = json!({"x": "y"});
    track_update(
        Some(&created),
        &mut relabelled,
        &writer("kubectl-label", "v1"),
    );
    let e = entries(&relabelled);
    assert_eq!(
        e[0].fields.to_fields_v1(),
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    assert_eq!(
        e[1].fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
    );
}

#[test]
fn finalizers_are_a_set() {
    let mut live = config_map(json!({}));
    live["metadata"]["finalizers"] = json!(["a/x"]);
    let live = apply(None, &live, &writer("one", "v1"), false).unwrap();
    let mut mine = config_map(json!({}));
    mine["metadata"]["finalizers"] = json!(["b/y"]);
    let both = apply(Some(&live), &mine, &writer("two", "v1"), false).unwrap();
    assert_eq!(both["metadata"]["finalizers"], json!(["a/x", "b/y"]));
    mine["metadata"]["finalizers"] = json!([]);
    let back = apply(Some(&both), &mine, &writer("two", "v1"), false).unwrap();
    assert_eq!(back["metadata"]["finalizers"], json!(["a/x"]));
}
