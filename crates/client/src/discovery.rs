//! Finding a kind the client was not built with (a custom resource) through
//! the server's discovery documents, as client-go's RESTMapper does: the HPA
//! scales a custom resource's `/scale` this way.

use crate::rest::{Client, ClientError};
use minik8s_api::meta::strings;
use minik8s_api::registry::{self, ResourceInfo, ResourceSpec, Subresource};
use serde_json::Value;

impl Client {
    /// The resource of `kind` in `api_version`: a built-in one, else the one
    /// the server's discovery lists (None when it serves no such kind).
    pub async fn resource_for_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<&'static ResourceInfo>, ClientError> {
        if let Some(info) = registry::by_kind(api_version, kind) {
            return Ok(Some(info));
        }
        let Some((group, version)) = api_version.split_once('/') else {
            return Ok(None);
        };
        let list = match self.get_json(&format!("/apis/{group}/{version}")).await {
            Ok(list) => list,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(spec_from_discovery(&list, group, version, kind).map(|s| s.discovered()))
    }
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
        let info = spec.discovered();
        assert!(std::ptr::eq(info, spec.discovered()), "made once");
        assert_eq!(
            info.collection_path(Some("ns")),
            "/apis/stable.example.com/v1/namespaces/ns/crontabs"
        );
        assert!(spec_from_discovery(&list, "stable.example.com", "v1", "Other").is_none());
    }
}
