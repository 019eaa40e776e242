#!/usr/bin/env bash
# README command two: runs the whole test suite on a fresh machine.
# Installs what the tests need (etcd, protoc, the Python kubernetes client),
# checks formatting and lints, then runs every test. Tests start their own
# etcd/apiserver instances on free ports and stop them afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

ensure_build_deps
ensure_packages etcd-server docker.io docker-registry busybox-static iptables iproute2 curl util-linux openssl python3 sqlite3 nfs-ganesha nfs-ganesha-vfs rpcbind chromium
ensure_python_package kubernetes 37.0.2
# The real kubectl of the release minik8s speaks (1.37), and the one before it
# (1.36) for the version-skew checks; tests find them under $MINIK8S_TOOLS.
ensure_kubectl 1.37.1
ensure_kubectl 1.36.4
# kr8s' own suite, run against the quick start's cluster.
ensure_kr8s_suite 0.20.15
# kopf's end-to-end suite (its examples as operators), also against the quick start.
ensure_kopf_suite 1.45.2
# Helm (v4's library and the CLI), for the Helm checks on the quick start.
ensure_helm_tools
export MINIK8S_TOOLS
[ -x /usr/bin/kubectl ] || { echo "the machine's kubectl dispatcher (1.27-1.33) is required at /usr/bin/kubectl" >&2; exit 1; }

# A full build and test run needs about 15 GiB; say so plainly when it is not there.
avail_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
echo "==> disk: $((avail_kib / 1024 / 1024)) GiB free here"
if [ "${avail_kib:-0}" -lt $((8 * 1024 * 1024)) ]; then
  echo "only $((avail_kib / 1024)) MiB free on $(pwd): the build and the tests need at least 8 GiB" >&2
  exit 1
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "==> one feature set for the binaries' shared dependencies"
bash scripts/check-features.sh
echo "==> the node components and kubectl link none of the apiserver's machinery"
bash scripts/check-layers.sh
echo "==> no import cycle between the modules of a crate"
python3 scripts/check-modules.py
echo "==> cargo test"
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-output.txt
# One closing line with the totals over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' target/test-output.txt
