#!/usr/bin/env bash
# Builds the node and master binaries of minik8s' previous release, for trying
# an upgrade (doc/deploy.md, "Upgrade"; the lab's upgrade test starts a lab on
# them): prints the directory that holds them.
#
#   scripts/previous-release.sh [COMMIT]
#
# The previous release is the commit before the one that last changed the
# version this tree reports (crates/api/src/lib.rs `GIT_VERSION`, e.g.
# v1.37.0+minik8s.2), so the binaries built here report the version before it.
# It is checked out as a git worktree below target/previous-release/ and built
# (debug) with a target directory of its own, seeded with this tree's compiled
# dependencies (hard links to crates.io crates only; the workspace's own crates
# are compiled from the old sources), so only minik8s itself is compiled.
# Needs the repository's history (a shallow clone has no previous release).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

die() { echo "previous-release: $*" >&2; exit 1; }
git rev-parse --git-dir >/dev/null 2>&1 || die "$PWD is not a git repository: the previous release is built from its history"
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  # A shallow clone: its origin may have the history (a local clone's does).
  git fetch -q --unshallow >&2 2>/dev/null || true
  [ "$(git rev-parse --is-shallow-repository)" = false ] ||
    die "this clone is shallow and its origin gave no history (git fetch --unshallow): the previous release is built from it"
fi
commit=${1:-}
if [ -z "$commit" ]; then
  bump=$(git log -n1 --format=%H -G 'pub const GIT_VERSION' -- crates/api/src/lib.rs)
  [ -n "$bump" ] || die "no commit changed GIT_VERSION in crates/api/src/lib.rs"
  commit=$(git rev-parse "$bump^")
fi
commit=$(git rev-parse --verify "$commit^{commit}") || die "no commit $commit"
short=${commit:0:12}
base=$PWD/target/previous-release/$short
src=$base/src
out=$base/target
bins=(master kubelet kube-proxy kubectl nfs-fuse)
packages=(master kubelet kube-proxy kubectl minik8s-nfs)

ready() { local b; for b in "${bins[@]}"; do [ -x "$out/debug/$b" ] || return 1; done; }
if ready; then
  echo "$out/debug"
  exit 0
fi
mkdir -p "$base"
if [ ! -d "$src/.git" ] && [ ! -f "$src/.git" ]; then
  git worktree prune
  git worktree add --detach --force "$src" "$commit" >&2
fi

# Seed: every compiled crates.io dependency of this tree, linked (rustc writes
# a new file for anything it rebuilds, so a link never changes this tree's
# copy); cargo's fingerprints and build-script outputs copied. The
# workspace's own crates are left out: they are built from the old sources.
if [ ! -d "$out/debug/deps" ] && [ -d target/debug/deps ]; then
  echo "==> seeding $out with this tree's compiled dependencies" >&2
  ours=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
names = set()
for p in json.load(sys.stdin)["packages"]:
    names.add(p["name"]); names.add(p["name"].replace("-", "_"))
    for t in p["targets"]:
        names.add(t["name"]); names.add(t["name"].replace("-", "_"))
print("\n".join(sorted(names)))')
  is_ours() {
    # ARTIFACT (libNAME-HASH.rlib, NAME-HASH, NAME-HASH.d): the NAME is one of the workspace's.
    local n=${1#lib}
    n=${n%-*}
    grep -qxF -- "$n" <<<"$ours"
  }
  mkdir -p "$out/debug/deps" "$out/debug/.fingerprint" "$out/debug/build"
  for f in target/debug/deps/*.rlib target/debug/deps/*.rmeta target/debug/deps/*.so; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    is_ours "${b%.*}" || ln "$f" "$out/debug/deps/$b"
  done
  for d in target/debug/.fingerprint/* target/debug/build/*; do
    [ -d "$d" ] || continue
    b=$(basename "$d")
    is_ours "$b" || cp -a "$d" "$out/debug/${d#target/debug/}"
  done
fi
echo "==> building ${packages[*]} at ${short} ($(git log -n1 --format=%s "$commit" | cut -c1-60)...)" >&2
args=()
for p in "${packages[@]}"; do args+=(-p "$p"); done
(cd "$src" && CARGO_TARGET_DIR=$out CARGO_INCREMENTAL=0 cargo build "${args[@]}" >&2) || die "the build of $short failed"
ready || die "the build of $short left no ${bins[*]} in $out/debug"
echo "$out/debug"
