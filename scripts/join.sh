#!/usr/bin/env bash
# Joins this machine to a minik8s cluster as a worker with the master's address
# and a join token, from the node bundle the master serves: no Rust toolchain,
# nothing from the internet but Debian packages (doc/deploy.md, "Join a worker").
#
#   curl -fsSL --cacert CA.crt https://MASTER:6443/minik8s/join.sh | sudo bash -s - worker --token TOKEN --node-ip IP
#   scripts/join.sh worker --server MASTER --token TOKEN --node-ip IP [scripts/install.sh's worker flags]
#   scripts/join.sh fetch --server MASTER --token TOKEN --into DIR   download and check the bundle only
#   curl ... | sudo bash -s - upgrade [--force]   a joined node to the master's current bundle
#        (server and token from /etc/minik8s/minik8s.env; scripts/install.sh upgrade runs this)
#
# (scripts/install.sh master prints the first line with the CA filled in.)
#   1. kube-public/cluster-info from the master, its signature by the token
#      checked (only the cluster that issued the token can sign it): the
#      cluster's CA, as the kubelet's own bootstrap checks it.
#   2. over TLS with that CA, the token as credentials: the bundle's
#      SHA256SUMS and its signature by the CA's key (openssl checks it).
#   3. every file of the bundle, each digest checked (sha256sum);
#   4. worker: the bundle's scripts/install.sh installs and starts the node
#      from the bundle's binaries; upgrade: the bundle's `install.sh upgrade`
#      drains the node, installs them, restarts and uncordons it. fetch:
#      leaves the checked bundle in DIR.
# Any failed check stops before anything is installed.
set -euo pipefail
# The master fills in the address this script was fetched from.
JOIN_SERVER=${JOIN_SERVER:-}

die() { echo "join: $*" >&2; exit 1; }
verb=${1:-}
[ -n "$verb" ] && shift || true
case "$verb" in worker | fetch | upgrade) ;; *) sed -n '2,11p' "$0" 2>/dev/null | sed 's/^# \{0,1\}//'; die "worker, upgrade or fetch, not ${verb:-nothing}" ;; esac
server=$JOIN_SERVER token="" into="" root="" pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --token) token=$2; shift 2 ;;
    --into) into=$2; shift 2 ;;
    --root) root=$2; pass+=("$1" "$2"); shift 2 ;;
    *) pass+=("$1"); shift ;;
  esac
done
if [ "$verb" = upgrade ] && [ -z "$token" ]; then
  # A joined node knows its master and token.
  env_file=$root/etc/minik8s/minik8s.env
  [ -s "$env_file" ] || die "upgrade: no $env_file: this machine has not joined (join.sh worker)"
  token=$(sed -n 's/^JOIN_TOKEN=//p' "$env_file")
  [ -f "$root$token" ] && token=$(cat "$root$token")
  [ -n "$server" ] || { server=$(sed -n 's/^MINIK8S_SERVER=//p' "$env_file"); server=${server%%,*}; }
fi
[ -n "$server" ] || die "--server MASTER is required (the master's address)"
[ -n "$token" ] || die "--token TOKEN is required (the master's /var/lib/minik8s/pki/join-token)"
[ "$verb" = fetch ] && [ -z "$into" ] && die "fetch: --into DIR is required"
[[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || die "the token must look like abcdef.0123456789abcdef"
case "$server" in https://*) ;; http://*) die "--server: the API is served over TLS: give MASTER or https://MASTER:6443" ;; *) server=https://$server ;; esac
# MASTER alone means the API's port, 6443.
[[ ${server#https://} == *:* ]] || server=$server:6443
[[ ${server#https://} == \[*\] ]] && server=$server:6443

# A fresh VM may lack the tools; Debian's packages are the only download.
need=()
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
command -v python3 >/dev/null || need+=(python3)
command -v sha256sum >/dev/null || need+=(coreutils)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "${need[*]} missing: run as root (they are installed with apt)"
  echo "==> installing ${need[*]} (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/minik8s-join.XXXXXX")
trap 'rm -rf "$work"' EXIT
bundle=$work/bundle
mkdir -p "$bundle"

# GET URL OUT [CURL ARGS]: the body into OUT, or stop with the server's own message.
get() {
  local url=$1 out=$2 code; shift 2
  code=$(curl -sS --retry 3 --retry-connrefused -o "$out" -w '%{http_code}' "$@" "$url") ||
    die "GET $url: no answer (is the master at $server?)"
  [ "$code" = 200 ] && return 0
  local why
  why=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("message",""))' "$out" 2>/dev/null || true)
  die "GET $url: HTTP $code${why:+: $why}"
}

# 1. The CA, as the token vouches for it (the first request trusts nothing,
# as kubeadm's token discovery: the signature is the check).
echo "==> cluster-info from $server, checked against token ${token%%.*}"
get "$server/api/v1/namespaces/kube-public/configmaps/cluster-info" "$work/cluster-info.json" -k
python3 - "$token" "$work/cluster-info.json" "$work/ca.crt" <<'PY' || exit 1
import base64, hashlib, hmac, json, re, sys
token, info_path, ca_path = sys.argv[1:]
tid, secret = token.split(".", 1)
def fail(msg):
    print("join: " + msg, file=sys.stderr)
    sys.exit(1)
def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
data = json.load(open(info_path)).get("data") or {}
kubeconfig = data.get("kubeconfig")
if not kubeconfig:
    fail("cluster-info has no kubeconfig")
detached = data.get("jws-kubeconfig-" + tid)
if not detached:
    fail(f"cluster-info is not signed by token {tid!r}: the token is unknown to this cluster (or expired)")
header, _, sig = detached.partition("..")
try:
    named = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))).get("kid") == tid
except ValueError:
    named = False
want = b64(hmac.new(secret.encode(), f"{header}.{b64(kubeconfig.encode())}".encode(), hashlib.sha256).digest())
if not named or not hmac.compare_digest(want, sig):
    fail(f"cluster-info's signature for token {tid!r} does not check out: this is not the cluster the token belongs to")
m = re.search(r"certificate-authority-data:\s*\"?([A-Za-z0-9+/=]+)", kubeconfig)
if not m:
    fail("cluster-info's kubeconfig has no certificate-authority-data")
open(ca_path, "wb").write(base64.b64decode(m.group(1)))
PY
openssl x509 -in "$work/ca.crt" -noout -pubkey >"$work/ca.pub" 2>/dev/null || die "cluster-info's CA is not a certificate"
echo "==> the cluster's CA: $(openssl x509 -in "$work/ca.crt" -noout -subject -fingerprint -sha256 | tr '\n' ' ')"

# 2. The signed digests, over TLS with that CA.
auth=(--cacert "$work/ca.crt" -H "Authorization: Bearer $token")
base=$server/minik8s/node-bundle
get "$base/SHA256SUMS" "$bundle/SHA256SUMS" "${auth[@]}"
get "$base/SHA256SUMS.sig" "$work/SHA256SUMS.sig" "${auth[@]}"
openssl dgst -sha256 -verify "$work/ca.pub" -signature "$work/SHA256SUMS.sig" "$bundle/SHA256SUMS" >/dev/null 2>&1 ||
  die "the bundle's SHA256SUMS is not signed by the cluster's CA: nothing was installed"

# 3. Every file, checked.
while read -r sum path; do
  [[ $sum =~ ^[0-9a-f]{64}$ ]] && [[ $path =~ ^[A-Za-z0-9_][A-Za-z0-9._/-]*$ ]] && [[ $path != *..* ]] ||
    die "SHA256SUMS has a line that is not 'digest  path': $sum $path"
  mkdir -p "$bundle/$(dirname "$path")"
  get "$base/$path" "$bundle/$path" "${auth[@]}"
done <"$bundle/SHA256SUMS"
bad=$(cd "$bundle" && sha256sum -c SHA256SUMS 2>&1 | grep -v -e ': OK$' -e '^sha256sum: WARNING' || true)
[ -z "$bad" ] || die "checksum does not match the master's signed SHA256SUMS: ${bad//$'\n'/, } (was a file replaced on the master after it signed the list? restart the master): nothing was installed"
chmod 0755 "$bundle"/bin/*
echo "==> node bundle checked: $(wc -l <"$bundle/SHA256SUMS") files, $(du -sh "$bundle" | cut -f1)"

if [ "$verb" = fetch ]; then
  mkdir -p "$into"
  cp -a "$bundle"/. "$into"/
  echo "==> bundle in $into"
  exit 0
fi
# 4. The bundle's own install script, with the bundle's binaries.
if [ "$verb" = upgrade ]; then
  bash "$bundle/scripts/install.sh" upgrade --bin-dir "$bundle/bin" "${pass[@]}"
  exit 0
fi
bash "$bundle/scripts/install.sh" worker --server "$server" --token "$token" --bin-dir "$bundle/bin" "${pass[@]}"
