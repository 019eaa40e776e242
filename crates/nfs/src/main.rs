//! `nfs-fuse SERVER:/PATH MOUNTPOINT`: mounts an NFS export with FUSE and
//! serves it until the mount is removed (`umount MOUNTPOINT`). The kubelet
//! runs one per NFS volume in use on its node.

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let (Some(source), Some(mountpoint)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: nfs-fuse SERVER:/PATH MOUNTPOINT");
    };
    let (server, path) = minik8s_nfs::parse_source(source)
        .ok_or_else(|| anyhow::anyhow!("{source}: expected SERVER:/PATH"))?;
    std::fs::create_dir_all(mountpoint)?;
    tracing::info!(%server, %path, %mountpoint, "mounting");
    minik8s_nfs::serve(&server, &path, std::path::Path::new(mountpoint))
}
