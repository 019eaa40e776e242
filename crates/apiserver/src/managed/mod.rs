//! Field ownership and server-side apply (`metadata.managedFields`).
//!
//! Every write records who set which fields: an *Update* entry per manager for
//! creates, PUTs and patches (the fields the write changed move to its manager),
//! an *Apply* entry for each applier (exactly the fields of its last applied
//! configuration). An apply then:
//! 1. removes the fields the applier set last time and dropped now, unless
//!    another manager owns them;
//! 2. merges the applied configuration into the live object (lists by their
//!    keys, atomic lists and selectors whole);
//! 3. compares the result with the live object: a changed field that another
//!    manager owns is a conflict (409), unless the apply forces, which moves
//!    the field to the applier.
//!
//! Kubernetes does this in structured-merge-diff; this is the same model over
//! JSON values with the list and map types of `schema.rs`.

mod fieldset;
mod schema;
#[cfg(test)]
mod tests;

pub use fieldset::{changes, fields_of, Changes, FieldSet};

use fieldset::{ignored, key_element, keyed_items};
use schema::ListShape;
use serde_json::{json, Map, Value};

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    fn from_json(v: &Value) -> Option<Entry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Entry {
            manager: s("manager").unwrap_or_default(),
            operation: s("operation")?,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").unwrap_or_default(),
            fields: FieldSet::from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    /// How a conflict message names the manager: `"kubectl-edit" using v1`
    /// for an updater, just `"kubectl"` for an applier.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

pub const APPLY: &str = "Apply";
pub const UPDATE: &str = "Update";

/// Who writes: the manager's name, the API version it used and the
/// subresource it wrote through ("" for the object itself).
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    /// The entry's timestamp (RFC 3339).
    pub now: &'a str,
}

/// The entries of an object's `metadata.managedFields`.
pub fn entries(obj: &Value) -> Vec<Entry> {
    minik8s_api::meta::field(obj, "managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

fn set_entries(obj: &mut Value, entries: Vec<Entry>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The owner, as the message names it (`"kubectl-edit" using v1`).
    pub manager: String,
    /// The field (`.data.a`).
    pub field: String,
}

/// Kubernetes' message for an apply's conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.field
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The 409 of a server-side apply that would change fields other managers
/// own: Kubernetes' message, a `FieldManagerConflict` cause per field.
pub fn conflict_error(conflicts: &[Conflict]) -> minik8s_api::ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with {}", c.manager), "field": c.field})
        })
        .collect();
    minik8s_api::ApiError {
        details: Some(Box::new(json!({"causes": causes}))),
        ..minik8s_api::ApiError::new(409, "Conflict", conflict_message(conflicts))
    }
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyError {
    Conflicts(Vec<Conflict>),
}

/// Server-side apply of `applied` by `writer` onto `live` (None: the object
/// does not exist yet). Returns the new object with its `managedFields`.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, ApplyError> {
    let empty = json!({});
    let live = live.unwrap_or(&empty);
    let mut entries = entries(live);
    if entries.is_empty() && live.get("metadata").is_some() {
        // An object written before anyone tracked it: its fields belong to a
        // manager of their own, so the first apply does not take them silently.
        let fields = fields_of(live);
        if !fields.is_empty() {
            entries.push(Entry {
                manager: "before-first-apply".into(),
                operation: UPDATE.into(),
                api_version: writer.api_version.into(),
                time: Some(writer.now.into()),
                subresource: writer.subresource.into(),
                fields,
            });
        }
    }
    let own = |e: &Entry| {
        e.manager == writer.manager && e.operation == APPLY && e.subresource == writer.subresource
    };
    let previous = entries
        .iter()
        .find(|e| own(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut others = FieldSet::default();
    for e in entries.iter().filter(|e| !own(e)) {
        others.union_with(&e.fields);
    }
    let now_set = fields_of(applied);

    let mut result = live.clone();
    prune_value(
        &mut result,
        &previous.difference(&now_set),
        Some(&others),
        &mut Vec::new(),
    );
    merge_value(&mut result, applied, &mut Vec::new());

    let touched = changes(live, &result).all();
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !own(e)) {
        for field in e.fields.intersection(&touched).paths() {
            conflicts.push(Conflict {
                manager: e.describe(),
                field,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    for e in entries.iter_mut().filter(|e| !own(e)) {
        e.fields = e.fields.difference(&touched);
    }
    let mine = Entry {
        manager: writer.manager.into(),
        operation: APPLY.into(),
        api_version: writer.api_version.into(),
        time: Some(writer.now.into()),
        subresource: writer.subresource.into(),
        fields: now_set,
    };
    match entries.iter_mut().find(|e| own(e)) {
        Some(e) => *e = mine,
        None => entries.push(mine),
    }
    set_entries(&mut result, entries);
    Ok(result)
}

/// Settles which `managedFields` a written object keeps before the write is
/// tracked: none or `[]` in the body keeps `old`'s, `[{}]` clears them,
/// anything else is what the client asked for (as Kubernetes does).
pub fn carry_over(old: Option<&Value>, new: &mut Value) {
    // Borrowed: most writes send the list back, and old's is then not needed.
    let old_list = old.and_then(|o| minik8s_api::meta::field(o, "managedFields"));
    let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match meta.get("managedFields") {
        Some(Value::Array(a)) if a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty) => {
            meta.remove("managedFields");
        }
        Some(Value::Array(a)) if !a.is_empty() => {}
        _ => match old_list {
            Some(l) => {
                meta.insert("managedFields".into(), l.clone());
            }
            None => {
                meta.remove("managedFields");
            }
        },
    }
}

/// Records a create or update (`old` None for a create) by `writer` in `new`'s
/// `managedFields` (settled by [`carry_over`] first): the fields it added or
/// changed become its own, and no longer any other manager's; fields it
/// removed are nobody's.
pub fn track_update(old: Option<&Value>, new: &mut Value, writer: &Writer) {
    let empty = json!({});
    let old = old.unwrap_or(&empty);
    let mut entries = entries(new);
    let c = changes(old, new);
    let touched = c.all();
    for e in &mut entries {
        e.fields = e.fields.difference(&touched);
    }
    if !c.changed.is_empty() {
        let mine = entries.iter_mut().find(|e| {
            e.manager == writer.manager
                && e.operation == UPDATE
                && e.api_version == writer.api_version
                && e.subresource == writer.subresource
        });
        match mine {
            Some(e) => {
                e.fields.union_with(&c.changed);
                e.time = Some(writer.now.into());
            }
            None => entries.push(Entry {
                manager: writer.manager.into(),
                operation: UPDATE.into(),
                api_version: writer.api_version.into(),
                time: Some(writer.now.into()),
                subresource: writer.subresource.into(),
                fields: c.changed,
            }),
        }
    }
    set_entries(new, entries);
}

/// Takes the member paths of `remove` out of `v`, except paths under which
/// `keep` (other managers' fields) has something.
fn prune_value(v: &mut Value, remove: &FieldSet, keep: Option<&FieldSet>, path: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (el, r) in &remove.children {
                let Some(name) = el.strip_prefix("f:") else {
                    continue;
                };
                if ignored(path, name) {
                    continue;
                }
                let k = keep.and_then(|k| k.children.get(el));
                if r.member && k.is_none_or(FieldSet::is_empty) {
                    m.remove(name);
                } else if let Some(child) = m.get_mut(name) {
                    path.push(name.to_string());
                    prune_value(child, r, k, path);
                    path.pop();
                    // A map or list emptied by the removal goes too (as Go's
                    // `omitempty` drops it from a typed object).
                    if is_empty_collection(child) {
                        m.remove(name);
                    }
                }
            }
        }
        Value::Array(items) => match schema::list_shape(path) {
            ListShape::Keyed(keys) => {
                items.retain_mut(|item| {
                    let Some(el) = key_element(keys, item) else {
                        return true;
                    };
                    let Some(r) = remove.children.get(&el) else {
                        return true;
                    };
                    let k = keep.and_then(|k| k.children.get(&el));
                    if r.member && k.is_none_or(FieldSet::is_empty) {
                        return false;
                    }
                    prune_value(item, r, k, path);
                    true
                });
            }
            ListShape::Set => items.retain(|item| {
                let el = format!("v:{item}");
                let owned_elsewhere = keep.is_some_and(|k| k.children.contains_key(&el));
                !remove.children.get(&el).is_some_and(|r| r.member) || owned_elsewhere
            }),
            ListShape::Atomic => {}
        },
        _ => {}
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Merges an applied configuration into the live object: maps field by field,
/// keyed lists item by item, set lists as a union, everything else replaced.
/// A null in the applied configuration removes the field.
fn merge_value(live: &mut Value, applied: &Value, path: &mut Vec<String>) {
    match (&mut *live, applied) {
        (Value::Object(l), Value::Object(a)) if !schema::atomic_map(path) => {
            for (k, av) in a {
                if av.is_null() {
                    l.remove(k);
                    continue;
                }
                path.push(k.clone());
                match l.get_mut(k) {
                    Some(lv) => merge_value(lv, av, path),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match schema::list_shape(path) {
            ListShape::Keyed(keys) => match (keyed_items(keys, l), keyed_items(keys, a)) {
                (Some(lk), Some(ak)) => {
                    let positions: Vec<String> = lk.into_iter().map(|(el, _)| el).collect();
                    let mut additions = Vec::new();
                    for (el, ai) in ak {
                        match positions.iter().position(|p| *p == el) {
                            Some(i) => merge_value(&mut l[i], ai, path),
                            None => additions.push(ai.clone()),
                        }
                    }
                    l.extend(additions);
                }
                _ => *live = applied.clone(),
            },
            ListShape::Set => {
                for item in a {
                    if !l.contains(item) {
                        l.push(item.clone());
                    }
                }
            }
            ListShape::Atomic => *live = applied.clone(),
        },
        _ => *live = applied.clone(),
    }
}
