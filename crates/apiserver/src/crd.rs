//! The CRD controller inside the apiserver (Kubernetes' apiextensions
//! naming, establishing and finalizer controllers in one loop): it serves
//! what the CustomResourceDefinitions ask for.
//!
//! ```text
//!  CRD watch cache ──▶ reconcile(name) ──▶ names free?  ── no ─▶ NamesAccepted=False (NameConflict)
//!                                         │ yes
//!                                         ├─▶ registry: one entry per served version, strategy from its schema
//!                                         ├─▶ status: acceptedNames, NamesAccepted, Established, storedVersions
//!                                         └─ deleting ─▶ delete every object ─▶ stop serving ─▶ drop the finalizer
//! ```
//!
//! Level-triggered: `reconcile` reads the CRD from the store and converges;
//! on start every stored CRD is reconciled, so a restarted apiserver serves
//! them again.

use crate::rest::{DeleteOptions, Mode};
use crate::strategy::{
    crd::{set_condition, CLEANUP_FINALIZER},
    custom::CustomResource,
};
use crate::ApiServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use minik8s_api::meta;
use minik8s_api::registry::{self, ColumnSpec, Info, ResourceInfo, ResourceSpec, Subresource};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// What each CRD is served as: CRD name → its entries' specs (one per served version).
#[derive(Default)]
pub struct Served(Mutex<HashMap<String, Vec<ResourceSpec>>>);

impl Served {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<ResourceSpec>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn crd_info() -> &'static ResourceInfo {
    registry::of::<CustomResourceDefinition>()
}

/// Kubernetes' version priority: GA, then beta, then alpha (higher numbers
/// first), then anything else alphabetically; the first served is preferred.
fn version_order(v: &str) -> (u8, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>, String) {
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        let (rank, minor) = match tail {
            "" => (0, "0"),
            t if t.starts_with("beta") => (1, &t[4..]),
            t if t.starts_with("alpha") => (2, &t[5..]),
            _ => return None,
        };
        Some((rank, major, minor.parse::<u64>().ok()?))
    });
    match parsed {
        Some((rank, major, minor)) => (
            rank,
            std::cmp::Reverse(major),
            std::cmp::Reverse(minor),
            String::new(),
        ),
        None => (3, std::cmp::Reverse(0), std::cmp::Reverse(0), v.to_string()),
    }
}

/// The registry entries a CRD asks for: one per served version.
pub fn specs_of(crd: &Value) -> Vec<ResourceSpec> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut versions = spec["versions"].as_array().cloned().unwrap_or_default();
    versions.sort_by_key(|v| version_order(v["name"].as_str().unwrap_or_default()));
    versions
        .iter()
        .filter(|v| v["served"] == json!(true))
        .map(|v| {
            let mut subresources = Vec::new();
            if v.pointer("/subresources/status")
                .is_some_and(|s| !s.is_null())
            {
                subresources.push(Subresource::Status);
            }
            if v.pointer("/subresources/scale")
                .is_some_and(|s| !s.is_null())
            {
                subresources.push(Subresource::Scale);
            }
            let columns = v["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| ColumnSpec {
                    name: text(&c["name"]),
                    kind: text(&c["type"]),
                    priority: c["priority"].as_i64().unwrap_or(0) as i32,
                    description: text(&c["description"]),
                })
                .collect();
            ResourceSpec {
                group: text(&spec["group"]),
                version: text(&v["name"]),
                kind: text(&names["kind"]),
                plural: text(&names["plural"]),
                singular: text(&names["singular"]),
                short_names: meta::strings(&names["shortNames"]),
                namespaced: spec["scope"] == "Namespaced",
                subresources,
                categories: meta::strings(&names["categories"]),
                columns,
            }
        })
        .collect()
}

impl ApiServer {
    /// Starts the CRD controller: every stored CRD now, then every change.
    pub(crate) fn start_crd_controller(self: &Arc<Self>, after: i64) {
        let Some(cache) = self.watch_cache(crd_info()) else {
            return;
        };
        let Ok(sub) = cache.subscribe(after) else {
            return;
        };
        let server: Weak<ApiServer> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut live = sub.live;
            let reconcile_all = |server: &Weak<ApiServer>| {
                let server = server.clone();
                async move {
                    let Some(srv) = server.upgrade() else { return };
                    let prefix = crd_info().key_prefix(None);
                    if let Ok((kvs, _)) = srv.store.list(&prefix, None).await {
                        for kv in kvs {
                            let name = kv.key.trim_start_matches(&prefix).to_string();
                            srv.reconcile_crd(&name).await;
                        }
                    }
                }
            };
            reconcile_all(&server).await;
            loop {
                match live.recv().await {
                    Ok(ev) => {
                        let Some(srv) = server.upgrade() else { return };
                        let name = meta::name(&ev.object()).to_string();
                        srv.reconcile_crd(&name).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        reconcile_all(&server).await
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Converges what is served for the CRD `name` on what it asks for.
    pub(crate) async fn reconcile_crd(self: &Arc<Self>, name: &str) {
        let crd = match self.read(crd_info(), None, name).await {
            Ok((crd, _)) => Some(crd),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                tracing::warn!(crd = name, error = %e, "reading the CRD failed; retrying");
                self.retry_crd_later(name);
                return;
            }
        };
        let Some(crd) = crd else {
            self.stop_serving(name);
            return;
        };
        if meta::is_deleting(&crd) {
            if let Err(e) = self.finalize_crd(name, &crd).await {
                tracing::info!(crd = name, why = %e, "CRD instances not all deleted yet");
                self.retry_crd_later(name);
            }
            return;
        }
        let specs = specs_of(&crd);
        let conflict = self.name_conflict(name, &crd);
        if conflict.is_none() {
            if let Err(e) = self.serve(name, &crd, &specs).await {
                tracing::warn!(crd = name, error = %e, "serving the CRD failed");
            }
        } else {
            self.stop_serving(name);
        }
        let status = desired_status(&crd, conflict.as_deref());
        if crd.get("status") != Some(&status) {
            let r = self
                .update_with(
                    crd_info(),
                    None,
                    name,
                    Mode::Status,
                    Default::default(),
                    |old| {
                        let mut o = old.clone();
                        o["status"] = desired_status(old, conflict.as_deref());
                        Ok(o)
                    },
                )
                .await;
            if let Err(e) = r {
                tracing::warn!(crd = name, error = %e, "CRD status not written");
            }
        }
    }

    fn retry_crd_later(self: &Arc<Self>, name: &str) {
        let server = Arc::downgrade(self);
        let name = name.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Some(srv) = server.upgrade() {
                srv.reconcile_crd(&name).await;
            }
        });
    }

    /// Why the CRD's names cannot be served (taken by a built-in or another CRD).
    fn name_conflict(&self, name: &str, crd: &Value) -> Option<String> {
        let spec = &crd["spec"];
        let group = spec["group"].as_str().unwrap_or("");
        let plural = spec["names"]["plural"].as_str().unwrap_or("");
        let kind = spec["names"]["kind"].as_str().unwrap_or("");
        let ours = self.custom.lock().get(name).cloned().unwrap_or_default();
        let mine = |r: &ResourceInfo| {
            ours.iter()
                .any(|s| s.group == r.group && s.plural == r.plural && s.version == r.version)
        };
        for r in self
            .registry
            .all()
            .into_iter()
            .filter(|r| r.group == group && !mine(r))
        {
            if r.plural == plural {
                return Some(format!("\"{plural}\" is already in use"));
            }
            if r.kind == kind {
                return Some(format!("\"{kind}\" is already in use"));
            }
        }
        None
    }

    /// Serves the CRD's versions with strategies from their schemas (each
    /// set before its version can be reached, so no request is served
    /// without its schema and storage version).
    async fn serve(&self, name: &str, crd: &Value, specs: &[ResourceSpec]) -> Result<(), String> {
        let versions = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut strategies: HashMap<String, Arc<CustomResource>> = HashMap::new();
        for spec in specs {
            let version = versions.iter().find(|v| v["name"] == spec.version.as_str());
            if let Some(v) = version {
                let s = CustomResource::from_version(crd, v)
                    .map_err(|e| format!("version {}: {e}", spec.version))?;
                strategies.insert(spec.version.clone(), Arc::new(s));
            }
        }
        let install = |info: &Info| {
            if let Some(s) = strategies.get(&*info.version) {
                self.strategies.set(info, s.clone());
            }
        };
        let current = self.custom.lock().get(name).cloned().unwrap_or_default();
        if current != specs {
            self.stop_serving(name);
            if !specs.is_empty() {
                self.register_kinds_with(specs, install)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            self.custom.lock().insert(name.to_string(), specs.to_vec());
        } else {
            // The same versions: a schema or column change only.
            for spec in specs {
                if let Some(info) =
                    self.registry
                        .by_plural(&spec.group, &spec.version, &spec.plural)
                {
                    install(&info);
                }
            }
        }
        Ok(())
    }

    fn stop_serving(&self, name: &str) {
        let Some(specs) = self.custom.lock().remove(name) else {
            return;
        };
        if let Some(first) = specs.first() {
            if let Ok(infos) = self.unregister_kinds(&first.group, &first.plural) {
                for info in infos {
                    self.strategies.clear(&info);
                }
            }
        }
    }

    /// A deleted CRD: its objects go first, then what serves them, then the finalizer.
    async fn finalize_crd(self: &Arc<Self>, name: &str, crd: &Value) -> Result<(), String> {
        if !meta::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER) {
            return Ok(());
        }
        let served = self
            .custom
            .lock()
            .get(name)
            .and_then(|s| s.first().cloned());
        if let Some(spec) = served {
            if let Some(info) = self
                .registry
                .by_plural(&spec.group, &spec.version, &spec.plural)
            {
                let (kvs, _) = self
                    .store
                    .list(&info.key_prefix(None), None)
                    .await
                    .map_err(|e| e.to_string())?;
                for kv in &kvs {
                    let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else {
                        continue;
                    };
                    let r = self
                        .delete(
                            &info,
                            meta::namespace(&obj),
                            meta::name(&obj),
                            &DeleteOptions::default(),
                        )
                        .await;
                    if let Some(e) = r.err().filter(|e| !e.is_not_found()) {
                        return Err(e.to_string());
                    }
                }
                // Objects with finalizers of their own linger until those are done.
                let (kvs, _) = self
                    .store
                    .list(&info.key_prefix(None), None)
                    .await
                    .map_err(|e| e.to_string())?;
                if !kvs.is_empty() {
                    return Err(format!("{} objects wait for their finalizers", kvs.len()));
                }
            }
        }
        self.stop_serving(name);
        self.update_with(
            crd_info(),
            None,
            name,
            Mode::Main,
            Default::default(),
            |old| {
                let mut o = old.clone();
                let kept: Vec<String> = meta::finalizers(old)
                    .into_iter()
                    .filter(|f| f != CLEANUP_FINALIZER)
                    .collect();
                meta::metadata_mut(&mut o).insert("finalizers".into(), json!(kept));
                Ok(o)
            },
        )
        .await
        .map(|_| ())
        .or_else(|e| {
            if e.is_not_found() {
                Ok(())
            } else {
                Err(e.to_string())
            }
        })
    }
}

/// The CRD's status once its names are judged: `conflict` says why they are not accepted.
fn desired_status(crd: &Value, conflict: Option<&str>) -> Value {
    let mut o = json!({"status": crd.get("status").cloned().unwrap_or(json!({}))});
    if !o["status"].is_object() {
        o["status"] = json!({});
    }
    match conflict {
        None => {
            o["status"]["acceptedNames"] = accepted_names(&crd["spec"]["names"]);
            set_condition(
                &mut o,
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found",
            );
            set_condition(
                &mut o,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            );
        }
        Some(why) => {
            if o["status"].get("acceptedNames").is_none() {
                o["status"]["acceptedNames"] = json!({"plural": "", "kind": ""});
            }
            set_condition(&mut o, "NamesAccepted", "False", "NameConflict", why);
            set_condition(
                &mut o,
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted",
            );
        }
    }
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == json!(true))
        .and_then(|v| v["name"].as_str());
    let mut stored = meta::strings(&o["status"]["storedVersions"]);
    if let Some(s) = storage {
        if conflict.is_none() && !stored.iter().any(|v| v == s) {
            stored.push(s.to_string());
        }
    }
    o["status"]["storedVersions"] = json!(stored);
    o["status"].take()
}

fn accepted_names(names: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for k in [
        "plural",
        "singular",
        "shortNames",
        "kind",
        "listKind",
        "categories",
    ] {
        if let Some(v) = names.get(k).filter(|v| !v.is_null()) {
            out.insert(k.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "crontabs.stable.example.com"}, "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec", "priority": 0}]},
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1alpha1", "served": false, "storage": false}]}})
    }

    #[test]
    fn each_served_version_is_one_registry_entry() {
        let specs = specs_of(&crd());
        assert_eq!(specs.len(), 2);
        assert_eq!(
            (specs[0].version.as_str(), specs[1].version.as_str()),
            ("v1", "v1beta1")
        );
        assert_eq!(specs[0].subresources, [Subresource::Status]);
        assert_eq!(specs[0].columns[0].name, "Spec");
        assert!(specs[1].columns.is_empty());
        assert!(specs
            .iter()
            .all(|s| s.namespaced && s.short_names == ["ct"]));
    }

    #[test]
    fn versions_are_served_in_kubernetes_priority() {
        let mut names = vec![
            "v1alpha1", "foo", "v2beta1", "v1", "v1beta2", "v2", "v1beta1", "bar",
        ];
        names.sort_by_key(|v| version_order(v));
        assert_eq!(
            names,
            ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]
        );
    }

    #[test]
    fn status_says_whether_the_names_were_accepted() {
        let ok = desired_status(&crd(), None);
        assert_eq!(ok["acceptedNames"]["kind"], "CronTab");
        assert_eq!(ok["storedVersions"], json!(["v1"]));
        let conds = ok["conditions"].as_array().unwrap();
        assert_eq!(
            (conds[0]["type"].as_str(), conds[0]["status"].as_str()),
            (Some("NamesAccepted"), Some("True"))
        );
        assert_eq!(
            (conds[1]["type"].as_str(), conds[1]["status"].as_str()),
            (Some("Established"), Some("True"))
        );
        let taken = desired_status(&crd(), Some("\"crontabs\" is already in use"));
        let conds = taken["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["reason"], "NameConflict");
        assert_eq!(conds[0]["message"], "\"crontabs\" is already in use");
        assert_eq!(conds[1]["status"], "False");
        assert_eq!(taken["storedVersions"], json!([]));
    }
}
