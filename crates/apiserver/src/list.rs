//! LIST: the objects under a resource's prefix at one revision, filtered by
//! label and field selectors, a page at a time when the client asks.
//!
//! ```text
//!  GET /api/v1/pods ──▶ store.list(prefix, rev) ──▶ for each stored value:
//!                          decode ─▶ selectors? ─▶ emit (JSON bytes | table row | Value)
//! ```
//!
//! Items are decoded one at a time and handed on at once: a LIST of 1,000
//! pods written straight to the answer's bytes never holds 1,000 decoded
//! objects (a decoded object takes about ten times its JSON in memory, and a
//! few clients listing together made the master's biggest heap peak).

use crate::pagination::{self, Page};
use crate::params::Params;
use crate::rest::store_err;
use crate::store::StoreError;
use crate::strategy;
use crate::table;
use crate::watch_cache::decode_object;
use crate::ApiServer;
use minik8s_api::registry::ResourceInfo;
use minik8s_api::selector::{FieldSelector, Selector};
use minik8s_api::ApiError;
use serde_json::{json, Value};

impl ApiServer {
    pub(crate) fn selectors(
        info: &ResourceInfo,
        params: &Params,
    ) -> Result<(Selector, FieldSelector), ApiError> {
        let labels = Selector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(
            params.get("fieldSelector").unwrap_or(""),
            &strategy::of(info).field_selectors(),
        )
        .map_err(ApiError::bad_request)?;
        Ok((labels, fields))
    }

    /// Lists objects (LIST) as one `<Kind>List` value, for callers inside the
    /// apiserver that work on the items.
    pub async fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Value, ApiError> {
        let mut items = Vec::new();
        let metadata = self
            .list_each(info, ns, params, |obj| items.push(obj))
            .await?;
        Ok(
            json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": metadata, "items": items}),
        )
    }

    /// The LIST answer as JSON bytes (the same document as [`Self::list`]),
    /// each item serialized as soon as it is decoded.
    pub async fn list_json(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Vec<u8>, ApiError> {
        let mut items = b"[".to_vec();
        let metadata = self
            .list_each(info, ns, params, |obj| {
                if items.len() > 1 {
                    items.push(b',');
                }
                // Writing a Value into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut items, &obj);
            })
            .await?;
        items.push(b']');
        let head = json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": metadata});
        let mut out = serde_json::to_vec(&head).unwrap_or_default();
        // `{"kind":…,"metadata":{…}}` → `{"kind":…,"metadata":{…},"items":[…]}`
        out.pop();
        out.extend_from_slice(b",\"items\":");
        out.extend_from_slice(&items);
        out.push(b'}');
        Ok(out)
    }

    /// The LIST answer as a `Table` (`kubectl get`): one row per item, made
    /// as the item is decoded.
    pub async fn list_table(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Value, ApiError> {
        let strategy = strategy::of(info);
        let cells = |o: &Value| strategy.cells(o);
        let mut rows = Vec::new();
        let metadata = self
            .list_each(info, ns, params, |obj| {
                rows.push(table::row(info, &cells, &obj))
            })
            .await?;
        let rv = metadata["resourceVersion"].as_str().unwrap_or("");
        let mut out = table::with_rows(info, rows, rv, true);
        // A page of a longer list: the Table carries the way on.
        out["metadata"] = metadata;
        Ok(out)
    }

    /// The LIST itself: hands every matching item of the page to `emit`, in
    /// key order, and returns the list's metadata (resourceVersion, and
    /// `continue`/`remainingItemCount` when the page is not the last).
    async fn list_each(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
        mut emit: impl FnMut(Value),
    ) -> Result<Value, ApiError> {
        crate::watch::validate_list(params)?;
        let (labels, fields) = Self::selectors(info, params)?;
        let page = Page::parse(
            params.get("limit"),
            params.get("continue"),
            params.get("resourceVersion"),
        )?;
        let prefix = info.key_prefix(ns);
        let (kvs, rev) = match self.store.list(&prefix, page.revision).await {
            Err(StoreError::Gone { .. }) if page.revision.is_some() => {
                return Err(pagination::expired())
            }
            other => other.map_err(|e| store_err(info, "", e))?,
        };
        let start = page.start.map(|s| format!("{prefix}{s}"));
        let from = start.map_or(0, |s| kvs.partition_point(|kv| kv.key < s));
        let unfiltered = labels.is_empty() && fields.is_empty();
        let matches = |obj: &Value| labels.matches_object(obj) && fields.matches(obj);
        let mut emitted = 0;
        let mut metadata = json!({"resourceVersion": rev.to_string()});
        for (i, kv) in kvs.iter().enumerate().skip(from) {
            let Some(obj) = decode_object(&kv.value, kv.mod_revision) else {
                continue;
            };
            if !matches(&obj) {
                continue;
            }
            emit(obj);
            emitted += 1;
            if page.limit.is_none_or(|l| emitted < l) {
                continue;
            }
            let rest = &kvs[i + 1..];
            // A next page only if something on it matches (decoded lazily).
            let more = unfiltered
                || rest.iter().any(|kv| {
                    decode_object(&kv.value, kv.mod_revision).is_some_and(|o| matches(&o))
                });
            if more && !rest.is_empty() {
                let last = kv.key.strip_prefix(&prefix).unwrap_or(&kv.key);
                metadata["continue"] = json!(pagination::continue_token(rev, last));
                // Kubernetes counts what is left only when nothing is filtered out.
                if unfiltered {
                    metadata["remainingItemCount"] = json!(rest.len());
                }
            }
            break;
        }
        Ok(metadata)
    }
}
