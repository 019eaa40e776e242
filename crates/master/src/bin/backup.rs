//! `minik8s-backup`: snapshots of the control plane's store, and restoring one.
//!
//! ```text
//!  minik8s-backup save --to FILE                  the embedded store (--data-dir, default /var/lib/minik8s)
//!  minik8s-backup save --dir DIR --keep 7         a timestamped file in DIR, the 7 newest kept (for a timer)
//!  minik8s-backup save --etcd-servers URL --to F  etcd's keys, in the same snapshot format
//!  minik8s-backup save --etcd-servers URL --etcd-native --to F   etcd's own snapshot (for etcdctl)
//!  minik8s-backup restore --from FILE             a stopped master's embedded store replaced by FILE
//!  minik8s-backup restore --etcd-servers URL --from FILE   etcd's keys replaced (master stopped)
//!  minik8s-backup inspect FILE                    is FILE a whole snapshot? its revision and key count
//! ```
//!
//! A save runs beside the serving master (one consistent read). A restore
//! raises the store's compaction point above every revision handed out, so
//! every client relists and the cluster converges to the backup: pods not in
//! it are removed by their kubelets, missing ones recreated by their
//! controllers (`doc/deploy.md`, "Backup and restore").
use anyhow::Context;
use apiserver::store::embedded::backup;
use apiserver::store::etcd::EtcdStore;
use apiserver::store::Store;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(
    name = "minik8s-backup",
    about = "snapshots of the minik8s store, and restoring one"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A consistent snapshot of the (running) master's store.
    Save {
        /// The master's data directory (its embedded store).
        #[arg(long, default_value = "/var/lib/minik8s")]
        data_dir: PathBuf,
        /// Snapshot etcd instead (the master's --etcd-servers).
        #[arg(long)]
        etcd_servers: Option<String>,
        /// With --etcd-servers: etcd's own snapshot file (`etcdctl snapshot
        /// restore` reads it) instead of minik8s' format.
        #[arg(long, requires = "etcd_servers")]
        etcd_native: bool,
        /// The snapshot file.
        #[arg(long, conflicts_with = "dir", required_unless_present = "dir")]
        to: Option<PathBuf>,
        /// A directory for timestamped snapshots (minik8s-<UTC time>.db).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// With --dir: how many snapshots to keep (the oldest go).
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
        keep: u32,
    },
    /// Replace a stopped master's store (embedded, or etcd's keys) with a snapshot.
    Restore {
        #[arg(long)]
        from: PathBuf,
        #[arg(long, default_value = "/var/lib/minik8s")]
        data_dir: PathBuf,
        /// Restore into etcd (the master's --etcd-servers) instead.
        #[arg(long)]
        etcd_servers: Option<String>,
    },
    /// Check a snapshot file: its revision and live keys.
    Inspect { file: PathBuf },
}

/// Every key the apiserver keeps in a store.
const PREFIX: &str = "/registry/";

async fn connect(endpoints: &str) -> anyhow::Result<EtcdStore> {
    EtcdStore::connect(endpoints)
        .await
        .with_context(|| format!("connecting to etcd at {endpoints}"))
}

/// A restore under a serving master would be overwritten and confuse it:
/// refused while the controller manager's Lease is being renewed.
async fn refuse_if_serving(store: &EtcdStore) -> anyhow::Result<()> {
    let key = "/registry/leases/kube-system/kube-controller-manager";
    let Some(kv) = store.get(key).await? else {
        return Ok(());
    };
    let lease: serde_json::Value = serde_json::from_slice(&kv.value).unwrap_or_default();
    let renewed = lease
        .pointer("/spec/renewTime")
        .and_then(|t| t.as_str())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    if let Some(t) = renewed {
        let age = chrono::Utc::now().signed_duration_since(t).num_seconds();
        anyhow::ensure!(
            age > 30,
            "a master is serving from this etcd (its controller manager renewed its lease {age} s ago): stop it before restoring"
        );
    }
    Ok(())
}

/// The snapshots of `dir` (minik8s-*.db), oldest first.
fn snapshots_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("minik8s-") && name.ends_with(".db")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Long on purpose: the command's steps in the order it takes them,
/// read top to bottom.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Save {
            data_dir,
            etcd_servers,
            etcd_native,
            to,
            dir,
            keep,
        } => {
            let to = match (&to, &dir) {
                (Some(to), _) => to.clone(),
                (None, Some(dir)) => {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
                    dir.join(format!("minik8s-{stamp}.db"))
                }
                (None, None) => unreachable!("clap requires --to or --dir"),
            };
            match etcd_servers {
                Some(endpoints) => {
                    let store = connect(&endpoints).await?;
                    if etcd_native {
                        let bytes = store.save_snapshot(&to).await?;
                        println!("saved {} (etcd snapshot, {bytes} bytes)", to.display());
                    } else {
                        // One read at one revision: a consistent copy of every key.
                        let (kvs, revision) = store.list(PREFIX, None).await?;
                        let info = backup::write_snapshot(&kvs, revision, &to)?;
                        println!(
                            "saved {} from etcd: revision {}, {} keys",
                            to.display(),
                            info.revision,
                            info.keys
                        );
                    }
                }
                None => {
                    let info = backup::save(&data_dir, &to)?;
                    println!(
                        "saved {}: revision {}, {} keys",
                        to.display(),
                        info.revision,
                        info.keys
                    );
                }
            }
            if let Some(dir) = dir {
                let files = snapshots_in(&dir)?;
                let extra = files.len().saturating_sub(keep as usize);
                for old in &files[..extra] {
                    std::fs::remove_file(old)
                        .with_context(|| format!("removing {}", old.display()))?;
                    println!("removed {} (keeping {keep})", old.display());
                }
            }
        }
        Command::Restore {
            from,
            data_dir: _,
            etcd_servers: Some(endpoints),
        } => {
            let (kvs, info) = backup::read_snapshot(&from)?;
            let store = connect(&endpoints).await?;
            refuse_if_serving(&store).await?;
            let revision = store.replace_all(PREFIX, &kvs).await?;
            println!(
                "restored {} into etcd at {endpoints}: {} keys of revision {}; etcd goes on from revision {revision}, compacted there (clients relist)",
                from.display(),
                info.keys,
                info.revision
            );
        }
        Command::Restore {
            from,
            data_dir,
            etcd_servers: None,
        } => {
            let r = backup::restore(&from, &data_dir)?;
            println!(
                "restored {} into {}: {} keys of revision {}; the store goes on from revision {} (older resourceVersions are compacted: clients relist)",
                from.display(),
                data_dir.display(),
                r.snapshot.keys,
                r.snapshot.revision,
                r.revision
            );
            if let Some(previous) = r.previous {
                println!("the replaced store is kept as {}", previous.display());
            }
        }
        Command::Inspect { file } => {
            let info = backup::inspect(&file)?;
            println!(
                "{}: a whole snapshot, revision {}, {} keys",
                file.display(),
                info.revision,
                info.keys
            );
        }
    }
    Ok(())
}
