//! The etcd v3 backend (etcd-client). Preconditions are transactions on
//! `create_revision` / `mod_revision`; list and watch map directly onto etcd's
//! ranged get (at a revision) and watch (from a revision, with `prev_kv`).

use super::{EventKind, KeyValue, Store, StoreError, StoreEvent, WatchReceiver};
use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use futures::StreamExt;
use tokio::sync::mpsc;

pub struct EtcdStore {
    client: Client,
}

fn map_err(e: etcd_client::Error) -> StoreError {
    let text = e.to_string();
    if text.contains("compacted") {
        StoreError::Gone {
            requested: 0,
            compacted: 0,
        }
    } else {
        StoreError::Internal(format!("etcd: {text}"))
    }
}

/// Runs `op` again when it did not reach etcd (a member is down and the
/// client's balancer still picked its endpoint: nothing was sent, so any
/// request may be repeated) and, for reads, when the connection broke
/// mid-request. Up to 4 tries, 50 to 200 ms apart: another member answers.
async fn retrying<T, F, Fut>(read: bool, mut op: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if attempt < 3 && retriable(&e.to_string(), read) => {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "etcd unreachable; trying another member");
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
            }
            other => return other,
        }
    }
}

/// Whether an etcd error may be retried (see [`retrying`]).
fn retriable(error: &str, read: bool) -> bool {
    let unreached = error.contains("connect error") || error.contains("Connection refused");
    let broken = error.contains("Unavailable")
        || error.contains("h2 protocol error")
        || error.contains("transport error");
    unreached || (read && broken)
}

fn convert(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    }
}

fn header_revision(h: Option<&etcd_client::ResponseHeader>) -> i64 {
    h.map(|h| h.revision()).unwrap_or(0)
}

impl EtcdStore {
    /// Connects to the comma-separated `endpoints` (`http://127.0.0.1:2379`).
    pub async fn connect(endpoints: &str) -> Result<Self, StoreError> {
        let eps: Vec<String> = endpoints
            .split(',')
            .map(|e| e.trim().trim_start_matches("http://").to_string())
            .filter(|e| !e.is_empty())
            .collect();
        let opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(std::time::Duration::from_secs(5))
            .with_timeout(std::time::Duration::from_secs(30));
        let client = Client::connect(eps, Some(opts)).await.map_err(map_err)?;
        let store = EtcdStore { client };
        // Fail at start-up, not at the first request, when etcd is unreachable.
        store.current_revision().await?;
        Ok(store)
    }

    /// Streams etcd's snapshot (`etcdctl snapshot save`) to `to`, through
    /// `<to>.partial` so a reader never sees half a file; its size in bytes.
    /// Restoring one is etcd's own job (`etcdctl snapshot restore`).
    pub async fn save_snapshot(&self, to: &std::path::Path) -> Result<u64, StoreError> {
        use std::io::Write;
        let io = |what: &str, e: std::io::Error| StoreError::Internal(format!("{what}: {e}"));
        let partial = to.with_extension("partial");
        let mut file = std::fs::File::create(&partial)
            .map_err(|e| io(&format!("creating {}", partial.display()), e))?;
        let mut stream = self
            .client
            .maintenance_client()
            .snapshot()
            .await
            .map_err(map_err)?;
        let mut written = 0u64;
        while let Some(chunk) = stream.message().await.map_err(map_err)? {
            file.write_all(chunk.blob())
                .map_err(|e| io(&format!("writing {}", partial.display()), e))?;
            written += chunk.blob().len() as u64;
        }
        file.sync_all()
            .map_err(|e| io(&format!("syncing {}", partial.display()), e))?;
        std::fs::rename(&partial, to)
            .map_err(|e| io(&format!("renaming to {}", to.display()), e))?;
        Ok(written)
    }

    /// Replaces every key under `prefix` with `kvs` (a restore, the master
    /// stopped), then compacts at the new revision: the writes carry the
    /// revision past everything handed out before, so a client resuming
    /// from before gets 410 Gone and relists. Returns the new revision.
    pub async fn replace_all(&self, prefix: &str, kvs: &[KeyValue]) -> Result<i64, StoreError> {
        let mut kv = self.client.kv_client();
        kv.delete(
            prefix,
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .map_err(map_err)?;
        // etcd allows 128 operations in one transaction.
        for chunk in kvs.chunks(64) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|k| TxnOp::put(k.key.as_str(), k.value.to_vec(), None))
                .collect();
            kv.txn(Txn::new().and_then(ops)).await.map_err(map_err)?;
        }
        let revision = self.current_revision().await?;
        self.client
            .kv_client()
            .compact(
                revision,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await
            .map_err(map_err)?;
        Ok(revision)
    }

    /// The value of `key` in the `else` branch of a failed transaction.
    fn else_value(resp: &etcd_client::TxnResponse) -> Option<KeyValue> {
        resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(convert),
            _ => None,
        })
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<i64, StoreError> {
        let txn = || {
            Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key, value.to_vec(), None)])
        };
        let resp = retrying(false, || async { self.client.kv_client().txn(txn()).await })
            .await
            .map_err(map_err)?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        Ok(header_revision(resp.header()))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let resp = retrying(true, || async {
            self.client.kv_client().get(key, None).await
        })
        .await
        .map_err(map_err)?;
        Ok(resp.kvs().first().map(convert))
    }

    async fn list(
        &self,
        prefix: &str,
        revision: Option<i64>,
    ) -> Result<(Vec<KeyValue>, i64), StoreError> {
        let mut opts = GetOptions::new().with_prefix();
        if let Some(r) = revision {
            opts = opts.with_revision(r);
        }
        let resp = retrying(true, || async {
            self.client
                .kv_client()
                .get(prefix, Some(opts.clone()))
                .await
        })
        .await
        .map_err(|e| match map_err(e) {
            StoreError::Gone { .. } => StoreError::Gone {
                requested: revision.unwrap_or(0),
                compacted: 0,
            },
            other => other,
        })?;
        let rev = revision.unwrap_or_else(|| header_revision(resp.header()));
        Ok((resp.kvs().iter().map(convert).collect(), rev))
    }

    async fn list_page(
        &self,
        prefix: &str,
        start: &str,
        revision: i64,
        limit: usize,
    ) -> Result<Vec<KeyValue>, StoreError> {
        // etcd's range [start, end of the prefix), sorted by key.
        let mut end = prefix.as_bytes().to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let opts = GetOptions::new()
            .with_range(end)
            .with_revision(revision)
            .with_limit(limit.min(i64::MAX as usize) as i64);
        let start = start.max(prefix);
        let resp = retrying(true, || async {
            self.client.kv_client().get(start, Some(opts.clone())).await
        })
        .await
        .map_err(|e| match map_err(e) {
            StoreError::Gone { .. } => StoreError::Gone {
                requested: revision,
                compacted: 0,
            },
            other => other,
        })?;
        Ok(resp.kvs().iter().map(convert).collect())
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<i64>,
    ) -> Result<i64, StoreError> {
        let cmp = match expected {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev),
            None => Compare::create_revision(key, CompareOp::Greater, 0),
        };
        let txn = || {
            Txn::new()
                .when([cmp.clone()])
                .and_then([TxnOp::put(key, value.to_vec(), None)])
                .or_else([TxnOp::get(key, None)])
        };
        let resp = retrying(false, || async { self.client.kv_client().txn(txn()).await })
            .await
            .map_err(map_err)?;
        if resp.succeeded() {
            return Ok(header_revision(resp.header()));
        }
        match Self::else_value(&resp) {
            None => Err(StoreError::NotFound(key.to_string())),
            Some(kv) => Err(StoreError::Conflict {
                key: key.to_string(),
                current: kv.mod_revision,
            }),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected: Option<i64>,
    ) -> Result<(KeyValue, i64), StoreError> {
        let cmp = match expected {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev),
            None => Compare::create_revision(key, CompareOp::Greater, 0),
        };
        let txn = || {
            Txn::new()
                .when([cmp.clone()])
                .and_then([TxnOp::delete(
                    key,
                    Some(etcd_client::DeleteOptions::new().with_prev_key()),
                )])
                .or_else([TxnOp::get(key, None)])
        };
        let resp = retrying(false, || async { self.client.kv_client().txn(txn()).await })
            .await
            .map_err(map_err)?;
        if resp.succeeded() {
            let rev = header_revision(resp.header());
            let prev = resp.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Delete(d) => d.prev_kvs().first().map(convert),
                _ => None,
            });
            return prev
                .map(|p| (p, rev))
                .ok_or_else(|| StoreError::NotFound(key.to_string()));
        }
        match Self::else_value(&resp) {
            None => Err(StoreError::NotFound(key.to_string())),
            Some(kv) => Err(StoreError::Conflict {
                key: key.to_string(),
                current: kv.mod_revision,
            }),
        }
    }

    async fn watch(&self, prefix: &str, start_revision: i64) -> Result<WatchReceiver, StoreError> {
        let opts = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(start_revision);
        let (watcher, mut stream) = retrying(true, || async {
            self.client
                .watch_client()
                .watch(prefix, Some(opts.clone()))
                .await
        })
        .await
        .map_err(map_err)?;
        // Bounded: a slow consumer holds back this task, and etcd holds back the
        // stream (etcd keeps slow watchers' events on its side).
        let (tx, rx) = mpsc::channel(super::WATCH_CHANNEL_CAPACITY);
        // The first response confirms creation, or reports compaction.
        tokio::spawn(async move {
            let _watcher = watcher; // dropping it would cancel the watch
            while let Some(msg) = stream.next().await {
                let resp = match msg {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(map_err(e))).await;
                        return;
                    }
                };
                if resp.compact_revision() > 0 {
                    let _ = tx
                        .send(Err(StoreError::Gone {
                            requested: start_revision,
                            compacted: resp.compact_revision(),
                        }))
                        .await;
                    return;
                }
                if resp.canceled() {
                    let _ = tx
                        .send(Err(StoreError::Internal(format!(
                            "etcd watch canceled: {}",
                            resp.cancel_reason()
                        ))))
                        .await;
                    return;
                }
                for ev in resp.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let kv = convert(kv);
                    let event = StoreEvent {
                        kind: match ev.event_type() {
                            EventType::Put => EventKind::Put,
                            EventType::Delete => EventKind::Delete,
                        },
                        revision: kv.mod_revision,
                        prev: ev.prev_kv().map(convert),
                        kv,
                    };
                    if tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
            }
            let _ = tx
                .send(Err(StoreError::Internal("etcd watch stream ended".into())))
                .await;
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, StoreError> {
        let resp = retrying(true, || async {
            self.client
                .kv_client()
                .get(
                    "/registry/",
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await
        })
        .await
        .map_err(map_err)?;
        Ok(header_revision(resp.header()))
    }

    async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        match self.client.kv_client().compact(revision, None).await {
            Ok(_) => Ok(()),
            // Compacting to an already-compacted revision is not an error for us.
            Err(e) if e.to_string().contains("compacted") => Ok(()),
            Err(e) => Err(map_err(e)),
        }
    }
}
