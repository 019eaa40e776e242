//! NFS for minik8s nodes, whose kernel may have no NFS client: an NFSv3
//! client in user space (`client.rs`, over the `nfs3_client` crate) and a
//! FUSE file system on it (`fuse.rs`). The kubelet runs the `nfs-fuse`
//! binary to mount a PersistentVolume's export on its node, then
//! bind-mounts it into the pod's containers; the controller manager's NFS
//! provisioner uses the client to make and remove each claim's directory.
//!
//! ```text
//!  container ─ bind mount ─▶ <kubelet root>/nfs/<server>_<path> ─ FUSE ─▶ nfs-fuse ─ NFSv3/TCP ─▶ server (ganesha)
//! ```

pub mod client;
pub mod fuse;

pub use client::{parse_source, Nfs, NfsError};

/// Mounts `server:path` at `mountpoint` and serves it until it is unmounted
/// (blocks). Anyone may use the mount (allow_other): pods run as any user.
pub fn serve(server: &str, path: &str, mountpoint: &std::path::Path) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let nfs = rt.block_on(Nfs::connect(server, path))?;
    let fs = fuse::NfsFs::new(rt, nfs)?;
    let options = [
        fuser::MountOption::FSName(format!("{server}:{path}")),
        fuser::MountOption::Subtype("nfs".into()),
        fuser::MountOption::AllowOther,
    ];
    fuser::mount2(fs, mountpoint, &options)?;
    Ok(())
}
