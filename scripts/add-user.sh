#!/usr/bin/env bash
# A student in one command, on the master: a namespace with the restricted Pod Security level, an
# `edit` RoleBinding there, and a kubeconfig with the student's own client certificate.
#
#   scripts/add-user.sh NAME [--namespace NS] [--group G] [--server https://MASTER:6443] [--out FILE]
#                            [--level restricted|baseline|privileged] [--pki-dir /var/lib/minik8s/pki]
#                            [--quota pods=10,requests.cpu=2,requests.memory=4Gi]
#
# Hand the kubeconfig (default ./NAME.kubeconfig) to the student: `KUBECONFIG=NAME.kubeconfig kubectl get pods`.
# doc/security.md explains what the student may do and why.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
bin=""
# MINIK8S_BIN: the directory of the binaries to use (tests point it at their build).
for b in ${MINIK8S_BIN:+$MINIK8S_BIN/minik8s-add-user} target/release/minik8s-add-user /usr/local/bin/minik8s-add-user; do
  [ -x "$b" ] && { bin=$b; break; }
done
if [ -z "$bin" ]; then
  echo "==> building minik8s-add-user" >&2
  cargo_release -p master --bin minik8s-add-user
  bin=target/release/minik8s-add-user
fi
exec "$bin" "$@"
