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

# ensure_python_module MODULE PIP_SPEC : installs a Python package from PyPI if missing.
ensure_python_module() {
  python3 -c "import $1" 2>/dev/null && return 0
  echo "==> installing $2 (pip)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "$2" 2>/dev/null \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages "$2"
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
