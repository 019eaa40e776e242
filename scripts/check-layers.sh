#!/usr/bin/env bash
# Checks that the node components and kubectl link none of the apiserver's
# machinery: `cargo tree` of kubelet, kube-proxy and kubectl (what they
# compile and link, not their tests) names no crate that only the apiserver
# (and, for DRA's device selectors, the scheduler) needs — defaulting and
# validation (minik8s-validation), CEL and structural schemas (minik8s-cel,
# the `cel` crate), the protobuf transcoder and OpenAPI (minik8s-wire).
# minik8s-api holds what they all share (crates/api/src/lib.rs says what).
# And the apiserver links no client crate.
set -euo pipefail
cd "$(dirname "$0")/.."
APISERVER_ONLY='^(minik8s-validation|minik8s-cel|minik8s-wire|cel) '
status=0
for p in kubelet kube-proxy kubectl; do
  found=$(cargo tree -q -e normal --prefix none -p "$p" | sed 's/ (\*)//' | grep -E "$APISERVER_ONLY" | sort -u || true)
  if [ -n "$found" ]; then
    echo "$p links the apiserver's machinery: $(tr '\n' ' ' <<<"$found")(cargo tree -e normal -i <crate> -p $p shows the path)" >&2
    status=1
  fi
done
# The apiserver is no client of itself: it links no minik8s-client (what it
# shares with the components' processes is in minik8s-process).
found=$(cargo tree -q -e normal --prefix none -p apiserver | sed 's/ (\*)//' | grep -E '^minik8s-client ' | sort -u || true)
if [ -n "$found" ]; then
  echo "apiserver links the client: $found(cargo tree -e normal -i minik8s-client -p apiserver shows the path)" >&2
  status=1
fi
[ $status = 0 ] && echo "layers: kubelet, kube-proxy and kubectl link no validation, CEL, protobuf transcoder or OpenAPI; the apiserver links no client"
exit $status
