//! Discovery (`/api`, `/apis`, `/api/v1`, `/apis/G`, `/apis/G/V`), `/version`
//! and the minimal `/openapi/v3` kubectl needs to trust server-side validation.
//! Everything is derived from the server's live registry, so a kind registered
//! or unregistered at run time shows up, or goes, on the next request.

use crate::auth::reviews::REVIEWS;
use crate::metrics_api;
use crate::strategy::ServedKinds;
use minik8s_api::registry::{self, Info, ResourceInfo};
use minik8s_wire::openapi::{self, Flavor};
use serde_json::{json, Value};
use std::sync::Arc;

pub fn version() -> Value {
    use minik8s_api::release;
    json!({"major": release::MAJOR, "minor": release::MINOR, "emulationMajor": release::MAJOR,
           "emulationMinor": release::MINOR, "minCompatibilityMajor": release::MAJOR,
           "minCompatibilityMinor": "36", "gitVersion": release::GIT_VERSION,
           "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
           "buildDate": "2026-11-28T00:00:00Z", "goVersion": "go1.25.4", "compiler": "gc",
           "platform": "linux/amd64"})
}

pub fn api_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:8080"}]})
}

/// A group with its versions, the preferred (stored) one first.
fn group_entry(group: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": gvs, "preferredVersion": gvs[0].clone()})
}

/// Every named group served here and its versions: the registry's, then the versions
/// served besides the stored ones (autoscaling/v1), then metrics.k8s.io.
pub fn served_groups(reg: &ServedKinds) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let owned = |(g, v): (&str, &str)| (g.to_string(), v.to_string());
    let alternates = minik8s_wire::versions::ALTERNATE_VERSIONS
        .iter()
        .map(|a| owned((&a.group, &a.version)));
    for (g, v) in reg
        .group_versions()
        .into_iter()
        .chain(alternates)
        .chain([owned((metrics_api::GROUP, metrics_api::VERSION))])
        .chain(REVIEWS.iter().map(|r| owned((&r.group, &r.version))))
        .filter(|(g, _)| !g.is_empty())
    {
        match out.iter_mut().find(|(name, _)| *name == g) {
            Some((_, versions)) if !versions.contains(&v) => versions.push(v),
            Some(_) => {}
            None => out.push((g, vec![v])),
        }
    }
    out
}

pub fn api_group_list(reg: &ServedKinds) -> Value {
    let groups: Vec<Value> = served_groups(reg)
        .iter()
        .map(|(g, versions)| group_entry(g, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &ServedKinds, group: &str) -> Option<Value> {
    served_groups(reg)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, versions)| {
            let mut e = group_entry(&g, &versions);
            e["kind"] = json!("APIGroup");
            e["apiVersion"] = json!("v1");
            e
        })
}

/// The `APIResourceList` of one group/version, or None if it is not served.
pub fn resource_list(reg: &ServedKinds, group: &str, version: &str) -> Option<Value> {
    if (group, version) == (metrics_api::GROUP, metrics_api::VERSION) {
        return Some(metrics_api::resource_list());
    }
    if version == "v1" {
        if let Some(list) = crate::auth::reviews::resource_list(group) {
            return Some(list);
        }
    }
    let mut resources = Vec::new();
    // Kinds stored in another version but served in this one too.
    let alternates = minik8s_wire::versions::ALTERNATE_VERSIONS
        .iter()
        .filter(|a| a.group == group && a.version == version)
        .filter_map(|a| reg.by_plural(&a.storage_group, &a.storage_version, &a.plural));
    for r in reg
        .all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .chain(alternates)
    {
        let mut entry = json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                               "verbs": verbs(reg, &r)});
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for sub in r.subresources.iter().copied() {
            let mut e = json!({"name": format!("{}/{}", r.plural, sub.name()), "singularName": "", "namespaced": r.namespaced,
                               "kind": r.kind, "verbs": sub.verbs()});
            match sub {
                registry::Subresource::Scale => {
                    e["group"] = json!("autoscaling");
                    e["version"] = json!("v1");
                    e["kind"] = json!("Scale");
                }
                registry::Subresource::Binding => e["kind"] = json!("Binding"),
                registry::Subresource::Token => {
                    e["group"] = json!("authentication.k8s.io");
                    e["version"] = json!("v1");
                    e["kind"] = json!("TokenRequest");
                }
                registry::Subresource::Exec => e["kind"] = json!("PodExecOptions"),
                registry::Subresource::Attach => e["kind"] = json!("PodAttachOptions"),
                registry::Subresource::PortForward => e["kind"] = json!("PodPortForwardOptions"),
                registry::Subresource::Eviction => {
                    e["group"] = json!("policy");
                    e["version"] = json!("v1");
                    e["kind"] = json!("Eviction");
                }
                _ => {}
            }
            resources.push(e);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// The verbs discovery lists for a resource (kubectl reads them, e.g. to know
/// whether `delete --all` may send one deletecollection).
fn verbs(reg: &ServedKinds, info: &ResourceInfo) -> Vec<&'static str> {
    let mut v = vec!["create", "delete"];
    if reg.strategy(info).delete_collection() {
        v.push("deletecollection");
    }
    v.extend(["get", "list", "patch", "update", "watch"]);
    v
}

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A stable hash of the served kinds, so kubectl's cached documents stay valid until they change.
fn schema_hash(reg: &ServedKinds) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in reg.all() {
        (&r.group, &r.version, &r.kind, &r.plural).hash(&mut h);
        // A custom resource's schema changes with its CRD.
        if let Some(schema) = reg.strategy(&r).openapi_schema() {
            schema.to_string().hash(&mut h);
        }
    }
    format!("{:016X}", h.finish())
}

/// The kinds served in a version besides their stored one (autoscaling/v1
/// HPAs, events.k8s.io/v1 Events), as entries of that version: made once
/// from the built-in tables (both sides are built-in kinds, always served).
fn alternate_infos() -> impl Iterator<Item = Info> {
    static INFOS: std::sync::LazyLock<Vec<Info>> = std::sync::LazyLock::new(|| {
        minik8s_wire::versions::ALTERNATE_VERSIONS
            .iter()
            .filter_map(|a| {
                let stored = minik8s_api::REGISTRY.iter().find(|r| {
                    (&*r.group, &*r.version, &*r.plural)
                        == (&*a.storage_group, &*a.storage_version, &*a.plural)
                })?;
                Some(Arc::new(ResourceInfo {
                    group: a.group.clone(),
                    version: a.version.clone(),
                    ..stored.clone()
                }))
            })
            .collect()
    });
    INFOS.iter().cloned()
}

/// The review APIs' entries (create-only kinds), as discovery lists them.
fn review_infos() -> impl Iterator<Item = Info> {
    REVIEWS.iter().map(registry::shared)
}

pub fn openapi_root(reg: &ServedKinds) -> Value {
    let hash = schema_hash(reg);
    let mut paths = serde_json::Map::new();
    let mut gvs = reg.group_versions();
    for r in review_infos().chain(alternate_infos()) {
        let gv = (r.group.to_string(), r.version.to_string());
        if !gvs.contains(&gv) {
            gvs.push(gv);
        }
    }
    for (g, v) in gvs {
        let key = gv_key(&g, &v);
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// The OpenAPI v3 document of one group/version: a PATCH operation per kind
/// that accepts `fieldValidation`, which is what kubectl's validator looks for.
pub fn openapi_gv(reg: &ServedKinds, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let mut paths = serde_json::Map::new();
    let kinds: Vec<Info> = reg
        .all()
        .into_iter()
        .chain(review_infos())
        .chain(alternate_infos())
        .filter(|r| r.group == group && r.version == version)
        .collect();
    for r in &kinds {
        let url = if r.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}/{{name}}",
                r.gv_path(),
                r.plural
            )
        } else {
            format!("{}/{}/{{name}}", r.gv_path(), r.plural)
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
        ]);
        let op = |verb: &str| {
            json!({"operationId": format!("{verb}{}", r.kind), "x-kubernetes-action": verb,
                   "x-kubernetes-group-version-kind": gvk, "parameters": params,
                   "responses": {"200": {"description": "OK"}}})
        };
        paths.insert(url, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    if paths.is_empty() {
        return None;
    }
    let mut schemas = openapi::definitions(&with_messages(&kinds), Flavor::V3);
    schemas.extend(openapi::custom_definitions(
        &with_schemas(reg, &kinds),
        Flavor::V3,
    ));
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": minik8s_api::release::GIT_VERSION}, "paths": paths, "components": {"schemas": schemas}}),
    )
}

/// Kinds with a schema (the built-in ones), as (group, version, kind, message).
fn with_messages(kinds: &[Info]) -> Vec<(&str, &str, &str, String)> {
    kinds
        .iter()
        .filter_map(|r| {
            let message = openapi::message_for(&r.api_version(), &r.kind)?;
            Some((&*r.group, &*r.version, &*r.kind, message))
        })
        .collect()
}

/// Kinds whose strategy has a schema (custom resources), as (group, version, kind, schema).
fn with_schemas<'a>(
    reg: &ServedKinds,
    kinds: &'a [Info],
) -> Vec<(&'a str, &'a str, &'a str, Value)> {
    kinds
        .iter()
        .filter_map(|r| {
            let schema = reg.strategy(r).openapi_schema()?;
            Some((&*r.group, &*r.version, &*r.kind, schema))
        })
        .collect()
}

/// The OpenAPI v2 document (`/openapi/v2` as JSON): every served kind's
/// definitions; no paths.
pub fn openapi_v2(reg: &ServedKinds) -> Value {
    let mut kinds = reg.all();
    kinds.extend(review_infos());
    kinds.extend(alternate_infos());
    let mut definitions = openapi::definitions(&with_messages(&kinds), Flavor::V2);
    definitions.extend(openapi::custom_definitions(
        &with_schemas(reg, &kinds),
        Flavor::V2,
    ));
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": minik8s_api::release::GIT_VERSION}, "paths": {}, "definitions": definitions})
}
