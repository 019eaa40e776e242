//! The built-in dynamic NFS provisioner `minik8s.io/nfs`, as Kubernetes'
//! nfs-subdir-external-provisioner: a class names an export
//! (`parameters.server`, `parameters.path`); each claim gets a directory of
//! its own there, `<namespace>-<claim>-<volume>`, made over NFS from the
//! controller manager (a user-space NFSv3 client, `minik8s-nfs`), served as
//! an `nfs` volume that pods on any node mount, ReadWriteMany included. On
//! reclaim (`Delete`) the directory and its files are removed the same way.

use super::*;
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Value};

/// The provisioner's name in a StorageClass.
pub const PROVISIONER: &str = "minik8s.io/nfs";

/// The class's export: (server, path).
pub fn export_of(class: &StorageClass) -> Result<(String, String), String> {
    let p = class.parameters.clone().unwrap_or_default();
    match (p.get("server"), p.get("path")) {
        (Some(server), Some(path)) if !server.is_empty() && path.starts_with('/') => {
            Ok((server.clone(), path.trim_end_matches('/').to_string()))
        }
        _ => Err(format!(
            "StorageClass \"{}\": parameters.server and parameters.path (absolute) name the NFS export",
            class.metadata.name.as_deref().unwrap_or("")
        )),
    }
}

/// The directory of a claim's volume in the export.
pub fn directory(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}-{}-pvc-{}",
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or(""),
        claim.metadata.uid.as_deref().unwrap_or("")
    )
}

/// The volume made for `claim` in `class`'s export: an `nfs` volume of its
/// own directory, pre-bound to the claim.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    server: &str,
    export: &str,
) -> Value {
    let mut pv = provisioned_volume(claim, class, PROVISIONER);
    pv["spec"]["mountOptions"] = json!(class.mount_options);
    pv["spec"]["nfs"] = json!({"server": server, "path": format!("{export}/{}", directory(claim))});
    pv
}

/// Makes the claim's directory (mode 0777: pods run as any user) and returns its volume.
pub async fn provision(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<Value, String> {
    let (server, export) = export_of(class)?;
    let mut nfs = minik8s_nfs::Nfs::connect(&server, &export)
        .await
        .map_err(|e| {
            format!(
                "failed to provision volume with StorageClass \"{}\": {e}",
                class.metadata.name.as_deref().unwrap_or("")
            )
        })?;
    nfs.mkdir_all(&directory(claim), 0o777)
        .await
        .map_err(|e| format!("making the claim's directory in {server}:{export}: {e}"))?;
    Ok(volume_for(claim, class, &server, &export))
}

/// Removes a released volume's directory and everything in it.
pub async fn remove(pv: &PersistentVolume) -> Result<(), String> {
    let nfs = pv
        .spec
        .as_ref()
        .and_then(|s| s.nfs.as_ref())
        .ok_or("the volume is not an nfs volume")?;
    let (export, dir) = nfs
        .path
        .rsplit_once('/')
        .filter(|(_, d)| !d.is_empty())
        .ok_or("the volume's path has no directory")?;
    let export = if export.is_empty() { "/" } else { export };
    let mut client = minik8s_nfs::Nfs::connect(&nfs.server, export)
        .await
        .map_err(|e| e.to_string())?;
    let root = client.root.clone();
    client
        .remove_all(&root, dir.as_bytes())
        .await
        .map_err(|e| format!("removing {}:{}: {e}", nfs.server, nfs.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_claim_gets_a_directory_of_the_export() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "shared", "namespace": "team", "uid": "u7"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})).unwrap();
        let class: StorageClass = serde_json::from_value(
            json!({"metadata": {"name": "nfs"}, "provisioner": PROVISIONER,
            "parameters": {"server": "192.168.79.9", "path": "/exports/"}}),
        )
        .unwrap();
        let (server, export) = export_of(&class).unwrap();
        assert_eq!(
            (server.as_str(), export.as_str()),
            ("192.168.79.9", "/exports")
        );
        let v = volume_for(&claim, &class, &server, &export);
        assert_eq!(
            v["spec"]["nfs"],
            json!({"server": "192.168.79.9", "path": "/exports/team-shared-pvc-u7"})
        );
        assert_eq!(v["spec"]["accessModes"], json!(["ReadWriteMany"]));
        assert!(
            v["spec"].get("nodeAffinity").is_none(),
            "any node reaches it"
        );
        let bare: StorageClass = serde_json::from_value(
            json!({"metadata": {"name": "nfs"}, "provisioner": PROVISIONER}),
        )
        .unwrap();
        assert!(export_of(&bare).unwrap_err().contains("parameters.server"));
    }
}
