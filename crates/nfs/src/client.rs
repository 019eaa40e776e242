//! A small NFSv3 client over the `nfs3_client` crate: connect (portmapper,
//! MOUNT, then NFS over TCP from a privileged port, AUTH_UNIX as root), and
//! the calls the FUSE file system and the provisioner make, with NFS status
//! codes turned into errno values.

use nfs3_client::nfs3_types::nfs3::*;
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::tokio::{TokioConnector, TokioIo};
use nfs3_client::{Nfs3Connection, Nfs3ConnectionBuilder};
use tokio::net::TcpStream;

/// An NFS failure as an errno value (what FUSE answers), with a message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NfsError {
    pub errno: i32,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, NfsError>;

fn rpc(e: impl std::fmt::Display) -> NfsError {
    NfsError {
        errno: libc::EIO,
        message: format!("NFS RPC failed: {e}"),
    }
}

/// errno for an NFS status (RFC 1813 §2.6).
pub fn errno(status: nfsstat3) -> i32 {
    use nfsstat3::*;
    match status {
        NFS3ERR_PERM => libc::EPERM,
        NFS3ERR_NOENT => libc::ENOENT,
        NFS3ERR_ACCES => libc::EACCES,
        NFS3ERR_EXIST => libc::EEXIST,
        NFS3ERR_XDEV => libc::EXDEV,
        NFS3ERR_NOTDIR => libc::ENOTDIR,
        NFS3ERR_ISDIR => libc::EISDIR,
        NFS3ERR_INVAL => libc::EINVAL,
        NFS3ERR_FBIG => libc::EFBIG,
        NFS3ERR_NOSPC => libc::ENOSPC,
        NFS3ERR_ROFS => libc::EROFS,
        NFS3ERR_MLINK => libc::EMLINK,
        NFS3ERR_NAMETOOLONG => libc::ENAMETOOLONG,
        NFS3ERR_NOTEMPTY => libc::ENOTEMPTY,
        NFS3ERR_DQUOT => libc::EDQUOT,
        NFS3ERR_STALE | NFS3ERR_BADHANDLE => libc::ESTALE,
        NFS3ERR_NOTSUPP => libc::ENOTSUP,
        _ => libc::EIO,
    }
}

fn check<T, E>(what: &str, r: Nfs3Result<T, E>) -> Result<T> {
    match r {
        Nfs3Result::Ok(v) => Ok(v),
        Nfs3Result::Err((status, _)) => Err(NfsError {
            errno: errno(status),
            message: format!("{what}: {status}"),
        }),
    }
}

/// `server:/path` → (server, path).
pub fn parse_source(source: &str) -> Option<(String, String)> {
    let (server, path) = source.split_once(':')?;
    (!server.is_empty() && path.starts_with('/')).then(|| (server.to_string(), path.to_string()))
}

pub fn name(n: &[u8]) -> filename3<'static> {
    filename3(Opaque::owned(n.to_vec()))
}

/// A mounted export.
pub struct Nfs {
    conn: Nfs3Connection<TokioIo<TcpStream>>,
    pub root: nfs_fh3,
}

impl Nfs {
    /// Mounts `path` of `server` (an address or a host name), as root (AUTH_UNIX uid 0).
    pub async fn connect(server: &str, path: &str) -> Result<Nfs> {
        let address = match server.parse::<std::net::IpAddr>() {
            Ok(ip) => ip,
            Err(_) => tokio::net::lookup_host((server, 111))
                .await
                .ok()
                .and_then(|mut a| a.next())
                .map(|a| a.ip())
                .ok_or_else(|| NfsError {
                    errno: libc::EHOSTUNREACH,
                    message: format!("{server}: no such host"),
                })?,
        };
        let server = address.to_string();
        let server = server.as_str();
        let credential = opaque_auth::auth_unix(&auth_unix {
            stamp: std::process::id(),
            machinename: Opaque::owned(b"minik8s".to_vec()),
            uid: 0,
            gid: 0,
            gids: vec![],
        });
        let conn = Nfs3ConnectionBuilder::new(TokioConnector, server, path)
            .credential(credential)
            .mount()
            .await
            .map_err(|e| NfsError {
                errno: libc::EIO,
                message: format!("mounting {server}:{path}: {e}"),
            })?;
        let root = conn.root_nfs_fh3();
        Ok(Nfs { conn, root })
    }

    pub async fn getattr(&mut self, fh: &nfs_fh3) -> Result<fattr3> {
        let r = self
            .conn
            .getattr(&GETATTR3args { object: fh.clone() })
            .await
            .map_err(rpc)?;
        Ok(check("GETATTR", r)?.obj_attributes)
    }

    pub async fn lookup(&mut self, dir: &nfs_fh3, n: &[u8]) -> Result<(nfs_fh3, fattr3)> {
        let r = self
            .conn
            .lookup(&LOOKUP3args {
                what: diropargs3 {
                    dir: dir.clone(),
                    name: name(n),
                },
            })
            .await
            .map_err(rpc)?;
        let ok = check("LOOKUP", r)?;
        let attrs = match ok.obj_attributes {
            Nfs3Option::Some(a) => a,
            Nfs3Option::None => self.getattr(&ok.object).await?,
        };
        Ok((ok.object, attrs))
    }

    /// Every entry of a directory: (name, handle, attributes).
    pub async fn list(
        &mut self,
        dir: &nfs_fh3,
    ) -> Result<Vec<(Vec<u8>, Option<nfs_fh3>, Option<fattr3>)>> {
        let mut out = Vec::new();
        let (mut cookie, mut verf) = (0, cookieverf3::default());
        loop {
            let r = self
                .conn
                .readdirplus(&READDIRPLUS3args {
                    dir: dir.clone(),
                    cookie,
                    cookieverf: verf,
                    dircount: 16 * 1024,
                    maxcount: 64 * 1024,
                })
                .await
                .map_err(rpc)?;
            let ok = check("READDIRPLUS", r)?;
            verf = ok.cookieverf;
            for e in ok.reply.entries.0 {
                cookie = e.cookie;
                let fh = match e.name_handle {
                    Nfs3Option::Some(fh) => Some(fh),
                    Nfs3Option::None => None,
                };
                let attrs = match e.name_attributes {
                    Nfs3Option::Some(a) => Some(a),
                    Nfs3Option::None => None,
                };
                out.push((e.name.0.to_vec(), fh, attrs));
            }
            if ok.reply.eof {
                return Ok(out);
            }
        }
    }

    pub async fn read(&mut self, fh: &nfs_fh3, offset: u64, count: u32) -> Result<(Vec<u8>, bool)> {
        let r = self
            .conn
            .read(&READ3args {
                file: fh.clone(),
                offset,
                count,
            })
            .await
            .map_err(rpc)?;
        let ok = check("READ", r)?;
        Ok((ok.data.to_vec(), ok.eof))
    }

    /// Writes synchronously (FILE_SYNC): what one node writes another reads at once.
    pub async fn write(&mut self, fh: &nfs_fh3, offset: u64, data: &[u8]) -> Result<u32> {
        let r = self
            .conn
            .write(&WRITE3args {
                file: fh.clone(),
                offset,
                count: data.len() as u32,
                stable: stable_how::FILE_SYNC,
                data: Opaque::borrowed(data),
            })
            .await
            .map_err(rpc)?;
        Ok(check("WRITE", r)?.count)
    }

    /// The handle and attributes a create or mkdir answered (looked up when it did not say).
    async fn made(
        &mut self,
        dir: &nfs_fh3,
        n: &[u8],
        fh: post_op_fh3,
        attrs: post_op_attr,
    ) -> Result<(nfs_fh3, fattr3)> {
        match (fh, attrs) {
            (Nfs3Option::Some(fh), Nfs3Option::Some(a)) => Ok((fh, a)),
            (Nfs3Option::Some(fh), Nfs3Option::None) => {
                let a = self.getattr(&fh).await?;
                Ok((fh, a))
            }
            _ => self.lookup(dir, n).await,
        }
    }

    pub async fn create(
        &mut self,
        dir: &nfs_fh3,
        n: &[u8],
        mode: u32,
    ) -> Result<(nfs_fh3, fattr3)> {
        let attributes = sattr3 {
            mode: Nfs3Option::Some(mode & 0o7777),
            ..Default::default()
        };
        let r = self
            .conn
            .create(&CREATE3args {
                where_: diropargs3 {
                    dir: dir.clone(),
                    name: name(n),
                },
                how: createhow3::UNCHECKED(attributes),
            })
            .await
            .map_err(rpc)?;
        let ok = check("CREATE", r)?;
        self.made(dir, n, ok.obj, ok.obj_attributes).await
    }

    pub async fn mkdir(&mut self, dir: &nfs_fh3, n: &[u8], mode: u32) -> Result<(nfs_fh3, fattr3)> {
        let r = self
            .conn
            .mkdir(&MKDIR3args {
                where_: diropargs3 {
                    dir: dir.clone(),
                    name: name(n),
                },
                attributes: sattr3 {
                    mode: Nfs3Option::Some(mode & 0o7777),
                    ..Default::default()
                },
            })
            .await
            .map_err(rpc)?;
        let ok = check("MKDIR", r)?;
        self.made(dir, n, ok.obj, ok.obj_attributes).await
    }

    pub async fn remove(&mut self, dir: &nfs_fh3, n: &[u8]) -> Result<()> {
        let r = self
            .conn
            .remove(&REMOVE3args {
                object: diropargs3 {
                    dir: dir.clone(),
                    name: name(n),
                },
            })
            .await
            .map_err(rpc)?;
        check("REMOVE", r).map(|_| ())
    }

    pub async fn rmdir(&mut self, dir: &nfs_fh3, n: &[u8]) -> Result<()> {
        let r = self
            .conn
            .rmdir(&RMDIR3args {
                object: diropargs3 {
                    dir: dir.clone(),
                    name: name(n),
                },
            })
            .await
            .map_err(rpc)?;
        check("RMDIR", r).map(|_| ())
    }

    pub async fn rename(
        &mut self,
        from: &nfs_fh3,
        n: &[u8],
        to: &nfs_fh3,
        new: &[u8],
    ) -> Result<()> {
        let r = self
            .conn
            .rename(&RENAME3args {
                from: diropargs3 {
                    dir: from.clone(),
                    name: name(n),
                },
                to: diropargs3 {
                    dir: to.clone(),
                    name: name(new),
                },
            })
            .await
            .map_err(rpc)?;
        check("RENAME", r).map(|_| ())
    }

    pub async fn setattr(&mut self, fh: &nfs_fh3, attributes: sattr3) -> Result<fattr3> {
        let r = self
            .conn
            .setattr(&SETATTR3args {
                object: fh.clone(),
                new_attributes: attributes,
                guard: Nfs3Option::None,
            })
            .await
            .map_err(rpc)?;
        check("SETATTR", r)?;
        self.getattr(fh).await
    }

    /// (total bytes, free bytes, available bytes, total files, free files).
    pub async fn fsstat(&mut self) -> Result<(u64, u64, u64, u64, u64)> {
        let r = self
            .conn
            .fsstat(&FSSTAT3args {
                fsroot: self.root.clone(),
            })
            .await
            .map_err(rpc)?;
        let ok = check("FSSTAT", r)?;
        Ok((ok.tbytes, ok.fbytes, ok.abytes, ok.tfiles, ok.ffiles))
    }

    /// Makes `dir` (relative to the export, `a/b`) with its parents; its handle.
    pub async fn mkdir_all(&mut self, dir: &str, mode: u32) -> Result<nfs_fh3> {
        let mut fh = self.root.clone();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            fh = match self.lookup(&fh, part.as_bytes()).await {
                Ok((found, _)) => found,
                Err(e) if e.errno == libc::ENOENT => {
                    self.mkdir(&fh, part.as_bytes(), mode).await?.0
                }
                Err(e) => return Err(e),
            };
        }
        Ok(fh)
    }

    /// Removes `n` in `dir` and everything under it (no error if it is gone).
    pub async fn remove_all(&mut self, dir: &nfs_fh3, n: &[u8]) -> Result<()> {
        let (fh, attrs) = match self.lookup(dir, n).await {
            Ok(found) => found,
            Err(e) if e.errno == libc::ENOENT => return Ok(()),
            Err(e) => return Err(e),
        };
        if attrs.type_ != ftype3::NF3DIR {
            return self.remove(dir, n).await;
        }
        for (child, _, _) in self.list(&fh).await? {
            if child == b"." || child == b".." {
                continue;
            }
            Box::pin(self.remove_all(&fh, &child)).await?;
        }
        self.rmdir(dir, n).await
    }
}
