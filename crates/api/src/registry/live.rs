//! The registry one apiserver serves from: the built-in table plus kinds
//! registered while it runs (CustomResourceDefinitions later, tests now).
//!
//! Routing, discovery, OpenAPI and the watch caches read it on every request,
//! so a kind registered or unregistered is served, or gone, at once.
//!
//! Entries are [`Info`]s (`Arc<ResourceInfo>`) like the built-ins, so the
//! rest of the code does not care where an entry came from: a run-time entry
//! owns its text and is dropped once unregistered and no request, watch or
//! cache holds it any more.

use super::{builtins, Column, Info, ResourceInfo, Subresource, Text, REGISTRY};
use std::borrow::Cow;
use std::sync::{Arc, RwLock};

/// A resource described at run time, owned; [`Registry::register`] turns it
/// into a [`ResourceInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceSpec {
    /// API group; run-time kinds are never in the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub subresources: Vec<Subresource>,
    pub categories: Vec<String>,
    /// Table columns after NAME; empty: AGE only, as Kubernetes prints a
    /// CRD without additionalPrinterColumns.
    pub columns: Vec<ColumnSpec>,
}

/// A printer column described at run time (a CRD's additionalPrinterColumns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnSpec {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub kind: String,
    pub priority: i32,
    pub description: String,
}

/// The columns of every run-time kind after NAME.
const RUNTIME_COLUMNS: &[Column] = &[Column {
    name: Cow::Borrowed("Age"),
    kind: Cow::Borrowed("string"),
    priority: 0,
    description: Cow::Borrowed(""),
}];

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("invalid resource {field}: {why}")]
    Invalid { field: &'static str, why: String },
    #[error("{0} is already served")]
    Taken(String),
    #[error("{0} is a built-in resource and cannot be unregistered")]
    BuiltIn(String),
    #[error("{0} is not served")]
    NotFound(String),
}

/// The resources one apiserver serves.
pub struct Registry {
    entries: RwLock<Vec<Info>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

/// Lower-case alphanumerics and '-' / '.', starting and ending alphanumeric.
fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

impl ResourceSpec {
    fn check(&self) -> Result<(), RegistryError> {
        let invalid = |field, why: &str| {
            Err(RegistryError::Invalid {
                field,
                why: why.to_string(),
            })
        };
        if !is_dns_name(&self.group) || !self.group.contains('.') {
            return invalid("group", "must be a DNS subdomain with at least one dot");
        }
        if !is_dns_name(&self.version) || self.version.contains('.') {
            return invalid("version", "must be a lower-case DNS label");
        }
        for (field, name) in [("plural", &self.plural), ("singular", &self.singular)] {
            if !is_dns_name(name) || name.contains('.') {
                return invalid(field, "must be a lower-case DNS label");
            }
        }
        if !self.kind.starts_with(|c: char| c.is_ascii_uppercase())
            || !self.kind.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return invalid("kind", "must be CamelCase letters and digits");
        }
        // Until kinds have per-kind strategies, behaviour is chosen by kind
        // name: a second "Pod" would be defaulted and validated as a Pod.
        if REGISTRY.iter().any(|r| r.kind == self.kind) {
            return invalid("kind", "is the name of a built-in kind");
        }
        if self
            .subresources
            .iter()
            .any(|s| !matches!(s, Subresource::Status | Subresource::Scale))
        {
            return invalid("subresources", "only status and scale can be declared");
        }
        Ok(())
    }

    /// The registry entry this spec describes, owning its text.
    pub fn entry(&self) -> ResourceInfo {
        let owned = |s: &String| -> Text { Cow::Owned(s.clone()) };
        let columns: Cow<'static, [Column]> = if self.columns.is_empty() {
            Cow::Borrowed(RUNTIME_COLUMNS)
        } else {
            self.columns
                .iter()
                .map(|c| Column {
                    name: owned(&c.name),
                    kind: owned(&c.kind),
                    priority: c.priority,
                    description: owned(&c.description),
                })
                .collect()
        };
        ResourceInfo {
            group: owned(&self.group),
            version: owned(&self.version),
            kind: owned(&self.kind),
            plural: owned(&self.plural),
            singular: owned(&self.singular),
            short_names: self.short_names.iter().map(owned).collect(),
            namespaced: self.namespaced,
            subresources: Cow::Owned(self.subresources.clone()),
            categories: self.categories.iter().map(owned).collect(),
            columns,
        }
    }
}

impl Registry {
    /// The built-in kinds only.
    pub fn with_builtins() -> Registry {
        Registry {
            entries: RwLock::new(builtins().to_vec()),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Info>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every resource served now, built-ins first, then in registration order.
    pub fn all(&self) -> Vec<Info> {
        self.read().clone()
    }

    pub fn by_plural(&self, group: &str, version: &str, plural: &str) -> Option<Info> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Info> {
        self.read()
            .iter()
            .find(|r| r.kind == kind && r.api_version() == api_version)
            .cloned()
    }

    /// The distinct `(group, version)` pairs, in registry order.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for r in self.read().iter() {
            if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
                out.push((r.group.to_string(), r.version.to_string()));
            }
        }
        out
    }

    /// Is `info` one of the built-in kinds (as opposed to one registered at run time)?
    pub fn is_builtin(info: &ResourceInfo) -> bool {
        super::builtin_entry(info).is_some()
    }

    /// Serves a new resource from now on. Refused when the spec is invalid or
    /// its group/plural or group/version/kind is already served.
    pub fn register(&self, spec: &ResourceSpec) -> Result<Info, RegistryError> {
        self.register_with(spec, |_| {})
    }

    /// As [`Registry::register`], with `before_served` called on the entry
    /// before any lookup can find it (a custom resource's strategy is set
    /// there, so no request is served without it).
    pub fn register_with(
        &self,
        spec: &ResourceSpec,
        before_served: impl FnOnce(&Info),
    ) -> Result<Info, RegistryError> {
        spec.check()?;
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        // Versions of one kind share its plural (a CRD's versions); anything
        // else with the same plural, or the same kind in the same version, clashes.
        if let Some(taken) = entries.iter().find(|r| {
            let same_plural = r.plural == spec.plural;
            let same_version = r.version == spec.version;
            let same_kind = r.kind == spec.kind;
            r.group == spec.group
                && if same_plural {
                    same_version || !same_kind
                } else {
                    same_version && same_kind
                }
        }) {
            return Err(RegistryError::Taken(format!(
                "{}/{} ({})",
                taken.group, taken.plural, taken.kind
            )));
        }
        let info = Arc::new(spec.entry());
        before_served(&info);
        entries.push(info.clone());
        Ok(info)
    }

    /// Stops serving every version of a run-time resource; built-ins stay.
    /// The entries that were served are returned.
    pub fn unregister_all(&self, group: &str, plural: &str) -> Result<Vec<Info>, RegistryError> {
        let mut out = Vec::new();
        while let Ok(info) = self.unregister(group, plural) {
            out.push(info);
        }
        if out.is_empty() {
            // Why: not served, or a built-in.
            self.unregister(group, plural)?;
        }
        Ok(out)
    }

    /// Stops serving exactly `info` (a run-time entry).
    pub fn unregister_version(&self, info: &ResourceInfo) -> Result<(), RegistryError> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let i = entries
            .iter()
            .position(|r| std::ptr::eq(&**r, info) && !Self::is_builtin(r))
            .ok_or_else(|| RegistryError::NotFound(info.group_resource()))?;
        entries.remove(i);
        Ok(())
    }

    /// Stops serving one version of a run-time resource; built-ins stay.
    pub fn unregister(&self, group: &str, plural: &str) -> Result<Info, RegistryError> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let i = entries
            .iter()
            .position(|r| r.group == group && r.plural == plural)
            .ok_or_else(|| RegistryError::NotFound(format!("{plural}.{group}")))?;
        if Self::is_builtin(&entries[i]) {
            return Err(RegistryError::BuiltIn(entries[i].group_resource()));
        }
        Ok(entries.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> ResourceSpec {
        ResourceSpec {
            group: "example.minik8s.io".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            singular: "widget".into(),
            short_names: vec!["wd".into()],
            namespaced: true,
            subresources: vec![Subresource::Status],
            categories: vec!["all".into()],
            columns: Vec::new(),
        }
    }

    #[test]
    fn registered_kinds_are_served_until_unregistered() {
        let reg = Registry::with_builtins();
        assert_eq!(reg.all().len(), REGISTRY.len());
        let info = reg.register(&widget()).unwrap();
        assert!(!Registry::is_builtin(&info));
        // A built-in is one whether named by its static entry or served.
        let pods = reg.by_plural("", "v1", "pods").unwrap();
        assert!(Registry::is_builtin(&pods) && Registry::is_builtin(&REGISTRY[1]));
        assert!(Arc::ptr_eq(&pods, &super::super::shared(&REGISTRY[1])));
        assert_eq!(info.api_version(), "example.minik8s.io/v1");
        assert_eq!(
            info.key(Some("ns"), "w"),
            "/registry/example.minik8s.io/widgets/ns/w"
        );
        assert!(Arc::ptr_eq(
            &reg.by_plural("example.minik8s.io", "v1", "widgets")
                .unwrap(),
            &info
        ));
        assert!(Arc::ptr_eq(
            &reg.by_kind("example.minik8s.io/v1", "Widget").unwrap(),
            &info
        ));
        let gv = ("example.minik8s.io".to_string(), "v1".to_string());
        assert!(reg.group_versions().contains(&gv));
        assert!(info.matches_alias("wd"));

        reg.unregister("example.minik8s.io", "widgets").unwrap();
        assert!(reg
            .by_plural("example.minik8s.io", "v1", "widgets")
            .is_none());
        assert!(!reg.group_versions().contains(&gv));
        // Nothing of it is left but what its users still hold: this test's
        // handle, the last one.
        assert_eq!(Arc::strong_count(&info), 1);
        let again = reg.register(&widget()).unwrap();
        assert_eq!(*again, *info);
    }

    #[test]
    fn versions_of_one_kind_share_its_plural() {
        let reg = Registry::with_builtins();
        let v1 = reg.register(&widget()).unwrap();
        let beta = ResourceSpec {
            version: "v1beta1".into(),
            ..widget()
        };
        let v1beta1 = reg.register(&beta).unwrap();
        assert_eq!(v1.key_prefix(None), v1beta1.key_prefix(None));
        assert!(matches!(reg.register(&beta), Err(RegistryError::Taken(_))));
        reg.unregister_version(&v1beta1).unwrap();
        assert!(reg
            .by_plural("example.minik8s.io", "v1", "widgets")
            .is_some());
        reg.register(&beta).unwrap();
        assert_eq!(
            reg.unregister_all("example.minik8s.io", "widgets")
                .unwrap()
                .len(),
            2
        );
        assert!(reg
            .by_plural("example.minik8s.io", "v1", "widgets")
            .is_none());
        assert!(matches!(
            reg.unregister_all("apps", "replicasets"),
            Err(RegistryError::BuiltIn(_))
        ));
    }

    #[test]
    fn clashes_and_bad_specs_are_refused() {
        let reg = Registry::with_builtins();
        reg.register(&widget()).unwrap();
        let same_plural = ResourceSpec {
            kind: "Gadget".into(),
            ..widget()
        };
        assert!(matches!(
            reg.register(&same_plural),
            Err(RegistryError::Taken(_))
        ));
        let same_kind = ResourceSpec {
            plural: "gadgets".into(),
            ..widget()
        };
        assert!(matches!(
            reg.register(&same_kind),
            Err(RegistryError::Taken(_))
        ));
        for (bad, field) in [
            (
                ResourceSpec {
                    group: "".into(),
                    ..widget()
                },
                "group",
            ),
            (
                ResourceSpec {
                    group: "apps".into(),
                    ..widget()
                },
                "group",
            ),
            (
                ResourceSpec {
                    plural: "Widgets".into(),
                    ..widget()
                },
                "plural",
            ),
            (
                ResourceSpec {
                    kind: "widget".into(),
                    ..widget()
                },
                "kind",
            ),
            (
                ResourceSpec {
                    kind: "Pod".into(),
                    ..widget()
                },
                "kind",
            ),
            (
                ResourceSpec {
                    subresources: vec![Subresource::Log],
                    ..widget()
                },
                "subresources",
            ),
        ] {
            match reg.register(&bad) {
                Err(RegistryError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert!(matches!(
            reg.unregister("apps", "replicasets"),
            Err(RegistryError::BuiltIn(_))
        ));
        assert!(matches!(
            reg.unregister("example.minik8s.io", "gadgets"),
            Err(RegistryError::NotFound(_))
        ));
    }
}
