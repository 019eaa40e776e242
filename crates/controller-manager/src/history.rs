//! ControllerRevisions: the template history of StatefulSets and DaemonSets
//! (what `kubectl rollout history` lists and `rollout undo` patches back).
//!
//! A revision is named `<owner>-<hash of the template>`, records the
//! template as a strategic merge patch that replaces it
//! (`{"spec":{"template":{..., "$patch":"replace"}}}`) and carries a number.
//! A template that comes back (an undo) takes the next number again, as in
//! Kubernetes, so the history reads newest last.

use crate::ownership::controller_ref;
use minik8s_api::hash::revision_hash;
use minik8s_api::k8s::api::apps::v1::ControllerRevision;
use minik8s_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use minik8s_api::registry;
use minik8s_client::{Client, ClientError, DeleteParams};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The name of the revision of `template` for the owner `name`.
pub fn revision_name(owner_name: &str, template: &Value) -> String {
    format!("{owner_name}-{}", revision_hash(template))
}

/// Revisions that may be pruned: none in `keep`, oldest first, beyond `limit`.
pub fn prunable(revisions: &[(String, i64)], keep: &[&str], limit: usize) -> Vec<String> {
    let mut old: Vec<&(String, i64)> = revisions
        .iter()
        .filter(|(n, _)| !keep.contains(&n.as_str()))
        .collect();
    old.sort_by_key(|(_, r)| *r);
    let excess = old.len().saturating_sub(limit);
    old.into_iter()
        .take(excess)
        .map(|(n, _)| n.clone())
        .collect()
}

/// How many unused old revisions to keep (`revisionHistoryLimit`, default 10).
pub fn history_limit(spec_limit: Option<i32>) -> usize {
    spec_limit.unwrap_or(10).max(0) as usize
}

/// Who owns the history, and how its revisions are labelled.
pub struct Owner<'a> {
    pub kind: &'static str,
    pub meta: &'a ObjectMeta,
    /// The owner's pod template.
    pub template: Value,
    /// The label that carries the hash (`controller.kubernetes.io/hash` for
    /// StatefulSets, `controller-revision-hash` for DaemonSets).
    pub hash_label: &'static str,
}

/// Makes sure the revision `name` of the owner's live template exists and is
/// the newest: created with the next number, or renumbered when an older
/// template came back.
pub async fn ensure_revision(
    client: &Client,
    owner: &Owner<'_>,
    existing: &[Arc<ControllerRevision>],
    name: &str,
) -> Result<(), ClientError> {
    let ns = owner
        .meta
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api = client.dynamic(registry::of::<ControllerRevision>(), Some(&ns));
    let newest = existing
        .iter()
        .filter_map(|r| r.revision)
        .max()
        .unwrap_or(0);
    if let Some(found) = existing
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
    {
        if found.revision.unwrap_or(0) < newest {
            let patch = json!({"revision": newest + 1});
            api.patch(
                name,
                None,
                minik8s_client::rest::content::MERGE_PATCH,
                &patch,
            )
            .await?;
        }
        return Ok(());
    }
    let hash = name.rsplit('-').next().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = owner
        .template
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    labels.insert(owner.hash_label.into(), hash.to_string());
    let mut template = owner.template.clone();
    template["$patch"] = json!("replace");
    let rev = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [controller_ref("apps/v1", owner.kind, owner.meta)]},
        "data": {"spec": {"template": template}},
        "revision": newest + 1});
    match api.create(&rev).await {
        Ok(_) => Ok(()),
        Err(e) if e.api().is_some_and(|a| a.code == 409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes the revisions beyond `limit` that nothing uses (`keep`).
pub async fn prune(
    client: &Client,
    ns: &str,
    revisions: &[Arc<ControllerRevision>],
    keep: &[&str],
    limit: usize,
) {
    let all: Vec<(String, i64)> = revisions
        .iter()
        .filter_map(|r| Some((r.metadata.name.clone()?, r.revision.unwrap_or(0))))
        .collect();
    let api = client.dynamic(registry::of::<ControllerRevision>(), Some(ns));
    for name in prunable(&all, keep, limit) {
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            if !e.is_not_found() {
                tracing::debug!(%name, error = %e, "pruning revision");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keeps_revisions_in_use_and_the_newest_old_ones() {
        let revs: Vec<(String, i64)> = (1..=5).map(|i| (format!("r{i}"), i)).collect();
        assert_eq!(prunable(&revs, &["r1", "r5"], 2), ["r2"]);
        assert!(prunable(&revs, &[], 10).is_empty());
    }
}
