//! PersistentVolumeClaim volumes: before a pod's containers start, each
//! claim it names must be Bound; its volume (hostPath or local, a directory
//! on this node) is then bind-mounted like a hostPath. Data is never removed
//! here: a volume's data goes only by its reclaim policy (the controller
//! manager's local-path helper pod), so a Retain volume keeps it for good.
//!
//! ```text
//!  pod volume {persistentVolumeClaim: data} ─▶ GET claim ─ not Bound ─▶ containers wait (ContainerCreating, FailedMount)
//!                                                 │ Bound
//!                                                 ▼
//!              GET volume ─▶ hostPath / local path ─▶ create (DirectoryOrCreate, provisioned), fsGroup ─▶ bind mount
//!                         └▶ nfs server:/path ─▶ nfs_mounts.rs: nfs-fuse at <root>/nfs/… (once per node) ─▶ bind mount
//! ```

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use minik8s_api::registry;
use minik8s_api::storage::PROVISIONED_BY;
use minik8s_client::Client;
use std::collections::BTreeMap;

/// Where one claim volume of the pod lives on this node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimMount {
    pub path: String,
    /// The directory may be created (hostPath DirectoryOrCreate, or a provisioned volume).
    pub create: bool,
    /// A provisioned directory is writable by anyone, as k3s's local-path makes it.
    pub open_mode: bool,
    /// The pod's volume or the volume says read-only.
    pub read_only: bool,
    /// fsGroup applies (local and provisioned volumes; Kubernetes leaves hostPath alone).
    pub owned: bool,
    /// An NFS volume's `server:/path`: mounted by `nfs_mounts.rs`, `path` unused.
    pub nfs: Option<String>,
}

/// Why a claim volume cannot be set up yet (the containers' waiting message).
pub fn not_bound(volume: &str, ns: &str, claim: &str, why: &str) -> String {
    format!(
        "Unable to attach or mount volumes: unmounted volumes=[{volume}]: error processing PVC {ns}/{claim}: {why}"
    )
}

/// Where a bound volume's data is on this node.
pub fn mount_of(pv: &PersistentVolume, read_only: bool) -> Result<ClaimMount, String> {
    let spec = pv.spec.as_ref().ok_or("the volume has no spec")?;
    let provisioned = pv
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PROVISIONED_BY));
    if let Some(hp) = &spec.host_path {
        return Ok(ClaimMount {
            path: hp.path.clone(),
            create: provisioned || hp.type_.as_deref() == Some("DirectoryOrCreate"),
            open_mode: provisioned,
            read_only,
            owned: provisioned,
            nfs: None,
        });
    }
    if let Some(local) = &spec.local {
        return Ok(ClaimMount {
            path: local.path.clone(),
            create: false,
            open_mode: false,
            read_only,
            owned: true,
            nfs: None,
        });
    }
    if let Some(nfs) = &spec.nfs {
        return Ok(ClaimMount {
            read_only: read_only || nfs.read_only == Some(true),
            nfs: Some(format!("{}:{}", nfs.server, nfs.path)),
            ..Default::default()
        });
    }
    Err("the volume's type is not supported by minik8s (hostPath, local and nfs are)".into())
}

/// The pod's claim volumes by volume name, looked up through the API;
/// Err(message) while one cannot be mounted yet.
pub async fn resolve(
    client: &Client,
    pod: &Pod,
) -> anyhow::Result<Result<BTreeMap<String, ClaimMount>, String>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = BTreeMap::new();
    for v in pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
    {
        let Some(source) = &v.persistent_volume_claim else {
            continue;
        };
        let claim_name = &source.claim_name;
        let fail = |why: &str| Ok(Err(not_bound(&v.name, ns, claim_name, why)));
        let claim = match client
            .dynamic(registry::of::<PersistentVolumeClaim>(), Some(ns))
            .get(claim_name)
            .await
        {
            Ok(c) => serde_json::from_value::<PersistentVolumeClaim>(c)?,
            Err(e) if e.is_not_found() => {
                return fail(&format!("persistentvolumeclaim \"{claim_name}\" not found"))
            }
            Err(e) => return Err(e.into()),
        };
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        let volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|n| !n.is_empty());
        let Some(volume) = volume.filter(|_| phase == Some("Bound")) else {
            return fail("PVC is not bound");
        };
        let pv = match client
            .dynamic(registry::of::<PersistentVolume>(), None)
            .get(&volume)
            .await
        {
            Ok(pv) => serde_json::from_value::<PersistentVolume>(pv)?,
            Err(e) if e.is_not_found() => {
                return fail(&format!("persistentvolume \"{volume}\" not found"))
            }
            Err(e) => return Err(e.into()),
        };
        match mount_of(&pv, source.read_only == Some(true)) {
            Ok(m) => {
                out.insert(v.name.clone(), m);
            }
            Err(why) => {
                return Ok(Err(format!(
                    "MountVolume.SetUp failed for volume \"{}\" : {why}",
                    v.name
                )))
            }
        }
    }
    Ok(Ok(out))
}

/// Makes the volume's directory ready on this node: created where allowed,
/// open to anyone when provisioned, and owned by the pod's fsGroup (files
/// in it too, whenever the top does not match yet).
pub fn set_up(m: &ClaimMount, pod: &Pod) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = std::path::Path::new(&m.path);
    if !dir.exists() {
        if !m.create {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("path \"{}\" does not exist", m.path),
            ));
        }
        std::fs::create_dir_all(dir)?;
        if m.open_mode {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
        }
    }
    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let Some(gid) = security
        .and_then(|s| s.fs_group)
        .and_then(|g| u32::try_from(g).ok())
        .filter(|_| m.owned && !m.read_only)
    else {
        return Ok(());
    };
    // Every sync passes here, so the walk happens only when the top does
    // not match (OnRootMismatch; with a setgid top, new files inherit the
    // group anyway).
    let top = std::fs::metadata(dir)?;
    if top.gid() == gid && top.mode() & 0o2070 == 0o2070 {
        return Ok(());
    }
    own(dir, gid)
}

/// chown :gid, group read-write, setgid on directories — recursively.
fn own(path: &std::path::Path, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    std::os::unix::fs::chown(path, None, Some(gid))?;
    let mode = meta.permissions().mode() & 0o7777;
    let extra = if meta.is_dir() { 0o2070 } else { 0o060 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | extra))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            own(&entry?.path(), gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provisioned_volumes_are_created_open_and_owned() {
        let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pvc-1",
            "annotations": {PROVISIONED_BY: "minik8s.io/local-path"}},
            "spec": {"hostPath": {"path": "/srv/pvc-1", "type": "DirectoryOrCreate"}}}))
        .unwrap();
        let m = mount_of(&pv, false).unwrap();
        assert!(m.create && m.open_mode && m.owned && !m.read_only);
        let by_hand: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv"},
            "spec": {"hostPath": {"path": "/srv/data"}}}))
        .unwrap();
        let m = mount_of(&by_hand, true).unwrap();
        assert!(!m.create && !m.owned && m.read_only);
        let nfs: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv"},
            "spec": {"nfs": {"server": "10.0.0.1", "path": "/exports", "readOnly": true}}}))
        .unwrap();
        let m = mount_of(&nfs, false).unwrap();
        assert_eq!(m.nfs.as_deref(), Some("10.0.0.1:/exports"));
        assert!(m.read_only && !m.owned);
    }

    #[test]
    fn fs_group_owns_the_volume_and_its_files() {
        let dir = std::env::temp_dir().join(format!("claims-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = ClaimMount {
            path: dir.join("vol").display().to_string(),
            create: true,
            open_mode: true,
            owned: true,
            ..Default::default()
        };
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "securityContext": {"fsGroup": 2000}}}))
            .unwrap();
        set_up(&m, &pod).unwrap();
        std::fs::write(dir.join("vol/file"), "x").unwrap();
        set_up(&m, &pod).unwrap();
        use std::os::unix::fs::MetadataExt;
        let file = std::fs::metadata(dir.join("vol/file")).unwrap();
        assert_eq!(file.gid(), 2000);
        let top = std::fs::metadata(dir.join("vol")).unwrap();
        assert_eq!(top.mode() & 0o2777, 0o2777);
        let missing = ClaimMount {
            path: dir.join("absent").display().to_string(),
            ..Default::default()
        };
        assert!(set_up(&missing, &pod)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
