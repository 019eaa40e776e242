#!/usr/bin/env bash
# Checks that every binary package compiles the dependencies they share with
# the same features as all of them together (crates/workspace-hack says why):
# for each package, `cargo tree` alone against all together; a difference
# names the dependency and the features to add to crates/workspace-hack/Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(master kubelet kube-proxy kubectl minik8s-nfs prometheus-sd apiserver scheduler controller-manager)
features() {
  local args=() p
  for p in "$@"; do args+=(-p "$p"); done
  # "name version [f1,f2]" per line, then one line per name with every feature seen.
  cargo tree -q -e normal -f '{p} [{f}]' --prefix none "${args[@]}" | sed 's/ (\*)//; s/ (proc-macro)//' |
    awk '{ key = $1 " " $2; match($0, /\[.*\]/); f = substr($0, RSTART + 1, RLENGTH - 2);
           n = split(f, a, ","); for (i = 1; i <= n; i++) if (a[i] != "") set[key] = set[key] " " a[i]; seen[key] = 1 }
         END { for (k in seen) { m = split(set[k], b, " "); delete u; out = "";
               for (i = 1; i <= m; i++) u[b[i]] = 1; for (x in u) out = out " " x; print k ":" out } }' |
    while IFS=: read -r key feats; do printf '%s:%s\n' "$key" "$(tr ' ' '\n' <<<"$feats" | sed '/^$/d' | sort | tr '\n' ' ')"; done | sort
}
all=$(features "${PACKAGES[@]}")
status=0
for p in "${PACKAGES[@]}"; do
  while IFS=: read -r key feats; do
    whole=$(grep -F -x -m1 "$key:$(grep -F -m1 "$key:" <<<"$all" | cut -d: -f2-)" <<<"$all" | cut -d: -f2- || true)
    if [ -n "$whole" ] && [ "$whole" != "$feats" ]; then
      echo "$p alone compiles $key with [$feats] but all together with [$whole]: add the difference to crates/workspace-hack/Cargo.toml" >&2
      status=1
    fi
  done < <(features "$p")
done
[ $status = 0 ] && echo "features: every binary package compiles its shared dependencies as all of them together do"
exit $status
