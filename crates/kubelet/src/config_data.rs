//! The ConfigMaps and Secrets a pod refers to (environment, `envFrom`,
//! `configMap`/`secret`/`projected` volumes), read for each sync that needs
//! them, and the volumes' files written as Kubernetes' AtomicWriter does:
//!
//! ```text
//!  <volume>/..2026_11_24_10_00_00.123456789/<key files>   one directory per content
//!  <volume>/..data -> ..2026_11_24_10_00_00.123456789      swapped by one rename
//!  <volume>/<key>  -> ..data/<key>                         what the container sees
//! ```
//!
//! so a reader in the container sees the old files or the new ones, never a mix.

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret, Volume};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One object's keys and values (a ConfigMap's `data` and `binaryData`, a Secret's `data`).
pub type Data = BTreeMap<String, Vec<u8>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    /// As Kubernetes names them in messages (`configmap "x" not found`).
    fn noun(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }
    fn title(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }
}

/// What the pod's references resolved to: None where the object does not exist.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PodConfig {
    pub namespace: String,
    pub objects: BTreeMap<(Kind, String), Option<Data>>,
    /// ServiceAccount tokens by (audience, expirationSeconds).
    pub tokens: BTreeMap<(String, i64), String>,
    /// The pod's own fields a downwardAPI item may name (`metadata.namespace`…).
    pub downward: BTreeMap<String, String>,
    /// Where each PersistentVolumeClaim volume's data is, by volume name.
    pub claims: BTreeMap<String, crate::claims::ClaimMount>,
    /// The Service variables (`service_env.rs`), before the container's own.
    pub service_env: Vec<(String, String)>,
    /// What `resourceFieldRef` reads (set for every sync that starts or mounts).
    pub resources: crate::resource_fields::ResourceView,
    /// Each container's devices (Dynamic Resource Allocation), by name.
    pub device_edits: std::collections::HashMap<String, crate::devices::ContainerEdits>,
}

/// Whether the kubelet writes the volume's content (configMap, secret,
/// projected, downwardAPI) rather than giving an empty directory.
pub fn is_published(v: &Volume) -> bool {
    v.config_map.is_some()
        || v.secret.is_some()
        || v.projected.is_some()
        || v.downward_api.is_some()
}

/// The (audience, expirationSeconds) of every projected token the pod mounts.
pub fn token_sources(pod: &Pod) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
        .filter_map(|src| src.service_account_token.as_ref())
        .map(|t| {
            (
                t.audience.clone().unwrap_or_default(),
                t.expiration_seconds.unwrap_or(3600),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The fields of `pod` downwardAPI volumes can project.
pub fn downward_fields(pod: &Pod) -> BTreeMap<String, String> {
    let m = &pod.metadata;
    let map_text = |m: Option<&BTreeMap<String, String>>| {
        m.map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
    };
    let spec = pod.spec.as_ref();
    BTreeMap::from([
        (
            "metadata.name".to_string(),
            m.name.clone().unwrap_or_default(),
        ),
        (
            "metadata.namespace".to_string(),
            m.namespace.clone().unwrap_or_default(),
        ),
        (
            "metadata.uid".to_string(),
            m.uid.clone().unwrap_or_default(),
        ),
        ("metadata.labels".to_string(), map_text(m.labels.as_ref())),
        (
            "metadata.annotations".to_string(),
            map_text(m.annotations.as_ref()),
        ),
        (
            "spec.nodeName".to_string(),
            spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        ),
        (
            "spec.serviceAccountName".to_string(),
            spec.and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
        ),
    ])
}

impl PodConfig {
    /// The object's data; Err is the message of a required one that is missing.
    pub fn get(&self, kind: Kind, name: &str, optional: bool) -> Result<Option<&Data>, String> {
        match self.objects.get(&(kind, name.to_string())) {
            Some(Some(d)) => Ok(Some(d)),
            _ if optional => Ok(None),
            _ => Err(format!("{} \"{name}\" not found", kind.noun())),
        }
    }

    /// One key; Err is Kubernetes' message when a required one is missing.
    pub fn key(
        &self,
        kind: Kind,
        name: &str,
        key: &str,
        optional: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        let Some(data) = self.get(kind, name, optional)? else {
            return Ok(None);
        };
        match data.get(key) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(format!(
                "couldn't find key {key} in {} {}/{name}",
                kind.title(),
                self.namespace
            )),
        }
    }
}

/// Every (kind, name) the pod refers to.
pub fn references(pod: &Pod) -> BTreeSet<(Kind, String)> {
    let mut out = BTreeSet::new();
    let Some(spec) = &pod.spec else { return out };
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for e in c.env.iter().flatten() {
            let from = e.value_from.as_ref();
            if let Some(r) = from.and_then(|f| f.config_map_key_ref.as_ref()) {
                out.insert((Kind::ConfigMap, r.name.clone()));
            }
            if let Some(r) = from.and_then(|f| f.secret_key_ref.as_ref()) {
                out.insert((Kind::Secret, r.name.clone()));
            }
        }
        for f in c.env_from.iter().flatten() {
            if let Some(r) = &f.config_map_ref {
                out.insert((Kind::ConfigMap, r.name.clone()));
            }
            if let Some(r) = &f.secret_ref {
                out.insert((Kind::Secret, r.name.clone()));
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        out.extend(volume_sources(v).into_iter().map(|s| (s.kind, s.name)));
    }
    out
}

/// One ConfigMap or Secret projected into a volume.
#[derive(Debug, Clone)]
pub struct Projection {
    pub kind: Kind,
    pub name: String,
    pub items: Option<Vec<KeyToPath>>,
    pub optional: bool,
}

/// The ConfigMaps and Secrets behind a volume (one, or several when projected),
/// and its defaultMode.
pub fn volume_sources(v: &Volume) -> Vec<Projection> {
    let mut out = Vec::new();
    if let Some(cm) = &v.config_map {
        out.push(Projection {
            kind: Kind::ConfigMap,
            name: cm.name.clone(),
            items: cm.items.clone(),
            optional: cm.optional.unwrap_or(false),
        });
    }
    if let Some(s) = &v.secret {
        out.push(Projection {
            kind: Kind::Secret,
            name: s.secret_name.clone().unwrap_or_default(),
            items: s.items.clone(),
            optional: s.optional.unwrap_or(false),
        });
    }
    for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
        if let Some(cm) = &p.config_map {
            out.push(Projection {
                kind: Kind::ConfigMap,
                name: cm.name.clone(),
                items: cm.items.clone(),
                optional: cm.optional.unwrap_or(false),
            });
        }
        if let Some(s) = &p.secret {
            out.push(Projection {
                kind: Kind::Secret,
                name: s.name.clone(),
                items: s.items.clone(),
                optional: s.optional.unwrap_or(false),
            });
        }
    }
    out
}

/// The volume's default file mode (0644 unless it says otherwise).
fn default_mode(v: &Volume) -> u32 {
    let mode = v
        .config_map
        .as_ref()
        .and_then(|c| c.default_mode)
        .or_else(|| v.secret.as_ref().and_then(|s| s.default_mode))
        .or_else(|| v.projected.as_ref().and_then(|p| p.default_mode));
    mode.map(|m| m as u32).unwrap_or(0o644)
}

/// The files a volume holds: relative path → (content, mode). Err is the
/// message of a missing required object or key.
pub fn volume_files(
    v: &Volume,
    cfg: &PodConfig,
) -> Result<BTreeMap<String, (Vec<u8>, u32)>, String> {
    let mode = default_mode(v);
    let mut files = BTreeMap::new();
    let downward_items = v
        .downward_api
        .iter()
        .flat_map(|d| d.items.iter().flatten())
        .chain(
            v.projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
                .flat_map(|s| s.downward_api.iter().flat_map(|d| d.items.iter().flatten())),
        );
    for item in downward_items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(field), _) => cfg
                .downward
                .get(&field.field_path)
                .cloned()
                .ok_or_else(|| format!("unsupported fieldPath {:?}", field.field_path))?,
            (None, Some(r)) => cfg.resources.value(
                r.container_name.as_deref().unwrap_or(""),
                &r.resource,
                r.divisor.as_ref(),
            )?,
            (None, None) => continue,
        };
        let m = item.mode.map(|m| m as u32).unwrap_or(mode);
        files.insert(item.path.clone(), (value.into_bytes(), m));
    }
    for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
        if let Some(t) = &src.service_account_token {
            let key = (
                t.audience.clone().unwrap_or_default(),
                t.expiration_seconds.unwrap_or(3600),
            );
            let token = cfg
                .tokens
                .get(&key)
                .ok_or_else(|| "failed to fetch token".to_string())?;
            files.insert(t.path.clone(), (token.clone().into_bytes(), mode));
        }
    }
    for p in volume_sources(v) {
        let Some(data) = cfg.get(p.kind, &p.name, p.optional)? else {
            continue;
        };
        match &p.items {
            None => {
                for (k, val) in data {
                    files.insert(k.clone(), (val.clone(), mode));
                }
            }
            Some(items) => {
                for item in items {
                    // Never outside the volume (the API refuses these paths too).
                    if let Some(e) = minik8s_api::names::item_path_error(&item.path) {
                        return Err(format!("invalid path {:?}: {e}", item.path));
                    }
                    match data.get(&item.key) {
                        Some(val) => {
                            let m = item.mode.map(|m| m as u32).unwrap_or(mode);
                            files.insert(item.path.clone(), (val.clone(), m));
                        }
                        None if p.optional => {}
                        None => {
                            return Err(format!(
                                "{} references non-existent {} key: {}",
                                p.kind.noun(),
                                if p.kind == Kind::Secret {
                                    "secret"
                                } else {
                                    "config"
                                },
                                item.key
                            ))
                        }
                    }
                }
            }
        }
    }
    Ok(files)
}

/// Reads the files currently published in `dir` (through `..data`).
fn published(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let root = dir.join("..data");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let (Ok(bytes), Ok(meta), Ok(rel)) = (
                std::fs::read(&path),
                std::fs::metadata(&path),
                path.strip_prefix(&root),
            ) {
                let mode = meta.permissions().mode() & 0o777;
                out.insert(rel.display().to_string(), (bytes, mode));
            }
        }
    }
    out
}

/// The pod's `fsGroup` on its published volumes, as Kubernetes' volume
/// ownership: every file readable by the group (`| 0440`) and owned by it.
pub fn with_fs_group(files: &mut BTreeMap<String, (Vec<u8>, u32)>, fs_group: Option<u32>) {
    if fs_group.is_some() {
        for (_, mode) in files.values_mut() {
            *mode |= 0o440;
        }
    }
}

/// Publishes `files` in `dir` atomically (see the module doc), owned by
/// `group` when given; does nothing when they are already there. Returns
/// whether it wrote.
pub fn publish(
    dir: &Path,
    files: &BTreeMap<String, (Vec<u8>, u32)>,
    group: Option<u32>,
) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    if dir.join("..data").exists() && published(dir) == *files {
        return Ok(false);
    }
    let stamp = chrono::Utc::now()
        .format("..%Y_%m_%d_%H_%M_%S.%9f")
        .to_string();
    let fresh = dir.join(&stamp);
    std::fs::create_dir_all(&fresh)?;
    for (rel, (bytes, mode)) in files {
        let path = fresh.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))?;
        if let Some(gid) = group {
            std::os::unix::fs::chown(&path, None, Some(gid))?;
        }
    }
    if let Some(gid) = group {
        std::os::unix::fs::chown(&fresh, None, Some(gid))?;
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    // The visible names: one symlink per top-level entry, through ..data.
    let top: BTreeSet<String> = files
        .keys()
        .filter_map(|rel| rel.split('/').next().map(str::to_string))
        .collect();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("..") && !top.contains(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    for name in &top {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link)?;
        }
    }
    if let Some(old) = old.filter(|o| o.as_os_str() != stamp.as_str()) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(true)
}

/// A ConfigMap's keys and values.
pub fn config_map_data(cm: &ConfigMap) -> Data {
    let mut out: Data = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    out
}

/// A Secret's keys and values (decoded).
pub fn secret_data(s: &Secret) -> Data {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
