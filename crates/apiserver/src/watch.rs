//! HTTP watch: newline-delimited JSON events, flushed one by one, served from
//! the watch cache. Selectors are applied per event; an object that stops
//! matching is sent as DELETED and one that starts matching as ADDED.

use crate::params::{error_response, Params};
use crate::store::EventKind;
use crate::table;
use crate::watch_cache::CacheEvent;
use crate::ApiServer;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use minik8s_api::registry::Info;
use minik8s_api::selector::{FieldSelector, Selector};
use minik8s_api::ApiError;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Objects of a watch's initial state read from the store at a time (each
/// watcher holds one page while it sends it: 50 watchers starting together
/// hold 50 pages).
const INITIAL_PAGE: usize = 64;

/// Encoded events waiting for a watcher's connection: enough to keep the
/// socket busy, few enough that 50 watchers of large objects stay small
/// (the live feed behind it buffers what a slow watcher has not taken).
const WATCHER_BUFFER: usize = 32;

/// How often a bookmark is sent to watchers that allow them.
const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

struct Filter {
    namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        let ns_ok = match &self.namespace {
            Some(ns) => minik8s_api::meta::namespace(obj) == Some(ns.as_str()),
            None => true,
        };
        ns_ok && self.labels.matches_object(obj) && self.fields.matches(obj)
    }

    /// The event type this watcher sees for a change, if any.
    fn event_type(&self, ev: &CacheEvent) -> Option<&'static str> {
        if self
            .namespace
            .as_ref()
            .is_some_and(|ns| *ns != ev.namespace)
        {
            return None;
        }
        // Without selectors every object in the namespace matches: the
        // event's bytes are never decoded.
        let (now, before) = if self.labels.is_empty() && self.fields.is_empty() {
            (true, true)
        } else {
            let now = self.matches(&ev.object());
            (now, ev.prev_object().is_some_and(|p| self.matches(&p)))
        };
        match (ev.kind, ev.is_create()) {
            (EventKind::Delete, _) => now.then_some("DELETED"),
            (EventKind::Put, true) => now.then_some("ADDED"),
            (EventKind::Put, false) => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }
}

fn line(event_type: &str, object: &Value) -> Bytes {
    let mut v =
        serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

struct Encoder {
    info: Info,
    /// The kind's strategy, for its table's cells.
    strategy: crate::strategy::StrategyRef,
    table: bool,
    headers_sent: bool,
}

impl Encoder {
    /// A cache event as one line; plain JSON reuses the event's serialized object.
    fn encode_event(&mut self, event_type: &str, ev: &CacheEvent) -> Bytes {
        if self.table {
            return self.encode(event_type, &ev.object());
        }
        let obj = ev.object_json();
        let mut v = Vec::with_capacity(obj.len() + 32);
        v.extend_from_slice(b"{\"type\":\"");
        v.extend_from_slice(event_type.as_bytes());
        v.extend_from_slice(b"\",\"object\":");
        v.extend_from_slice(obj);
        v.extend_from_slice(b"}\n");
        Bytes::from(v)
    }

    fn encode(&mut self, event_type: &str, obj: &Value) -> Bytes {
        if self.table {
            let rv = minik8s_api::meta::resource_version(obj).to_string();
            let strategy = &self.strategy;
            let cells = |o: &Value| strategy.cells(o);
            let t = table::render(&self.info, &cells, &[obj], &rv, !self.headers_sent);
            self.headers_sent = true;
            line(event_type, &t)
        } else {
            line(event_type, obj)
        }
    }
}

/// How long a watch lasts: `timeoutSeconds`, else, like the real
/// apiserver, a random 30-60 min.
fn watch_timeout(params: &Params) -> Duration {
    match params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
    {
        Some(t) => Duration::from_secs(t),
        None => Duration::from_secs(1800 + rand::random::<u64>() % 1800),
    }
}

/// A watch response made of one ERROR event with `e`'s Status.
fn one_error(e: ApiError) -> Response {
    let event = line("ERROR", &e.to_status());
    stream_response(futures::stream::iter([Ok::<Bytes, std::io::Error>(event)]))
}

/// The client went away (its stream is dropped) or the feed had to end.
struct Ended;

/// One watcher's sending side: the initial state (when asked), then the
/// cache's backlog after `after`, then live events and bookmarks.
struct Feed {
    info: Info,
    filter: Filter,
    enc: Encoder,
    tx: mpsc::Sender<Bytes>,
    /// The revision the watch starts after (the initial state's).
    after: i64,
    bookmarks: bool,
}

impl Feed {
    async fn send(&self, bytes: Bytes) -> Result<(), Ended> {
        self.tx.send(bytes).await.map_err(|_| Ended)
    }

    /// The objects under `prefix` at `after` as ADDED events, `first` and
    /// the pages after it, then (a streaming list) the bookmark that ends
    /// the initial state.
    async fn send_initial(
        &mut self,
        store: &dyn crate::store::Store,
        prefix: &str,
        first: Option<Vec<crate::store::KeyValue>>,
        end_bookmark: bool,
    ) -> Result<(), Ended> {
        let mut page = first;
        while let Some(kvs) = page.take() {
            let full = kvs.len() == INITIAL_PAGE;
            let mut next = None;
            for kv in kvs {
                if let Some(obj) = crate::stored::decode_object(&kv.value, kv.mod_revision) {
                    if self.filter.matches(&obj) {
                        let bytes = self.enc.encode("ADDED", &obj);
                        self.send(bytes).await?;
                    }
                }
                next = Some(kv.key);
            }
            let Some(mut start) = next.filter(|_| full) else {
                break;
            };
            start.push('\0');
            match store
                .list_page(prefix, &start, self.after, INITIAL_PAGE)
                .await
            {
                Ok(kvs) => page = Some(kvs),
                Err(e) => {
                    // Compacted (or the store failed) mid-way: the client relists.
                    let status = match e {
                        crate::store::StoreError::Gone { .. } => {
                            ApiError::gone(format!("too old resource version: {}", self.after))
                        }
                        other => ApiError::internal(other.to_string()),
                    };
                    let _ = self.send(line("ERROR", &status.to_status())).await;
                    return Err(Ended);
                }
            }
        }
        if end_bookmark {
            // The end of the initial state, at the revision it was read at.
            let end = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(),
                "metadata": {"resourceVersion": self.after.to_string(),
                             "annotations": {"k8s.io/initial-events-end": "true"}}});
            self.send(line("BOOKMARK", &end)).await?;
        }
        Ok(())
    }

    /// The backlog, then live events and (when asked) periodic bookmarks,
    /// until the client goes or falls too far behind.
    async fn follow(
        &mut self,
        cache: &crate::watch_cache::WatchCache,
        sub: crate::watch_cache::Subscription,
    ) -> Result<(), Ended> {
        // The newest revision this watcher has been sent everything up
        // to: a bookmark must never claim more, or a client resuming from
        // it would skip the events still queued for it.
        let mut progress = self.after;
        for ev in sub.backlog {
            progress = progress.max(ev.revision);
            if let Some(t) = self.filter.event_type(&ev) {
                let bytes = self.enc.encode_event(t, &ev);
                self.send(bytes).await?;
            }
        }
        let mut live = sub.live;
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = self.tx.closed() => return Err(Ended),
                _ = tick.tick(), if self.bookmarks => {
                    // The cache publishes `latest` and sends its event under
                    // one lock: read first, an empty feed then means every
                    // event up to it has been received.
                    let latest = cache.latest();
                    if live.is_empty() {
                        progress = progress.max(latest);
                    }
                    let bm = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(),
                        "metadata": {"resourceVersion": progress.to_string()}});
                    self.send(line("BOOKMARK", &bm)).await?;
                }
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        if ev.revision <= self.after { continue; }
                        progress = progress.max(ev.revision);
                        if let Some(t) = self.filter.event_type(&ev) {
                            let bytes = self.enc.encode_event(t, &ev);
                            self.send(bytes).await?;
                        }
                    }
                    // A watcher too slow to keep up is closed; it resumes from its last version.
                    Err(broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed) => return Err(Ended),
                }
            }
        }
    }
}

impl ApiServer {
    pub async fn watch(
        &self,
        info: &Info,
        ns: Option<&str>,
        params: &Params,
        table: bool,
    ) -> Response {
        match self.start_watch(info, ns, params, table).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    }

    async fn start_watch(
        &self,
        info: &Info,
        ns: Option<&str>,
        params: &Params,
        table: bool,
    ) -> Result<Response, ApiError> {
        let (labels, fields) = self.selectors(info, params)?;
        let filter = Filter {
            namespace: ns.filter(|_| info.namespaced).map(str::to_string),
            labels,
            fields,
        };
        let cache = self
            .watch_cache(info)
            // Unregistered since the request was routed.
            .ok_or_else(ApiError::unknown_path)?;
        let bookmarks = params.flag("allowWatchBookmarks");
        let send_initial = streaming_list(params, bookmarks)?;
        let timeout = watch_timeout(params);
        let rv = params.get("resourceVersion").unwrap_or("");
        let internal = |e: crate::store::StoreError| ApiError::internal(e.to_string());

        // "" and "0", or a streaming list: start with synthetic ADDED events
        // for the current state, read at one revision a page at a time and
        // decoded one object at a time while sending: 50 watchers starting
        // at once must not each hold the whole list.
        let prefix = info.key_prefix(filter.namespace.as_deref());
        let (initial, after) = if rv.is_empty() || rv == "0" || send_initial {
            let at = self.store.current_revision().await.map_err(internal)?;
            let first = self
                .store
                .list_page(&prefix, &prefix, at, INITIAL_PAGE)
                .await
                .map_err(internal)?;
            (Some(first), at)
        } else {
            let n: i64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
            (None, n)
        };
        if after > cache.latest() {
            // Past this resource's newest event: fine up to the store's
            // revision; beyond it the client holds a version from before a
            // restore, and must relist (Kubernetes' ResourceVersionTooLarge).
            let current = self.store.current_revision().await.map_err(internal)?;
            if after > current {
                return Ok(one_error(ApiError::too_large_resource_version(
                    after, current,
                )));
            }
        }
        let sub = match cache.subscribe(after) {
            Ok(s) => s,
            // Too old: one ERROR event with a 410 Status, then the end of the stream.
            Err(oldest) => {
                let why = format!("too old resource version: {after} ({oldest})");
                return Ok(one_error(ApiError::gone(why)));
            }
        };
        let (tx, rx) = mpsc::channel::<Bytes>(WATCHER_BUFFER);
        let mut feed = Feed {
            info: info.clone(),
            filter,
            enc: Encoder {
                info: info.clone(),
                strategy: self.strategy(info),
                table,
                headers_sent: false,
            },
            tx,
            after,
            bookmarks,
        };
        let store = self.store.clone();
        let mut stop = self.shutting_down.subscribe();
        tokio::spawn(async move {
            let sent = async {
                feed.send_initial(&*store, &prefix, initial, send_initial)
                    .await?;
                feed.follow(&cache, sub).await
            };
            tokio::select! {
                _ = sent => {}
                _ = tokio::time::sleep(timeout) => {}
                _ = async { stop.wait_for(|down| *down).await.is_ok() } => {}
            }
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<Bytes, std::io::Error>(b), rx))
        });
        Ok(stream_response(stream))
    }
}

/// `sendInitialEvents` (the streaming list, Kubernetes' WatchList): whether
/// the watch starts with the current state and an `initial-events-end`
/// bookmark. Checked as Kubernetes checks ListOptions.
fn streaming_list(params: &Params, bookmarks: bool) -> Result<bool, ApiError> {
    let send = match params.get("sendInitialEvents") {
        None => return Ok(false),
        Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid sendInitialEvents {other:?}: must be true or false"
            )))
        }
    };
    let mut errs = Vec::new();
    if params.get("resourceVersionMatch") != Some("NotOlderThan") {
        errs.push("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
    }
    if send && !bookmarks {
        errs.push("allowWatchBookmarks: Forbidden: allowWatchBookmarks must be true if sendInitialEvents = true");
    }
    invalid_list_options(&errs).map_or(Ok(send), Err)
}

/// The options of a LIST (not a watch), checked as Kubernetes'
/// `ValidateListOptions` checks them.
pub(crate) fn validate_list(params: &Params) -> Result<(), ApiError> {
    let mut errs: Vec<String> = Vec::new();
    if let Some(matching) = params.get("resourceVersionMatch").filter(|m| !m.is_empty()) {
        let rv = params.get("resourceVersion").unwrap_or("");
        if rv.is_empty() {
            errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into());
        }
        if params.get("continue").is_some_and(|c| !c.is_empty()) {
            errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".into());
        }
        match matching {
            "Exact" if rv == "0" => errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into()),
            "Exact" | "NotOlderThan" => {}
            other => errs.push(format!("resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
        }
    }
    if params.get("sendInitialEvents").is_some() {
        errs.push("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into());
    }
    let errs: Vec<&str> = errs.iter().map(String::as_str).collect();
    invalid_list_options(&errs).map_or(Ok(()), Err)
}

/// Kubernetes' 422 for bad ListOptions, listing every error.
fn invalid_list_options(errs: &[&str]) -> Option<ApiError> {
    if errs.is_empty() {
        return None;
    }
    Some(ApiError::new(
        422,
        "Invalid",
        format!(
            "ListOptions.meta.k8s.io \"\" is invalid: {}",
            if errs.len() == 1 {
                errs[0].to_string()
            } else {
                format!("[{}]", errs.join(", "))
            }
        ),
    ))
}

fn stream_response<S>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
