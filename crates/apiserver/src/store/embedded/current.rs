//! The newest value of every live key, kept in memory beside the database.
//!
//! ```text
//!  writer thread: COMMIT ──▶ current.apply(events) + revision = R   (one write lock)
//!  get(key) / list(prefix) at the latest revision ──▶ current (read lock), no SQL
//!  list at an older revision, watch replay ──▶ the database
//! ```
//!
//! The store is the only writer of its database, so this copy is exact:
//! it changes under the same lock as the published revision, and a reader
//! sees both from one moment. It is what makes reads cheap at scale: a
//! LIST of 50,000 pods no longer sorts them in SQLite, a node's heartbeat
//! reads its Node from memory, and each write's check of the key's current
//! revision no longer queries the table. etcd keeps an index in memory for
//! the same reason; Kubernetes' apiserver serves most reads from its watch
//! cache. The values are the same `Bytes` the watch events carry, so they
//! are held once.

use crate::store::{EventKind, KeyValue, StoreEvent};
use std::collections::BTreeMap;
use std::ops::Bound;

/// The live keys, sorted, with the revision they are current at.
#[derive(Default)]
pub(crate) struct Current {
    keys: BTreeMap<String, KeyValue>,
    /// The newest committed revision: `keys` is the state at this revision.
    pub revision: i64,
}

impl Current {
    /// The state as the database holds it at `revision`.
    pub fn load(rows: Vec<KeyValue>, revision: i64) -> Self {
        Current {
            keys: rows.into_iter().map(|kv| (kv.key.clone(), kv)).collect(),
            revision,
        }
    }

    pub fn get(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// The live keys in [`start`, `end`), at most `limit`, in key order.
    pub fn range(&self, start: &str, end: &str, limit: Option<usize>) -> Vec<KeyValue> {
        if start >= end {
            return Vec::new();
        }
        let range = self
            .keys
            .range::<str, _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(_, kv)| kv.clone());
        match limit {
            Some(n) => range.take(n).collect(),
            None => range.collect(),
        }
    }

    /// Takes in the committed changes of one group and its revision.
    pub fn apply<'a>(&mut self, events: impl Iterator<Item = &'a StoreEvent>, revision: i64) {
        for ev in events {
            match ev.kind {
                EventKind::Put => {
                    self.keys.insert(ev.kv.key.clone(), ev.kv.clone());
                }
                EventKind::Delete => {
                    self.keys.remove(&ev.kv.key);
                }
            }
        }
        self.revision = revision;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn kv(key: &str, rev: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Bytes::from(format!("v{rev}")),
            create_revision: rev,
            mod_revision: rev,
        }
    }

    fn put(key: &str, rev: i64) -> StoreEvent {
        StoreEvent {
            kind: EventKind::Put,
            kv: kv(key, rev),
            prev: None,
            revision: rev,
        }
    }

    #[test]
    fn changes_are_taken_in_and_ranges_stay_inside_their_prefix() {
        let mut current = Current::load(vec![kv("/a/1", 1), kv("/b/1", 2)], 2);
        let delete = StoreEvent {
            kind: EventKind::Delete,
            kv: kv("/b/1", 5),
            prev: Some(kv("/b/1", 2)),
            revision: 5,
        };
        current.apply([put("/a/2", 3), put("/a/1", 4), delete].iter(), 5);
        assert_eq!(current.revision, 5);
        assert_eq!(current.get("/a/1").unwrap().mod_revision, 4);
        assert!(current.get("/b/1").is_none());
        let keys = |v: Vec<KeyValue>| v.into_iter().map(|kv| kv.key).collect::<Vec<_>>();
        assert_eq!(keys(current.range("/a/", "/a0", None)), ["/a/1", "/a/2"]);
        assert_eq!(keys(current.range("/a/2", "/a0", None)), ["/a/2"]);
        assert_eq!(keys(current.range("/a/", "/a0", Some(1))), ["/a/1"]);
        assert!(current.range("/b/", "/b0", None).is_empty());
        assert!(current.range("/z", "/a", None).is_empty());
    }
}
