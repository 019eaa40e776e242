//! The registry one apiserver serves from: the built-in table plus kinds
//! registered while it runs (CustomResourceDefinitions later, tests now).
//!
//! Routing, discovery, OpenAPI and the watch caches read it on every request,
//! so a kind registered or unregistered is served, or gone, at once.
//!
//! Entries are `&'static ResourceInfo` like the built-ins, so the rest of the
//! code does not care where an entry came from: a run-time entry is leaked
//! once (a few hundred bytes) and kept after unregistering, so registering the
//! same kind again reuses it instead of leaking another.

use super::{Column, ResourceInfo, Subresource, REGISTRY};
use std::sync::{Mutex, RwLock};

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
    name: "Age",
    kind: "string",
    priority: 0,
    description: "",
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
    entries: RwLock<Vec<&'static ResourceInfo>>,
    /// Run-time entries no longer served, kept for reuse (see the module doc).
    retired: Mutex<Vec<&'static ResourceInfo>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_all(v: &[String]) -> &'static [&'static str] {
    Box::leak(
        v.iter()
            .map(|s| leak(s))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
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

    fn matches(&self, info: &ResourceInfo) -> bool {
        info.group == self.group
            && info.version == self.version
            && info.kind == self.kind
            && info.plural == self.plural
            && info.singular == self.singular
            && info.short_names.iter().eq(self.short_names.iter())
            && info.namespaced == self.namespaced
            && info.subresources == self.subresources.as_slice()
            && info.categories.iter().eq(self.categories.iter())
            && self.leak_columns_eq(info.columns)
    }

    fn leak_columns_eq(&self, columns: &[Column]) -> bool {
        if self.columns.is_empty() {
            return columns == RUNTIME_COLUMNS;
        }
        columns.len() == self.columns.len()
            && columns.iter().zip(&self.columns).all(|(c, s)| {
                c.name == s.name
                    && c.kind == s.kind
                    && c.priority == s.priority
                    && c.description == s.description
            })
    }

    fn columns(&self) -> &'static [Column] {
        if self.columns.is_empty() {
            return RUNTIME_COLUMNS;
        }
        Box::leak(
            self.columns
                .iter()
                .map(|c| Column {
                    name: leak(&c.name),
                    kind: leak(&c.kind),
                    priority: c.priority,
                    description: leak(&c.description),
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    }

    fn leak(&self) -> &'static ResourceInfo {
        Box::leak(Box::new(ResourceInfo {
            group: leak(&self.group),
            version: leak(&self.version),
            kind: leak(&self.kind),
            plural: leak(&self.plural),
            singular: leak(&self.singular),
            short_names: leak_all(&self.short_names),
            namespaced: self.namespaced,
            subresources: Box::leak(self.subresources.clone().into_boxed_slice()),
            categories: leak_all(&self.categories),
            columns: self.columns(),
        }))
    }
}

impl ResourceSpec {
    /// Whether `info` is the entry this spec describes.
    pub fn describes(&self, info: &ResourceInfo) -> bool {
        self.matches(info)
    }

    /// A registry entry for a kind a client found through discovery (a
    /// custom resource). Made at run time and never freed, as every run-time
    /// entry (see the module doc): the client keeps the ones it made and
    /// reuses them (`minik8s_client`'s discovery).
    pub fn leak_entry(&self) -> &'static ResourceInfo {
        self.leak()
    }
}

impl Registry {
    /// The built-in kinds only.
    pub fn with_builtins() -> Registry {
        Registry {
            entries: RwLock::new(REGISTRY.iter().collect()),
            retired: Mutex::new(Vec::new()),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<&'static ResourceInfo>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every resource served now, built-ins first, then in registration order.
    pub fn all(&self) -> Vec<&'static ResourceInfo> {
        self.read().clone()
    }

    pub fn by_plural(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&'static ResourceInfo> {
        self.read()
            .iter()
            .copied()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
        self.read()
            .iter()
            .copied()
            .find(|r| r.kind == kind && r.api_version() == api_version)
    }

    /// The distinct `(group, version)` pairs, in registry order.
    pub fn group_versions(&self) -> Vec<(&'static str, &'static str)> {
        let mut out: Vec<(&'static str, &'static str)> = Vec::new();
        for r in self.read().iter() {
            if !out.contains(&(r.group, r.version)) {
                out.push((r.group, r.version));
            }
        }
        out
    }

    /// Is `info` one of the built-in kinds (as opposed to one registered at run time)?
    pub fn is_builtin(info: &ResourceInfo) -> bool {
        REGISTRY.iter().any(|r| std::ptr::eq(r, info))
    }

    /// Serves a new resource from now on. Refused when the spec is invalid or
    /// its group/plural or group/version/kind is already served.
    pub fn register(&self, spec: &ResourceSpec) -> Result<&'static ResourceInfo, RegistryError> {
        self.register_with(spec, |_| {})
    }

    /// As [`Registry::register`], with `before_served` called on the entry
    /// before any lookup can find it (a custom resource's strategy is set
    /// there, so no request is served without it).
    pub fn register_with(
        &self,
        spec: &ResourceSpec,
        before_served: impl FnOnce(&'static ResourceInfo),
    ) -> Result<&'static ResourceInfo, RegistryError> {
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
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        let info = match retired.iter().position(|r| spec.matches(r)) {
            Some(i) => retired.swap_remove(i),
            None => spec.leak(),
        };
        before_served(info);
        entries.push(info);
        Ok(info)
    }

    /// Stops serving every version of a run-time resource; built-ins stay.
    /// The entries that were served are returned.
    pub fn unregister_all(
        &self,
        group: &str,
        plural: &str,
    ) -> Result<Vec<&'static ResourceInfo>, RegistryError> {
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
    pub fn unregister_version(&self, info: &'static ResourceInfo) -> Result<(), RegistryError> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let i = entries
            .iter()
            .position(|r| std::ptr::eq(*r, info) && !Self::is_builtin(r))
            .ok_or_else(|| RegistryError::NotFound(info.group_resource()))?;
        let info = entries.remove(i);
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(info);
        Ok(())
    }

    /// Stops serving one version of a run-time resource; built-ins stay.
    pub fn unregister(
        &self,
        group: &str,
        plural: &str,
    ) -> Result<&'static ResourceInfo, RegistryError> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let i = entries
            .iter()
            .position(|r| r.group == group && r.plural == plural)
            .ok_or_else(|| RegistryError::NotFound(format!("{plural}.{group}")))?;
        if Self::is_builtin(entries[i]) {
            return Err(RegistryError::BuiltIn(entries[i].group_resource()));
        }
        let info = entries.remove(i);
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(info);
        Ok(info)
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
        assert!(!Registry::is_builtin(info));
        assert_eq!(info.api_version(), "example.minik8s.io/v1");
        assert_eq!(
            info.key(Some("ns"), "w"),
            "/registry/example.minik8s.io/widgets/ns/w"
        );
        assert!(std::ptr::eq(
            reg.by_plural("example.minik8s.io", "v1", "widgets")
                .unwrap(),
            info
        ));
        assert!(std::ptr::eq(
            reg.by_kind("example.minik8s.io/v1", "Widget").unwrap(),
            info
        ));
        assert!(reg.group_versions().contains(&("example.minik8s.io", "v1")));
        assert!(info.matches_alias("wd"));

        reg.unregister("example.minik8s.io", "widgets").unwrap();
        assert!(reg
            .by_plural("example.minik8s.io", "v1", "widgets")
            .is_none());
        assert!(!reg.group_versions().contains(&("example.minik8s.io", "v1")));
        // The same kind again reuses its entry rather than leaking another.
        assert!(std::ptr::eq(reg.register(&widget()).unwrap(), info));
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
        reg.unregister_version(v1beta1).unwrap();
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
