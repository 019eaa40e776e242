//! The FUSE NFS client against a real NFS server (ganesha): files and
//! directories made, written, renamed and removed through the mount show in
//! the export and the other way round; the provisioner's calls (mkdir -p,
//! rm -r) work over NFS.

use minik8s_testkit::nfs::NfsServer;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(path.to_str().unwrap()))
}

#[test]
fn an_export_mounted_with_fuse_reads_and_writes_through_nfs() {
    let server = NfsServer::start();
    let export = server.export();
    std::fs::write(export.join("hello"), "from the server\n").unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let at = mnt.path().join("m");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfs-fuse"))
        .arg(server.source())
        .arg(&at)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mounted(&at) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "nfs-fuse exited:\n{}",
            server.log()
        );
        assert!(Instant::now() < deadline, "not mounted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = std::panic::catch_unwind(|| {
        assert_eq!(
            std::fs::read_to_string(at.join("hello")).unwrap(),
            "from the server\n"
        );
        std::fs::create_dir_all(at.join("a/b")).unwrap();
        std::fs::write(at.join("a/b/file"), "x".repeat(200_000)).unwrap();
        assert_eq!(
            std::fs::read_to_string(export.join("a/b/file"))
                .unwrap()
                .len(),
            200_000
        );
        std::fs::rename(at.join("a/b/file"), at.join("a/moved")).unwrap();
        assert!(export.join("a/moved").exists() && !export.join("a/b/file").exists());
        let mut names: Vec<String> = std::fs::read_dir(at.join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["b", "moved"]);
        std::fs::remove_file(at.join("a/moved")).unwrap();
        std::fs::remove_dir(at.join("a/b")).unwrap();
        assert!(!export.join("a/b").exists());
        // Appends and truncation.
        std::fs::write(at.join("log"), "one\n").unwrap();
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(at.join("log"))
            .unwrap()
            .write_all(b"two\n")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(export.join("log")).unwrap(),
            "one\ntwo\n"
        );
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(at.join("log"))
            .unwrap();
        assert_eq!(std::fs::metadata(export.join("log")).unwrap().len(), 0);
        assert!(
            matches!(std::fs::read(at.join("missing")), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        );
    });
    // Unmounting ends nfs-fuse.
    let path = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "nfs-fuse still runs after the unmount"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioners_calls_make_and_remove_trees() {
    let server = NfsServer::start();
    let export = server.export();
    let source = server.source();
    let (host, path) = minik8s_nfs::parse_source(&source).unwrap();
    let mut nfs = minik8s_nfs::Nfs::connect(&host, &path).await.unwrap();
    nfs.mkdir_all("team-data-pvc-1/sub", 0o777).await.unwrap();
    nfs.mkdir_all("team-data-pvc-1/sub", 0o777).await.unwrap();
    std::fs::write(export.join("team-data-pvc-1/sub/f"), "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(export.join("team-data-pvc-1"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o777);
    let root = nfs.root.clone();
    nfs.remove_all(&root, b"team-data-pvc-1").await.unwrap();
    assert!(!export.join("team-data-pvc-1").exists());
    nfs.remove_all(&root, b"team-data-pvc-1").await.unwrap();
    let err = minik8s_nfs::Nfs::connect("127.0.0.1", "/not/exported")
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("/not/exported"), "{err}");
}
