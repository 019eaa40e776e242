//! Finding a kind the client was not built with (a custom resource) through
//! the server's discovery documents, as client-go's RESTMapper does: the HPA
//! scales a custom resource's `/scale` this way.

use crate::rest::{Client, ClientError};
use minik8s_api::meta::strings;
use minik8s_api::registry::{self, Info, ResourceSpec, Subresource};
use serde_json::Value;
use std::sync::Arc;

impl Client {
    /// The resource of `kind` in `api_version`: a built-in one, else the one
    /// the server's discovery lists (None when it serves no such kind).
    pub async fn resource_for_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Info>, ClientError> {
        if let Some(info) = registry::by_kind(api_version, kind) {
            return Ok(Some(registry::shared(info)));
        }
        let Some((group, version)) = api_version.split_once('/') else {
            return Ok(None);
        };
        let list = match self.get_json(&format!("/apis/{group}/{version}")).await {
            Ok(list) => list,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(spec_from_discovery(&list, group, version, kind).map(|s| Arc::new(s.entry())))
    }
}

/// What discovery found of the namespaced resources a namespace's deletion
/// must empty besides the built-in kinds.
#[derive(Debug, Default)]
pub struct ServedResources {
    /// Namespaced custom (or aggregated) resources that can be listed and deleted.
    pub namespaced: Vec<Info>,
    /// `group/version: error` for each group version discovery could not read.
    pub failed: Vec<String>,
}

impl Client {
    /// The namespaced resources of every API group the client was not built
    /// with (custom resources, aggregated APIs), read from each group's
    /// preferred version as client-go's `ServerPreferredNamespacedResources`.
    /// A group version that cannot be read is reported, not fatal: the caller
    /// deletes what it can and says what it could not see.
    pub async fn served_custom_resources(&self) -> Result<ServedResources, ClientError> {
        let groups = self.get_json("/apis").await?;
        let built_in = |group: &str| registry::REGISTRY.iter().any(|i| i.group == group);
        let versions: Vec<(String, String)> = groups["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| {
                let group = g["name"].as_str()?;
                let version = g["preferredVersion"]["version"].as_str()?;
                (!built_in(group)).then(|| (group.to_string(), version.to_string()))
            })
            .collect();
        let lists = versions.iter().map(|(group, version)| async move {
            let list = self.get_json(&format!("/apis/{group}/{version}")).await;
            (group, version, list)
        });
        let mut served = ServedResources::default();
        for (group, version, list) in futures::future::join_all(lists).await {
            match list {
                Ok(list) => served.namespaced.extend(
                    deletable_namespaced(&list, group, version)
                        .into_iter()
                        .map(|s| Arc::new(s.entry())),
                ),
                Err(e) => served.failed.push(format!("{group}/{version}: {e}")),
            }
        }
        Ok(served)
    }
}

/// The namespaced resources of an `APIResourceList` that can be listed and deleted.
fn deletable_namespaced(list: &Value, group: &str, version: &str) -> Vec<ResourceSpec> {
    let resources = list["resources"].as_array().map_or(&[][..], Vec::as_slice);
    let has_verb = |r: &Value, verb: &str| {
        r["verbs"]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == verb))
    };
    resources
        .iter()
        .filter(|r| {
            r["namespaced"] == true
                && r["name"].as_str().is_some_and(|n| !n.contains('/'))
                && has_verb(r, "list")
                && has_verb(r, "delete")
        })
        .filter_map(|main| spec_of(resources, main, group, version))
        .collect()
}

/// The spec of `kind` in an `APIResourceList`.
fn spec_from_discovery(
    list: &Value,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<ResourceSpec> {
    let resources = list["resources"].as_array()?;
    let main = resources
        .iter()
        .find(|r| r["kind"] == kind && r["name"].as_str().is_some_and(|n| !n.contains('/')))?;
    spec_of(resources, main, group, version)
}

/// The spec of one main resource (`main`) among its list's entries.
fn spec_of(resources: &[Value], main: &Value, group: &str, version: &str) -> Option<ResourceSpec> {
    let kind = main["kind"].as_str()?;
    let plural = main["name"].as_str()?.to_string();
    let subresources = [Subresource::Status, Subresource::Scale]
        .into_iter()
        .filter(|s| {
            resources
                .iter()
                .any(|r| r["name"] == format!("{plural}/{}", s.name()))
        })
        .collect();
    Some(ResourceSpec {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        singular: main["singularName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        short_names: strings(&main["shortNames"]),
        namespaced: main["namespaced"].as_bool().unwrap_or(true),
        subresources,
        categories: strings(&main["categories"]),
        columns: Vec::new(),
        plural,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_custom_kind_is_read_from_its_resource_list() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "stable.example.com/v1", "resources": [
            {"name": "crontabs", "singularName": "crontab", "namespaced": true, "kind": "CronTab", "shortNames": ["ct"], "verbs": ["get"]},
            {"name": "crontabs/status", "singularName": "", "namespaced": true, "kind": "CronTab", "verbs": ["get"]},
            {"name": "crontabs/scale", "singularName": "", "namespaced": true, "kind": "Scale", "group": "autoscaling", "version": "v1", "verbs": ["get"]}]});
        let spec = spec_from_discovery(&list, "stable.example.com", "v1", "CronTab").unwrap();
        assert_eq!(spec.plural, "crontabs");
        assert_eq!(spec.subresources, [Subresource::Status, Subresource::Scale]);
        let info = spec.entry();
        assert_eq!(
            info.collection_path(Some("ns")),
            "/apis/stable.example.com/v1/namespaces/ns/crontabs"
        );
        assert!(spec_from_discovery(&list, "stable.example.com", "v1", "Other").is_none());
    }

    #[test]
    fn only_namespaced_resources_that_can_be_listed_and_deleted_are_emptied() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "example.com/v1", "resources": [
            {"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ["list", "delete", "get"]},
            {"name": "widgets/status", "singularName": "", "namespaced": true, "kind": "Widget", "verbs": ["get", "patch"]},
            {"name": "clusterwidgets", "singularName": "clusterwidget", "namespaced": false, "kind": "ClusterWidget", "verbs": ["list", "delete"]},
            {"name": "reviews", "singularName": "review", "namespaced": true, "kind": "Review", "verbs": ["create"]}]});
        let specs = deletable_namespaced(&list, "example.com", "v1");
        let names: Vec<&str> = specs.iter().map(|s| s.plural.as_str()).collect();
        assert_eq!(names, ["widgets"]);
        assert_eq!(specs[0].subresources, [Subresource::Status]);
        assert_eq!(specs[0].kind, "Widget");
    }
}
