//! The storage interface: a revisioned key-value store with watch, as etcd is.
//!
//! Only the apiserver talks to a [`Store`]. Two backends implement it and pass
//! the same conformance suite (`tests/store_conformance.rs`):
//! - [`etcd::EtcdStore`]: etcd v3 through etcd-client;
//! - [`embedded::EmbeddedStore`]: the zero-setup default, in process: a SQLite
//!   database in the kine style k3s uses (one table of revisions), fsync'd on
//!   every commit with group commit.
//!
//! Watches are bounded end to end: a store watch is an [`mpsc`] channel of
//! [`WATCH_CHANNEL_CAPACITY`] events; a consumer that lets it fill up is cut
//! off (the channel closes) and resumes from its last revision, as
//! Kubernetes' cacher closes unresponsive watchers.

pub mod embedded;
pub mod etcd;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

/// One stored value with its revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key (reset when it is re-created).
    pub create_revision: i64,
    /// Revision of the last write to the key: the object's resourceVersion.
    pub mod_revision: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// A change to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEvent {
    pub kind: EventKind,
    /// For Put: the new value; for Delete: the key with an empty value.
    pub kv: KeyValue,
    /// The value before this change (always present for Delete and for updates).
    pub prev: Option<KeyValue>,
    /// The revision of this change.
    pub revision: i64,
}

impl StoreEvent {
    /// A Put that created the key (rather than updating it).
    pub fn is_create(&self) -> bool {
        self.kind == EventKind::Put && self.kv.create_revision == self.kv.mod_revision
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("key not found: {0}")]
    NotFound(String),
    #[error("key already exists: {0}")]
    AlreadyExists(String),
    /// The precondition revision did not match; `current` is the key's revision now.
    #[error("revision conflict on {key}: current revision {current}")]
    Conflict { key: String, current: i64 },
    /// The requested revision was compacted away.
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Gone { requested: i64, compacted: i64 },
    #[error("storage error: {0}")]
    Internal(String),
}

/// Items a watch delivers; an `Err` ends the watch.
pub type WatchItem = Result<StoreEvent, StoreError>;
pub type WatchReceiver = mpsc::Receiver<WatchItem>;

/// Events a store watch may hold for a consumer that has not read them yet.
pub const WATCH_CHANNEL_CAPACITY: usize = 10_000;

/// A revisioned key-value store with prefix lists and watches.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates `key`; fails with `AlreadyExists` if it exists. Returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<i64, StoreError>;

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;

    /// All keys under `prefix`, sorted, at `revision` (None = latest), with the
    /// revision the list was read at.
    async fn list(
        &self,
        prefix: &str,
        revision: Option<i64>,
    ) -> Result<(Vec<KeyValue>, i64), StoreError>;

    /// At most `limit` keys under `prefix` from `start` (a whole key,
    /// inclusive) on, sorted, at `revision`: a large collection read a page
    /// at a time, so that no reader holds all of it at once.
    async fn list_page(
        &self,
        prefix: &str,
        start: &str,
        revision: i64,
        limit: usize,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let (kvs, _) = self.list(prefix, Some(revision)).await?;
        Ok(kvs
            .into_iter()
            .filter(|kv| kv.key.as_str() >= start)
            .take(limit)
            .collect())
    }

    /// Replaces `key` if its mod revision equals `expected` (None = unconditional).
    /// `NotFound` if it does not exist, `Conflict` if the revision differs.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<i64>,
    ) -> Result<i64, StoreError>;

    /// Deletes `key` if its mod revision equals `expected` (None = unconditional).
    /// Returns the deleted value and the revision of the deletion.
    async fn delete(&self, key: &str, expected: Option<i64>)
        -> Result<(KeyValue, i64), StoreError>;

    /// Every change under `prefix` with revision >= `start_revision`, in order.
    /// `Gone` if `start_revision` was compacted.
    async fn watch(&self, prefix: &str, start_revision: i64) -> Result<WatchReceiver, StoreError>;

    /// The latest revision.
    async fn current_revision(&self) -> Result<i64, StoreError>;

    /// Forgets history before `revision`.
    async fn compact(&self, revision: i64) -> Result<(), StoreError>;
}

/// A store error as the API reports it for `info`'s object `name`.
pub(crate) fn store_err(
    info: &minik8s_api::registry::ResourceInfo,
    name: &str,
    e: StoreError,
) -> minik8s_api::ApiError {
    match e {
        StoreError::NotFound(_) => minik8s_api::ApiError::not_found(info, name),
        StoreError::AlreadyExists(_) => minik8s_api::ApiError::already_exists(info, name),
        StoreError::Conflict { .. } => minik8s_api::ApiError::modified(info, name),
        StoreError::Gone {
            requested,
            compacted,
        } => minik8s_api::ApiError::gone(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        StoreError::Internal(m) => minik8s_api::ApiError::internal(m),
    }
}
