//! What the server serves, from its discovery documents: resource names,
//! aliases and scopes, looked up as kubectl does.

use super::*;
use minik8s_api::registry::{Info, Text};
use std::borrow::Cow;
use std::sync::Arc;

/// Resources the server offers, from discovery.
pub(crate) struct Discovery {
    pub(crate) resources: Vec<Info>,
}

/// What kubectl 1.37 asks discovery for: the aggregated form, else plain JSON.
const AGGREGATED_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// One resource as discovery lists it.
struct Listed<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
    plural: &'a str,
    singular: &'a str,
    namespaced: bool,
    short_names: &'a Value,
    categories: &'a Value,
}

fn strings_of(v: &Value) -> Cow<'static, [Text]> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| Cow::Owned(s.to_string()))
        .collect()
}

impl Listed<'_> {
    fn info(&self) -> Info {
        let owned = |s: &str| -> Text { Cow::Owned(s.to_string()) };
        Arc::new(ResourceInfo {
            group: owned(self.group),
            version: owned(self.version),
            kind: owned(self.kind),
            plural: owned(self.plural),
            singular: owned(self.singular),
            short_names: strings_of(self.short_names),
            namespaced: self.namespaced,
            subresources: Cow::Borrowed(&[]),
            categories: strings_of(self.categories),
            columns: Cow::Borrowed(&[]),
        })
    }
}

/// A group/version that could not be discovered: said once, as kubectl
/// warns, and the rest of the server is still used.
fn unavailable(gv: &str, why: &str) {
    eprintln!("Warning: couldn't get resource list for {gv}: {why}");
}

impl Discovery {
    /// Reads `/api` and `/apis`, in the aggregated form when the server
    /// answers with it (two requests), else `/api/v1` and every
    /// `/apis/<group>/<version>` too. A group/version that cannot be
    /// discovered (an extension apiserver that is down) is warned about and
    /// left out, as the real kubectl does.
    pub(crate) async fn load(client: &Client) -> Result<Discovery, ClientError> {
        let mut resources = Vec::new();
        for root in ["/api", "/apis"] {
            let resp = client
                .send(reqwest::Method::GET, root, None, AGGREGATED_ACCEPT)
                .await?;
            let aggregated = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ct| ct.contains("as=APIGroupDiscoveryList"));
            let doc: Value = resp
                .json()
                .await
                .map_err(|e| ClientError::Decode(e.to_string()))?;
            if aggregated {
                Self::from_aggregated(&doc, &mut resources);
            } else {
                Self::from_legacy(client, root, &doc, &mut resources).await?;
            }
        }
        Ok(Discovery { resources })
    }

    /// The preferred (first) version of every group of an `APIGroupDiscoveryList`.
    fn from_aggregated(doc: &Value, out: &mut Vec<Info>) {
        for g in doc["items"].as_array().into_iter().flatten() {
            let group = g["metadata"]["name"].as_str().unwrap_or("");
            let Some(v) = g["versions"].as_array().and_then(|v| v.first()) else {
                continue;
            };
            let version = v["version"].as_str().unwrap_or("");
            if v["freshness"] == "Stale" {
                let gv = if group.is_empty() {
                    version.to_string()
                } else {
                    format!("{group}/{version}")
                };
                unavailable(&gv, "stale GroupVersion discovery");
                continue;
            }
            for r in v["resources"].as_array().into_iter().flatten() {
                out.push(
                    Listed {
                        group,
                        version,
                        kind: r["responseKind"]["kind"].as_str().unwrap_or(""),
                        plural: r["resource"].as_str().unwrap_or(""),
                        singular: r["singularResource"].as_str().unwrap_or(""),
                        namespaced: r["scope"] == "Namespaced",
                        short_names: &r["shortNames"],
                        categories: &r["categories"],
                    }
                    .info(),
                );
            }
        }
    }

    /// The legacy documents: `/api`'s versions or `/apis`' preferred ones,
    /// each read from its own `APIResourceList`.
    async fn from_legacy(
        client: &Client,
        root: &str,
        doc: &Value,
        out: &mut Vec<Info>,
    ) -> Result<(), ClientError> {
        let gvs: Vec<(String, String)> = if root == "/api" {
            vec![(String::new(), "v1".into())]
        } else {
            doc["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| {
                    let pv = g.pointer("/preferredVersion/version")?.as_str()?;
                    Some((g["name"].as_str().unwrap_or("").to_string(), pv.to_string()))
                })
                .collect()
        };
        for (group, version) in gvs {
            let (path, gv) = if group.is_empty() {
                (format!("/api/{version}"), version.clone())
            } else {
                (
                    format!("/apis/{group}/{version}"),
                    format!("{group}/{version}"),
                )
            };
            let list = match client.get_json(&path).await {
                Ok(list) => list,
                // The core group is the server itself: it must answer.
                Err(e) if group.is_empty() => return Err(e),
                Err(e) => {
                    unavailable(&gv, &e.to_string());
                    continue;
                }
            };
            for r in list["resources"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or("");
                if name.contains('/') {
                    continue;
                }
                out.push(
                    Listed {
                        group: &group,
                        version: &version,
                        kind: r["kind"].as_str().unwrap_or(""),
                        plural: name,
                        singular: r["singularName"].as_str().unwrap_or(""),
                        namespaced: r["namespaced"].as_bool().unwrap_or(true),
                        short_names: &r["shortNames"],
                        categories: &r["categories"],
                    }
                    .info(),
                );
            }
        }
        Ok(())
    }

    /// The resource a user means by `name` (plural, singular, short name, kind, `plural.group`).
    pub(crate) fn resolve(&self, name: &str) -> Result<Info> {
        self.resources
            .iter()
            .find(|r| r.matches_alias(name))
            .cloned()
            .ok_or_else(|| anyhow!("the server doesn't have a resource type \"{name}\""))
    }

    /// The resource of a manifest's apiVersion and kind.
    pub(crate) fn for_manifest(&self, m: &Manifest) -> Result<Info> {
        let api_version = m.object["apiVersion"].as_str().unwrap_or("");
        let kind = m.object["kind"].as_str().unwrap_or("");
        self.resources.iter().find(|r| r.api_version() == api_version && r.kind == kind).cloned().ok_or_else(|| {
            anyhow!(
                "resource mapping not found for name: {:?} namespace: {:?} from {:?}: no matches for kind {kind:?} in version {api_version:?}\nensure CRDs are installed first",
                m.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
                m.object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(""),
                m.source
            )
        })
    }

    /// Expands `all` into the resources of category "all".
    pub(crate) fn resolve_list(&self, spec: &str) -> Result<Vec<Info>> {
        let mut out = Vec::new();
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            if part == "all" {
                out.extend(
                    self.resources
                        .iter()
                        .filter(|r| r.categories.iter().any(|c| c == "all"))
                        .cloned(),
                );
            } else {
                out.push(self.resolve(part)?);
            }
        }
        Ok(out)
    }
}
