//! LIST: the objects under a resource's prefix at one revision, filtered by
//! label and field selectors, a page at a time when the client asks.
//!
//! ```text
//!  GET /api/v1/pods ──▶ store.list(prefix, rev) ──▶ select: selectors? ─▶ page ─▶ metadata
//!                       ──▶ JSON: each stored value, resourceVersion stamped, in 256 KiB chunks
//!                       ──▶ Table / Value: each item decoded, then a row / the item
//! ```
//!
//! Items are never all decoded at once: a decoded object takes about ten
//! times its JSON in memory, and a few clients listing together made the
//! master's biggest heap peak. A JSON answer copies each stored object
//! with only its metadata parsed; so does a GET of one object ([`ApiServer::read_json`]).

use crate::pagination::{self, Page};
use crate::params::Params;
use crate::store::{store_err, KeyValue, StoreError};
use crate::stored::{decode_object, write_stamped};
use crate::table;
use crate::ApiServer;
use minik8s_api::registry::ResourceInfo;
use minik8s_api::selector::{FieldSelector, Selector};
use minik8s_api::ApiError;
use serde_json::{json, Value};
use std::time::Duration;

impl ApiServer {
    pub(crate) fn selectors(
        &self,
        info: &ResourceInfo,
        params: &Params,
    ) -> Result<(Selector, FieldSelector), ApiError> {
        let labels = Selector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let supported = self.strategy(info).field_selectors();
        let supported: Vec<&str> = supported.iter().map(|f| &**f).collect();
        let fields = FieldSelector::parse(params.get("fieldSelector").unwrap_or(""), &supported)
            .map_err(ApiError::bad_request)?;
        Ok((labels, fields))
    }

    /// One object as the API serves it in JSON, copied from the store with
    /// its resourceVersion stamped and nothing else parsed (a GET needs no
    /// decoded object: a node's heartbeat GETs its Node every 10 s).
    pub async fn read_json(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let kv = self.stored(info, ns, name).await?;
        let mut out = Vec::with_capacity(kv.value.len() + 32);
        if write_stamped(&mut out, &kv.value, kv.mod_revision) {
            return Ok(out);
        }
        decode_object(&kv.value, kv.mod_revision)
            .and_then(|obj| serde_json::to_vec(&obj).ok())
            .ok_or_else(|| ApiError::internal(format!("stored object {} is not JSON", kv.key)))
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

    /// The LIST answer as JSON (the same document as [`Self::list`]),
    /// items written as stored with their resourceVersion stamped. A large
    /// answer is streamed in chunks as it is written: a LIST of 50,000 pods
    /// (150 MiB) built in one buffer spent most of its time having the
    /// kernel clear fresh pages for it, and held it all until sent.
    pub async fn list_json(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<axum::body::Body, ApiError> {
        let selection = self.select(info, ns, params).await?;
        let head = json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": selection.metadata});
        let mut out = serde_json::to_vec(&head).unwrap_or_default();
        // `{"kind":…,"metadata":{…}}` → `{"kind":…,"metadata":{…},"items":[…]}`
        out.pop();
        out.extend_from_slice(b",\"items\":[");
        let size: usize = selection.items().map(|kv| kv.value.len()).sum();
        if size < STREAM_OVER {
            selection.write_items(&mut out, |_| true);
            out.extend_from_slice(b"]}");
            return Ok(axum::body::Body::from(out));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::convert::Infallible>>(4);
        tokio::task::spawn_blocking(move || {
            let mut chunk = out;
            let sent = selection.write_items(&mut chunk, |chunk| {
                if chunk.len() < CHUNK {
                    return true;
                }
                let full = std::mem::replace(chunk, Vec::with_capacity(CHUNK + CHUNK / 4));
                // A client gone away: nothing more to write.
                tx.blocking_send(Ok(full)).is_ok()
            });
            if sent {
                chunk.extend_from_slice(b"]}");
                let _ = tx.blocking_send(Ok(chunk));
            }
        });
        let chunks = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        });
        Ok(axum::body::Body::from_stream(chunks))
    }

    /// The LIST answer as a `Table` (`kubectl get`): one row per item, made
    /// as the item is decoded.
    pub async fn list_table(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Value, ApiError> {
        let strategy = self.strategy(info);
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

    /// The LIST itself: hands every item of the page to `emit`, decoded,
    /// in key order, and returns the list's metadata.
    async fn list_each(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
        mut emit: impl FnMut(Value),
    ) -> Result<Value, ApiError> {
        let selection = self.select(info, ns, params).await?;
        for kv in selection.items() {
            if let Some(obj) = decode_object(&kv.value, kv.mod_revision) {
                emit(obj);
            }
        }
        Ok(selection.metadata)
    }

    /// The revision a LIST without `continue` reads at, as Kubernetes'
    /// `resourceVersion` and `resourceVersionMatch` say: unset or "0", the
    /// latest; `Exact`, exactly that one (410 once compacted); otherwise
    /// (`NotOlderThan`, or no match) the latest, which is not older. A
    /// version the store has not reached is waited for a moment (a client
    /// may have it from a newer apiserver's watch), then answered 504
    /// `ResourceVersionTooLarge`, as Kubernetes' watch cache answers it.
    async fn list_revision(&self, params: &Params) -> Result<Option<i64>, ApiError> {
        let rv = params.get("resourceVersion").unwrap_or("");
        if rv.is_empty() || rv == "0" {
            return Ok(None);
        }
        let wanted: i64 = rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
        let internal = |e: StoreError| ApiError::internal(e.to_string());
        let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
        loop {
            let current = self.store.current_revision().await.map_err(internal)?;
            if wanted <= current {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ApiError::too_large_resource_version(wanted, current));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let exact = params.get("resourceVersionMatch") == Some("Exact");
        Ok(exact.then_some(wanted))
    }

    /// Chooses the items of a LIST (selectors, then the page) and its
    /// metadata: resourceVersion, and `continue`/`remainingItemCount` when
    /// the page is not the last. Filtering decodes each object; nothing
    /// decoded is kept.
    async fn select(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        params: &Params,
    ) -> Result<Selection, ApiError> {
        crate::watch::validate_list(params)?;
        let (labels, fields) = self.selectors(info, params)?;
        let page = Page::parse(
            params.get("limit"),
            params.get("continue"),
            params.get("resourceVersion"),
        )?;
        let prefix = info.key_prefix(ns);
        let (kvs, rev) = match page.revision {
            // A continued list reads where its first page read.
            Some(at) => match self.store.list(&prefix, Some(at)).await {
                Err(StoreError::Gone { .. }) => return Err(pagination::expired()),
                other => other.map_err(|e| store_err(info, "", e))?,
            },
            None => {
                let at = self.list_revision(params).await?;
                self.store
                    .list(&prefix, at)
                    .await
                    .map_err(|e| store_err(info, "", e))?
            }
        };
        let start = page.start.map(|s| format!("{prefix}{s}"));
        let from = start.map_or(0, |s| kvs.partition_point(|kv| kv.key < s));
        let unfiltered = labels.is_empty() && fields.is_empty();
        let matches = |kv: &KeyValue| {
            unfiltered
                || decode_object(&kv.value, kv.mod_revision)
                    .is_some_and(|o| labels.matches_object(&o) && fields.matches(&o))
        };
        let limit = page.limit.unwrap_or(usize::MAX);
        let mut picked = Vec::new();
        let mut last = None;
        for (i, kv) in kvs.iter().enumerate().skip(from) {
            if picked.len() == limit {
                break;
            }
            if matches(kv) {
                picked.push(i);
                last = Some(i);
            }
        }
        let mut metadata = json!({"resourceVersion": rev.to_string()});
        if let Some(last) = last.filter(|_| picked.len() == limit) {
            let rest = &kvs[last + 1..];
            // A next page only if something on it matches (decoded lazily).
            if rest.iter().any(matches) {
                let key = &kvs[last].key;
                let key = key.strip_prefix(&prefix).unwrap_or(key);
                metadata["continue"] = json!(pagination::continue_token(rev, key));
                // Kubernetes counts what is left only when nothing is filtered out.
                if unfiltered {
                    metadata["remainingItemCount"] = json!(rest.len());
                }
            }
        }
        Ok(Selection {
            kvs,
            picked,
            metadata,
        })
    }
}

/// How long a LIST waits for the store to reach the resourceVersion it
/// asks for (Kubernetes' watch cache waits 3 s).
const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// A LIST answer's bytes are streamed in chunks of this size when its
/// items hold more than [`STREAM_OVER`] bytes.
const CHUNK: usize = 256 << 10;
const STREAM_OVER: usize = 1 << 20;

/// The items a LIST answers with, chosen before any is written.
struct Selection {
    kvs: Vec<KeyValue>,
    /// Indexes into `kvs`, in key order.
    picked: Vec<usize>,
    metadata: Value,
}

impl Selection {
    fn items(&self) -> impl Iterator<Item = &KeyValue> {
        self.picked.iter().map(|&i| &self.kvs[i])
    }

    /// Writes the items, comma-separated, as the API serves them; after
    /// each, `flush` may hand the buffer on (false: stop, answers false).
    fn write_items(&self, out: &mut Vec<u8>, mut flush: impl FnMut(&mut Vec<u8>) -> bool) -> bool {
        let mut first = true;
        for kv in self.items() {
            let mark = out.len();
            if !first {
                out.push(b',');
            }
            let written = write_stamped(out, &kv.value, kv.mod_revision)
                || decode_object(&kv.value, kv.mod_revision)
                    .is_some_and(|obj| serde_json::to_writer(&mut *out, &obj).is_ok());
            if !written {
                out.truncate(mark);
                continue;
            }
            first = false;
            if !flush(out) {
                return false;
            }
        }
        true
    }
}
