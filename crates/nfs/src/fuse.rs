//! An NFS export as a FUSE file system: each kernel request becomes one or
//! a few NFSv3 calls. Inode numbers are the server's file ids (plus one; the
//! export's root is inode 1) and map to NFS file handles learned from
//! lookups and directory listings. Attributes and entries are cached by the
//! kernel for one second, so what another node writes shows within a second.

use crate::client::{Nfs, NfsError};
use fuser::{
    FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use nfs3_client::nfs3_types::nfs3::{
    fattr3, ftype3, nfs_fh3, nfstime3, sattr3, set_atime, set_mtime, Nfs3Option,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

pub struct NfsFs {
    rt: tokio::runtime::Runtime,
    nfs: Nfs,
    handles: HashMap<u64, nfs_fh3>,
    root_fileid: u64,
}

impl NfsFs {
    pub fn new(rt: tokio::runtime::Runtime, mut nfs: Nfs) -> Result<NfsFs, NfsError> {
        let root = nfs.root.clone();
        let root_fileid = rt.block_on(nfs.getattr(&root))?.fileid;
        Ok(NfsFs {
            rt,
            nfs,
            handles: HashMap::from([(ROOT, root)]),
            root_fileid,
        })
    }

    fn ino(&self, fileid: u64) -> u64 {
        if fileid == self.root_fileid {
            ROOT
        } else {
            fileid.wrapping_add(1).max(2)
        }
    }

    fn fh(&self, ino: u64) -> Result<nfs_fh3, i32> {
        self.handles.get(&ino).cloned().ok_or(libc::ESTALE)
    }

    /// The kernel's view of a file, remembering its handle.
    fn learn(&mut self, fh: nfs_fh3, a: &fattr3) -> FileAttr {
        let ino = self.ino(a.fileid);
        self.handles.insert(ino, fh);
        attr(ino, a)
    }
}

fn time(t: nfstime3) -> SystemTime {
    t.into()
}

fn kind(t: ftype3) -> FileType {
    match t {
        ftype3::NF3DIR => FileType::Directory,
        ftype3::NF3LNK => FileType::Symlink,
        ftype3::NF3BLK => FileType::BlockDevice,
        ftype3::NF3CHR => FileType::CharDevice,
        ftype3::NF3SOCK => FileType::Socket,
        ftype3::NF3FIFO => FileType::NamedPipe,
        ftype3::NF3REG => FileType::RegularFile,
    }
}

fn attr(ino: u64, a: &fattr3) -> FileAttr {
    FileAttr {
        ino,
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
        crtime: time(a.mtime),
        kind: kind(a.type_),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn when(t: TimeOrNow) -> nfstime3 {
    let at = match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    };
    nfstime3::try_from(at).unwrap_or_default()
}

impl Filesystem for NfsFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let dir = match self.fh(parent) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        match self.rt.block_on(self.nfs.lookup(&dir, name.as_bytes())) {
            Ok((fh, a)) => {
                let at = self.learn(fh, &a);
                reply.entry(&TTL, &at, 0)
            }
            Err(e) => reply.error(e.errno),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        let fh = match self.fh(ino) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        match self.rt.block_on(self.nfs.getattr(&fh)) {
            Ok(a) => reply.attr(&TTL, &attr(ino, &a)),
            Err(e) => reply.error(e.errno),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let fh = match self.fh(ino) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let opt = |v: Option<u32>| v.map_or(Nfs3Option::None, Nfs3Option::Some);
        let change = sattr3 {
            mode: opt(mode.map(|m| m & 0o7777)),
            uid: opt(uid),
            gid: opt(gid),
            size: size.map_or(Nfs3Option::None, Nfs3Option::Some),
            atime: atime.map_or(set_atime::DONT_CHANGE, |t| {
                set_atime::SET_TO_CLIENT_TIME(when(t))
            }),
            mtime: mtime.map_or(set_mtime::DONT_CHANGE, |t| {
                set_mtime::SET_TO_CLIENT_TIME(when(t))
            }),
        };
        match self.rt.block_on(self.nfs.setattr(&fh, change)) {
            Ok(a) => reply.attr(&TTL, &attr(ino, &a)),
            Err(e) => reply.error(e.errno),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let dir = match self.fh(ino) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        let entries = match self.rt.block_on(self.nfs.list(&dir)) {
            Ok(list) => list,
            Err(e) => return reply.error(e.errno),
        };
        for (i, (name, fh, a)) in entries.into_iter().enumerate().skip(offset.max(0) as usize) {
            let (child, ftype) = match (&fh, &a) {
                (Some(fh), Some(a)) => {
                    let at = self.learn(fh.clone(), a);
                    (at.ino, at.kind)
                }
                (_, Some(a)) => (self.ino(a.fileid), kind(a.type_)),
                _ => (ino, FileType::Directory),
            };
            if reply.add(child, (i + 1) as i64, ftype, OsStr::from_bytes(&name)) {
                break;
            }
        }
        reply.ok()
    }

    fn open(&mut self, _req: &Request<'_>, _ino: u64, _flags: i32, reply: ReplyOpen) {
        reply.opened(0, 0)
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        let fh = match self.fh(ino) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let mut out = Vec::with_capacity(size as usize);
        while out.len() < size as usize {
            let at = offset as u64 + out.len() as u64;
            match self
                .rt
                .block_on(self.nfs.read(&fh, at, size - out.len() as u32))
            {
                Ok((data, eof)) => {
                    let done = data.is_empty() || eof;
                    out.extend(data);
                    if done {
                        break;
                    }
                }
                Err(e) => return reply.error(e.errno),
            }
        }
        reply.data(&out)
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        let fh = match self.fh(ino) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let mut written = 0usize;
        while written < data.len() {
            let chunk = &data[written..data.len().min(written + 64 * 1024)];
            match self
                .rt
                .block_on(self.nfs.write(&fh, offset as u64 + written as u64, chunk))
            {
                Ok(0) => break,
                Ok(n) => written += n as usize,
                Err(e) => return reply.error(e.errno),
            }
        }
        reply.written(written as u32)
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock: u64, reply: ReplyEmpty) {
        // Writes are FILE_SYNC: nothing is held back.
        reply.ok()
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let dir = match self.fh(parent) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        match self
            .rt
            .block_on(self.nfs.create(&dir, name.as_bytes(), mode & !umask))
        {
            Ok((fh, a)) => {
                let at = self.learn(fh, &a);
                reply.created(&TTL, &at, 0, 0, 0)
            }
            Err(e) => reply.error(e.errno),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let dir = match self.fh(parent) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        match self
            .rt
            .block_on(self.nfs.mkdir(&dir, name.as_bytes(), mode & !umask))
        {
            Ok((fh, a)) => {
                let at = self.learn(fh, &a);
                reply.entry(&TTL, &at, 0)
            }
            Err(e) => reply.error(e.errno),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.fh(parent) {
            Ok(dir) => match self.rt.block_on(self.nfs.remove(&dir, name.as_bytes())) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e.errno),
            },
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.fh(parent) {
            Ok(dir) => match self.rt.block_on(self.nfs.rmdir(&dir, name.as_bytes())) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e.errno),
            },
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        _flags: u32,
        reply: ReplyEmpty,
    ) {
        let (from, to) = match (self.fh(parent), self.fh(newparent)) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        match self.rt.block_on(
            self.nfs
                .rename(&from, name.as_bytes(), &to, newname.as_bytes()),
        ) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e.errno),
        }
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        match self.rt.block_on(self.nfs.fsstat()) {
            Ok((total, free, avail, files, ffree)) => reply.statfs(
                total / 4096,
                free / 4096,
                avail / 4096,
                files,
                ffree,
                4096,
                255,
                4096,
            ),
            Err(e) => reply.error(e.errno),
        }
    }
}
