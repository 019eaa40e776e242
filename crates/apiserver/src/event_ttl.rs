//! `--event-ttl`: Events are deleted a while (1 h by default) after their
//! last change, as Kubernetes stores them in etcd under an expiring lease.
//! Without it, a component that records events in a loop fills the store.
//!
//! ```text
//!  every ttl/4 (1 s .. 1 min): list /registry/core/events/ from the store
//!    last change = max(lastTimestamp, eventTime, series.lastObservedTime,
//!                      creationTimestamp, managedFields[].time)
//!    older than now - ttl  →  delete (if unchanged since the list)
//! ```

use crate::ApiServer;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Event;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// When an Event last changed: the newest of the times it carries and of
/// its writes (`managedFields[].time`, stamped by the server on each write).
pub fn last_change(event: &Value) -> Option<DateTime<Utc>> {
    let writes = event
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("time")?.as_str());
    [
        "/lastTimestamp",
        "/eventTime",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .filter_map(|p| event.pointer(p)?.as_str())
    .chain(writes)
    .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
    .map(|t| t.with_timezone(&Utc))
    .max()
}

impl ApiServer {
    /// Deletes Events older than `ttl`, in the background, for the life of the process.
    pub fn spawn_event_reaper(self: &Arc<Self>, ttl: Duration) {
        let srv = Arc::downgrade(self);
        let every = (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
        let prefix = minik8s_api::registry::of::<Event>().key_prefix(None);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(srv) = srv.upgrade() else { return };
                match srv.reap_events(&prefix, ttl).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(deleted = n, "expired events deleted"),
                    Err(e) => tracing::warn!(error = %e, "deleting expired events"),
                }
            }
        });
    }

    async fn reap_events(
        &self,
        prefix: &str,
        ttl: Duration,
    ) -> Result<usize, crate::store::StoreError> {
        let cutoff = Utc::now() - chrono::Duration::from_std(ttl).unwrap_or_default();
        let (kvs, _) = self.store.list(prefix, None).await?;
        let mut deleted = 0;
        for kv in kvs {
            let expired = serde_json::from_slice::<Value>(&kv.value)
                .ok()
                .and_then(|ev| last_change(&ev))
                .is_some_and(|t| t < cutoff);
            // A conflict means it changed since the list: it lives on.
            if expired
                && self
                    .store
                    .delete(&kv.key, Some(kv.mod_revision))
                    .await
                    .is_ok()
            {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_change_is_the_newest_time_an_event_carries() {
        let ev = json!({"metadata": {"creationTimestamp": "2026-11-24T10:00:00Z"},
            "firstTimestamp": "2026-11-24T10:00:00Z", "lastTimestamp": "2026-11-24T11:30:00Z"});
        assert_eq!(
            last_change(&ev).unwrap().to_rfc3339(),
            "2026-11-24T11:30:00+00:00"
        );
        let series = json!({"metadata": {"creationTimestamp": "2026-11-24T10:00:00Z"},
            "eventTime": "2026-11-24T10:00:00.000000Z", "series": {"lastObservedTime": "2026-11-24T12:00:00.000000Z"}});
        assert_eq!(
            last_change(&series).unwrap().to_rfc3339(),
            "2026-11-24T12:00:00+00:00"
        );
        assert!(last_change(&json!({})).is_none());
    }
}
