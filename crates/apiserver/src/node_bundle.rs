//! The node bundle: everything a new worker installs, served by the master
//! on its own port, so that a lab VM joins with one command and a token and
//! needs neither a Rust toolchain nor anything from the internet.
//!
//! ```text
//!  worker                                           master (this module)
//!  curl --cacert CA …/minik8s/join.sh | bash ─────▶ join.sh (public, the server's address filled in)
//!  join.sh: cluster-info + token ─▶ CA (checked)
//!  GET …/node-bundle/SHA256SUMS, SHA256SUMS.sig ──▶ the files' digests, signed with the CA's key
//!      (bearer: the join token; RBAC: system:bootstrappers, system:nodes)
//!  openssl dgst -verify (CA's public key) ✓
//!  GET …/node-bundle/bin/kubelet, scripts/… ───────▶ each file, streamed from disk
//!  sha256sum -c ✓ ─▶ scripts/install.sh worker --bin-dir bin …
//! ```
//!
//! The digests are taken once, when the first node asks (hashing ~200 MB
//! of binaries at every start would slow every master and test down), and
//! kept while the master runs: a file replaced on disk afterwards no longer
//! matches the signed list, and the worker refuses to install it (restart
//! the master after replacing its binaries).

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use minik8s_api::ApiError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::OnceCell;

/// Where the bundle's files are served.
pub const PREFIX: &str = "/minik8s/node-bundle/";
/// The join script, served to anyone (it holds nothing secret).
pub const JOIN_SCRIPT: &str = "/minik8s/join.sh";
/// The signed list of files and their SHA-256 digests (`sha256sum` format).
pub const SUMS: &str = "SHA256SUMS";
/// The CA key's signature of [`SUMS`] (DER ECDSA, SHA-256).
pub const SIGNATURE: &str = "SHA256SUMS.sig";

/// The node binaries, from the directory of the master's own executable.
pub const BINARIES: [&str; 4] = ["kubelet", "kube-proxy", "kubectl", "nfs-fuse"];

/// The scripts, units and documents a worker's install needs, relative to
/// the bundle's file root (the source tree's layout).
pub const FILES: [&str; 12] = [
    "scripts/install.sh",
    "scripts/join.sh",
    "scripts/lib/common.sh",
    "scripts/lib/upgrade.sh",
    "scripts/images.sh",
    "images/function-runtime/server.py",
    "deploy/minik8s.env.example",
    "deploy/systemd/minik8s-kubelet.service",
    "deploy/systemd/minik8s-kube-proxy.service",
    "deploy/systemd/flanneld.service",
    "doc/deploy.md",
    "doc/networking.md",
];

/// One file of the bundle.
#[derive(Debug, Clone)]
struct Entry {
    /// Its path in the bundle (`bin/kubelet`, `scripts/install.sh`).
    path: String,
    source: PathBuf,
}

/// The digests, taken once, and their signature.
struct Signed {
    sums: String,
    signature: Vec<u8>,
}

/// What the master serves to joining nodes.
pub struct NodeBundle {
    entries: Vec<Entry>,
    /// Where the scripts are (the join script is read from there).
    file_root: PathBuf,
    signer: Arc<minik8s_pki::Ca>,
    signed: OnceCell<Result<Arc<Signed>, String>>,
}

/// Where the bundle's files are by default: beside an installed master,
/// `/usr/local/share/minik8s` (install.sh puts them there); a master run
/// from a source checkout's `target/<profile>/` takes the checkout's.
pub fn default_file_root(exe_dir: &Path) -> PathBuf {
    let installed = exe_dir.join("../share/minik8s");
    if installed.join("scripts/install.sh").exists() {
        return installed;
    }
    exe_dir.join("../..")
}

impl NodeBundle {
    /// The bundle of `bin_dir`'s node binaries and `file_root`'s scripts,
    /// vouched for by `ca`. Missing files are not an error here: the
    /// digests say which one is missing when a node asks.
    pub fn new(bin_dir: &Path, file_root: &Path, ca: Arc<minik8s_pki::Ca>) -> NodeBundle {
        let entries = BINARIES
            .iter()
            .map(|b| Entry {
                path: format!("bin/{b}"),
                source: bin_dir.join(b),
            })
            .chain(FILES.iter().map(|f| Entry {
                path: f.to_string(),
                source: file_root.join(f),
            }))
            .collect();
        NodeBundle {
            entries,
            file_root: file_root.to_path_buf(),
            signer: ca,
            signed: OnceCell::new(),
        }
    }

    async fn signed(&self) -> Result<Arc<Signed>, String> {
        self.signed
            .get_or_init(|| async {
                let entries = self.entries.clone();
                let signer = self.signer.clone();
                tokio::task::spawn_blocking(move || sign_digests(&entries, &signer))
                    .await
                    .map_err(|e| format!("taking the digests: {e}"))?
                    .map(Arc::new)
            })
            .await
            .clone()
    }

    /// The answer to `GET /minik8s/join.sh`, `host` being the address it was asked at.
    pub async fn join_script(&self, host: Option<&str>) -> Result<Response, ApiError> {
        join_script(&self.file_root, host).await
    }

    /// The answer to `GET /minik8s/node-bundle/<rest>`.
    pub async fn serve(&self, rest: &str) -> Result<Response, ApiError> {
        let signed = self.signed().await.map_err(|e| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("the node bundle is not available: {e}"),
            )
        })?;
        match rest {
            SUMS => Ok(file_response(Body::from(signed.sums.clone()), "text/plain")),
            SIGNATURE => Ok(file_response(
                Body::from(signed.signature.clone()),
                "application/octet-stream",
            )),
            path => {
                let entry = self
                    .entries
                    .iter()
                    .find(|e| e.path == path)
                    .ok_or_else(|| {
                        ApiError::new(
                            404,
                            "NotFound",
                            format!("the node bundle has no file {path:?} (see {PREFIX}{SUMS})"),
                        )
                    })?;
                let file = tokio::fs::File::open(&entry.source)
                    .await
                    .map_err(|e| ApiError::internal(format!("{}: {e}", entry.source.display())))?;
                Ok(file_response(stream(file), "application/octet-stream"))
            }
        }
    }
}

/// The `sha256sum` lines of every entry, signed. A missing or unreadable
/// file fails the whole bundle: a worker must not get half of one.
fn sign_digests(entries: &[Entry], ca: &minik8s_pki::Ca) -> Result<Signed, String> {
    let mut sums = String::new();
    for e in entries {
        let digest = file_digest(&e.source).map_err(|err| {
            format!(
                "{} ({}): {err}; install the node binaries beside the master (scripts/install.sh master) or pass --node-bundle-bin-dir/--node-bundle-files",
                e.path,
                e.source.display()
            )
        })?;
        sums.push_str(&format!("{digest}  {}\n", e.path));
    }
    let signature = ca.sign(sums.as_bytes()).map_err(|e| e.to_string())?;
    Ok(Signed { sums, signature })
}

fn file_digest(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A file's bytes as they are read (binaries are tens of MB: not in memory).
fn stream(file: tokio::fs::File) -> Body {
    use tokio::io::AsyncReadExt;
    let chunks = futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buf)), Some(file)))
            }
            // The error ends the body (the client sees a cut transfer).
            Err(e) => Some((Err(e), None)),
        }
    });
    Body::from_stream(chunks)
}

fn file_response(body: Body, content_type: &'static str) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// The join script with this master's address as its default server: the
/// address the request came to (its Host header), if it looks like one.
async fn join_script(file_root: &Path, host: Option<&str>) -> Result<Response, ApiError> {
    let path = file_root.join("scripts/join.sh");
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
    let server = host
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .map(|h| format!("https://{h}"))
        .unwrap_or_default();
    let text = text.replacen(
        "JOIN_SERVER=${JOIN_SERVER:-}",
        &format!("JOIN_SERVER=${{JOIN_SERVER:-{server}}}"),
        1,
    );
    Ok(file_response(Body::from(text), "text/x-shellscript"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_in(dir: &Path) -> (NodeBundle, Arc<minik8s_pki::Ca>) {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for b in BINARIES {
            std::fs::write(bin.join(b), format!("binary {b}")).unwrap();
        }
        for f in FILES {
            let p = dir.join("files").join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("file {f}\nJOIN_SERVER=${{JOIN_SERVER:-}}\n")).unwrap();
        }
        let ca = Arc::new(minik8s_pki::Ca::generate("test-ca").unwrap());
        (NodeBundle::new(&bin, &dir.join("files"), ca.clone()), ca)
    }

    async fn body(resp: Response) -> Vec<u8> {
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn digests_are_signed_by_the_ca_and_files_served_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let (bundle, ca) = bundle_in(dir.path());
        let sums = String::from_utf8(body(bundle.serve(SUMS).await.unwrap()).await).unwrap();
        assert_eq!(sums.lines().count(), BINARIES.len() + FILES.len());
        let kubelet_line = sums.lines().find(|l| l.ends_with("  bin/kubelet")).unwrap();
        assert_eq!(
            kubelet_line.split_whitespace().next().unwrap(),
            file_digest(&dir.path().join("bin/kubelet")).unwrap()
        );
        // The signature checks out with the CA certificate's public key.
        let sig = body(bundle.serve(SIGNATURE).await.unwrap()).await;
        assert!(ca.verify(sums.as_bytes(), &sig), "a valid signature");
        assert!(!ca.verify(b"other digests", &sig));
        assert_eq!(
            body(bundle.serve("bin/kubelet").await.unwrap()).await,
            b"binary kubelet"
        );
        let err = bundle.serve("../etc/passwd").await.unwrap_err();
        assert_eq!(err.code, 404);
    }

    #[tokio::test]
    async fn a_missing_binary_makes_the_whole_bundle_unavailable_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let (bundle, _) = bundle_in(dir.path());
        std::fs::remove_file(dir.path().join("bin/nfs-fuse")).unwrap();
        let err = bundle.serve(SUMS).await.unwrap_err();
        assert_eq!(err.code, 503);
        assert!(err.message.contains("bin/nfs-fuse"), "{}", err.message);
    }

    /// install.sh puts every file of the bundle beside an installed master.
    #[test]
    fn the_installed_master_has_every_file_of_the_bundle() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install.sh"),
        )
        .unwrap();
        for f in FILES {
            assert!(
                script.contains(f),
                "scripts/install.sh does not install {f}"
            );
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(f);
            assert!(source.exists(), "{f} is not in the repository");
        }
    }

    #[tokio::test]
    async fn the_join_script_names_the_server_it_was_fetched_from() {
        let dir = tempfile::tempdir().unwrap();
        let (bundle, _) = bundle_in(dir.path());
        let script = |host: &'static str| {
            let bundle = &bundle;
            async move {
                String::from_utf8(body(bundle.join_script(Some(host)).await.unwrap()).await)
                    .unwrap()
            }
        };
        let text = script("192.168.56.10:6443").await;
        assert!(text.contains("JOIN_SERVER=${JOIN_SERVER:-https://192.168.56.10:6443}"));
        // A Host header that is not an address is not written into a script.
        let text = script("x$(reboot)").await;
        assert!(text.contains("JOIN_SERVER=${JOIN_SERVER:-}"));
    }
}
