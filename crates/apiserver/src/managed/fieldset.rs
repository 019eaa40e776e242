//! Sets of field paths in the shape of `metadata.managedFields[].fieldsV1`, and
//! the walks that make them from objects: the fields an object sets, and the
//! fields that differ between two versions of an object.
//!
//! A path element is written as FieldsV1 writes it: `f:name` for a field,
//! `k:{"name":"nginx"}` for the item of a list keyed by its merge keys,
//! `v:"x"` for a value of a set-like list. A node "is a member" when the path
//! ending there is itself in the set (FieldsV1's `.`; a leaf always is).

use super::schema::{self, ListShape};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A set of field paths, kept as a tree (FieldsV1's shape).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The path ending at this node is in the set.
    pub member: bool,
    /// Children by path element (`f:…`, `k:…`, `v:…`, `i:…`).
    pub children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    fn child(&mut self, element: String) -> &mut FieldSet {
        self.children.entry(element).or_default()
    }

    /// Drops nodes with nothing in them.
    fn prune(&mut self) {
        for c in self.children.values_mut() {
            c.prune();
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    pub fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (el, oc) in &other.children {
            self.child(el.clone()).union_with(oc);
        }
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (el, c) in &self.children {
            let d = match other.children.get(el) {
                Some(oc) => c.difference(oc),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(el.clone(), d);
            }
        }
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (el, c) in &self.children {
            if let Some(oc) = other.children.get(el) {
                let i = c.intersection(oc);
                if !i.is_empty() {
                    out.children.insert(el.clone(), i);
                }
            }
        }
        out
    }

    /// Reads a FieldsV1 value (`{"f:spec":{"f:replicas":{}}}`).
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = Self::node_from(v);
        set.member = false;
        set
    }

    fn node_from(v: &Value) -> FieldSet {
        let Some(m) = v.as_object() else {
            return FieldSet {
                member: true,
                children: BTreeMap::new(),
            };
        };
        let mut node = FieldSet {
            member: m.is_empty() || m.contains_key("."),
            children: BTreeMap::new(),
        };
        for (k, c) in m {
            if k != "." {
                node.children.insert(k.clone(), Self::node_from(c));
            }
        }
        node
    }

    /// Writes the set as FieldsV1.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (el, c) in &self.children {
            m.insert(el.clone(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// The member paths, written as Kubernetes writes them in conflict
    /// messages: `.spec.replicas`, `.spec.containers[name="nginx"].image`.
    pub fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_paths(&mut String::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut String, out: &mut Vec<String>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (el, c) in &self.children {
            let len = prefix.len();
            prefix.push_str(&element_text(el));
            c.collect_paths(prefix, out);
            prefix.truncate(len);
        }
    }
}

/// One path element as text: `.name`, `[name="nginx"]`, `[="x"]`, `[0]`.
fn element_text(el: &str) -> String {
    if let Some(f) = el.strip_prefix("f:") {
        return format!(".{f}");
    }
    if let Some(k) = el.strip_prefix("k:") {
        let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(k) {
            Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            Err(_) => vec![k.to_string()],
        };
        return format!("[{}]", fields.join(","));
    }
    if let Some(v) = el.strip_prefix("v:") {
        return format!("[={v}]");
    }
    if let Some(i) = el.strip_prefix("i:") {
        return format!("[{i}]");
    }
    el.to_string()
}

/// The element naming `item` in a list keyed by `keys`: `k:{"name":"c"}`, with
/// the key fields in name order. None when a key is missing (the list is then
/// treated as atomic).
pub(super) fn key_element(keys: &[&str], item: &Value) -> Option<String> {
    let m = item.as_object()?;
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    let mut key = Map::new();
    for k in sorted {
        let v = match m.get(k) {
            Some(v) => v.clone(),
            None => Value::String(schema::key_default(k)?.to_string()),
        };
        key.insert(k.to_string(), v);
    }
    Some(format!("k:{}", Value::Object(key)))
}

/// The elements of a keyed list's items, or None when some item has no key
/// (or two share one): the list is then handled as a whole.
pub(super) fn keyed_items<'a>(
    keys: &[&str],
    items: &'a [Value],
) -> Option<Vec<(String, &'a Value)>> {
    let mut out: Vec<(String, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let el = key_element(keys, item)?;
        if out.iter().any(|(e, _)| *e == el) {
            return None;
        }
        out.push((el, item));
    }
    Some(out)
}

/// Whether a field is left out of every field set: identity and bookkeeping
/// that no manager owns (Kubernetes' `stripMeta`).
pub(super) fn ignored(path: &[String], field: &str) -> bool {
    match path {
        [] => field == "apiVersion" || field == "kind",
        [m] if m == "metadata" => matches!(
            field,
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "selfLink"
                | "managedFields"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
        ),
        _ => false,
    }
}

/// The fields an object sets (what an applier owns after applying it).
pub fn fields_of(obj: &Value) -> FieldSet {
    let mut set = FieldSet::default();
    if let Some(m) = obj.as_object() {
        map_fields(m, &mut Vec::new(), &mut set, false);
    }
    set.prune();
    set
}

/// Adds the fields of granular map `m` at `path` under `node`. `dot_maps`
/// marks maps themselves as members (how an update records a map it created).
fn map_fields(m: &Map<String, Value>, path: &mut Vec<String>, node: &mut FieldSet, dot_maps: bool) {
    for (k, v) in m {
        if ignored(path, k) {
            continue;
        }
        path.push(k.clone());
        value_fields(v, path, node.child(format!("f:{k}")), dot_maps);
        path.pop();
    }
}

fn value_fields(v: &Value, path: &mut Vec<String>, node: &mut FieldSet, dot_maps: bool) {
    match v {
        Value::Object(m) if !m.is_empty() && !schema::atomic_map(path) => {
            if dot_maps && schema::map_has_own_member(path) {
                node.member = true;
            }
            map_fields(m, path, node, dot_maps);
        }
        Value::Array(items) if !items.is_empty() => match schema::list_shape(path) {
            ListShape::Keyed(keys) => match keyed_items(keys, items) {
                Some(keyed) => {
                    for (el, item) in keyed {
                        let n = node.child(el);
                        n.member = true;
                        if let Some(im) = item.as_object() {
                            map_fields(im, path, n, dot_maps);
                        }
                    }
                }
                None => node.member = true,
            },
            ListShape::Set => {
                for item in items {
                    node.child(format!("v:{item}")).member = true;
                }
            }
            ListShape::Atomic => node.member = true,
        },
        _ => node.member = true,
    }
}

/// What changed from `old` to `new`: fields added or given another value, and
/// fields removed.
#[derive(Debug, Default)]
pub struct Changes {
    pub changed: FieldSet,
    pub removed: FieldSet,
}

impl Changes {
    /// Everything touched, added, changed or removed.
    pub fn all(&self) -> FieldSet {
        let mut s = self.changed.clone();
        s.union_with(&self.removed);
        s
    }
}

pub fn changes(old: &Value, new: &Value) -> Changes {
    let mut c = Changes::default();
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    diff_map(o, n, &mut Vec::new(), &mut c.changed, &mut c.removed);
    c.changed.prune();
    c.removed.prune();
    c
}

fn diff_map(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    path: &mut Vec<String>,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
) {
    for (k, nv) in new {
        let ov = old.get(k);
        // Unchanged: nothing to record (checked first, so that an unchanged
        // key costs no path or set entries, which a write mostly has).
        if ov == Some(nv) || ignored(path, k) {
            continue;
        }
        let el = format!("f:{k}");
        path.push(k.clone());
        match ov {
            Some(ov) => diff_value(ov, nv, path, changed.child(el.clone()), removed.child(el)),
            None => value_fields(nv, path, changed.child(el), true),
        }
        path.pop();
    }
    for (k, ov) in old {
        if ignored(path, k) || new.contains_key(k) {
            continue;
        }
        path.push(k.clone());
        value_fields(ov, path, removed.child(format!("f:{k}")), true);
        path.pop();
    }
}

fn diff_value(
    old: &Value,
    new: &Value,
    path: &mut Vec<String>,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n))
            if !o.is_empty() && !n.is_empty() && !schema::atomic_map(path) =>
        {
            diff_map(o, n, path, changed, removed)
        }
        (Value::Array(o), Value::Array(n)) if !o.is_empty() && !n.is_empty() => {
            match schema::list_shape(path) {
                ListShape::Keyed(keys) => match (keyed_items(keys, o), keyed_items(keys, n)) {
                    (Some(ok), Some(nk)) => {
                        for (el, ni) in &nk {
                            match ok.iter().find(|(e, _)| e == el) {
                                Some((_, oi)) => diff_item(oi, ni, path, changed, removed, el),
                                None => {
                                    let c = changed.child(el.clone());
                                    c.member = true;
                                    if let Some(m) = ni.as_object() {
                                        map_fields(m, path, c, true);
                                    }
                                }
                            }
                        }
                        for (el, oi) in &ok {
                            if !nk.iter().any(|(e, _)| e == el) {
                                let r = removed.child(el.clone());
                                r.member = true;
                                if let Some(m) = oi.as_object() {
                                    map_fields(m, path, r, true);
                                }
                            }
                        }
                    }
                    _ => changed.member = true,
                },
                ListShape::Set => {
                    for v in n.iter().filter(|v| !o.contains(v)) {
                        changed.child(format!("v:{v}")).member = true;
                    }
                    for v in o.iter().filter(|v| !n.contains(v)) {
                        removed.child(format!("v:{v}")).member = true;
                    }
                }
                ListShape::Atomic => changed.member = true,
            }
        }
        _ => {
            // A value replaced by another (or by one of another type): the
            // field itself changed; what was inside the old one is gone.
            if old.is_object() || old.is_array() {
                let mut inner = FieldSet::default();
                value_fields(old, path, &mut inner, true);
                inner.member = false;
                removed.union_with(&inner);
            }
            changed.member = true;
        }
    }
}

fn diff_item(
    old: &Value,
    new: &Value,
    path: &mut Vec<String>,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
    el: &str,
) {
    if old == new {
        return;
    }
    match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => diff_map(
            o,
            n,
            path,
            changed.child(el.to_string()),
            removed.child(el.to_string()),
        ),
        _ => changed.child(el.to_string()).member = true,
    }
}
