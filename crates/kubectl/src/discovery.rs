//! What the server serves, from its discovery documents: resource names,
//! aliases and scopes, looked up as kubectl does.

use super::*;

/// Resources the server offers, from discovery.
pub(crate) struct Discovery {
    pub(crate) resources: Vec<&'static ResourceInfo>,
}

pub(crate) fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

impl Discovery {
    /// Reads `/api/v1` and every `/apis/<group>/<version>`.
    pub(crate) async fn load(client: &Client) -> Result<Discovery, ClientError> {
        let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
        let groups = client.get_json("/apis").await?;
        for g in groups
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(pv) = g
                .pointer("/preferredVersion/version")
                .and_then(Value::as_str)
            {
                gvs.push((g["name"].as_str().unwrap_or("").to_string(), pv.to_string()));
            }
        }
        let mut resources = Vec::new();
        for (group, version) in gvs {
            let path = if group.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{group}/{version}")
            };
            let list = client.get_json(&path).await?;
            for r in list
                .get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = r["name"].as_str().unwrap_or("");
                if name.contains('/') {
                    continue;
                }
                let shorts: Vec<&'static str> = r
                    .get("shortNames")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(leak)
                    .collect();
                let info = ResourceInfo {
                    group: leak(&group),
                    version: leak(&version),
                    kind: leak(r["kind"].as_str().unwrap_or("")),
                    plural: leak(name),
                    singular: leak(r["singularName"].as_str().unwrap_or("")),
                    short_names: Box::leak(shorts.into_boxed_slice()),
                    namespaced: r["namespaced"].as_bool().unwrap_or(true),
                    subresources: &[],
                    categories: Box::leak(
                        r.get("categories")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(leak)
                            .collect::<Vec<_>>()
                            .into_boxed_slice(),
                    ),
                    columns: &[] as &[Column],
                };
                resources.push(&*Box::leak(Box::new(info)));
            }
        }
        Ok(Discovery { resources })
    }

    /// The resource a user means by `name` (plural, singular, short name, kind, `plural.group`).
    pub(crate) fn resolve(&self, name: &str) -> Result<&'static ResourceInfo> {
        self.resources
            .iter()
            .copied()
            .find(|r| r.matches_alias(name))
            .ok_or_else(|| anyhow!("the server doesn't have a resource type \"{name}\""))
    }

    /// The resource of a manifest's apiVersion and kind.
    pub(crate) fn for_manifest(&self, m: &Manifest) -> Result<&'static ResourceInfo> {
        let api_version = m.object["apiVersion"].as_str().unwrap_or("");
        let kind = m.object["kind"].as_str().unwrap_or("");
        self.resources.iter().copied().find(|r| r.api_version() == api_version && r.kind == kind).ok_or_else(|| {
            anyhow!(
                "resource mapping not found for name: {:?} namespace: {:?} from {:?}: no matches for kind {kind:?} in version {api_version:?}\nensure CRDs are installed first",
                m.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
                m.object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(""),
                m.source
            )
        })
    }

    /// Expands `all` into the resources of category "all".
    pub(crate) fn resolve_list(&self, spec: &str) -> Result<Vec<&'static ResourceInfo>> {
        let mut out = Vec::new();
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            if part == "all" {
                out.extend(
                    self.resources
                        .iter()
                        .copied()
                        .filter(|r| r.categories.contains(&"all")),
                );
            } else {
                out.push(self.resolve(part)?);
            }
        }
        Ok(out)
    }
}
