#!/usr/bin/env bash
# Installs minik8s on a lab VM as systemd services (doc/deploy.md walks through a whole class setup).
#
#   scripts/install.sh master --node-ip IP [--flannel]
#   scripts/install.sh worker --server MASTER --token TOKEN --node-ip IP [--node-name NAME] [--flannel]
#        (without binaries in target/release: the master's node bundle, scripts/join.sh; no build)
#   scripts/install.sh all    --node-ip IP          one machine that is both
#   scripts/install.sh etcd   --node-ip IP --etcd-cluster ...   only an etcd member (HA's third machine)
#   scripts/install.sh upgrade [--bin-dir D] [--force]   this machine to new binaries: the master
#        first, then each node in turn (drained, new binaries, restarted, uncordoned; a worker takes
#        the master's node bundle; --force: drain pods without a controller too)
#   scripts/install.sh uninstall                    stop and remove the units, binaries and rules
#
# It installs what it needs with apt (docker.io, iptables; etcd-server on the master), builds the
# release binaries if needed (a master; a worker takes the master's), copies them to /usr/local/bin, writes /etc/minik8s/minik8s.env (kept
# if it exists) and the units, then enables and starts them.
#   The master serves the API on https://IP:6443 (its plain port stays on 127.0.0.1:8080) and
#   prints the join token (/var/lib/minik8s/pki/join-token). A worker needs only the master's
#   address (MASTER, or https://MASTER:6443) and that token: its kubelet checks the cluster's CA
#   against the token and gets its own certificate (system:node:NAME), and kube-proxy's.
#   --flannel   pod network by flannel (its binary must be at /usr/local/bin/flanneld): the master's
#               etcd listens on NODE_IP and holds flannel's network config, node IPAM is off.
#               Without it the kubelets route pod subnets to each other themselves (host-gw).
#   --etcd-cluster NAME=IP,NAME=IP,NAME=IP   HA (doc/deploy.md): this machine's etcd is the member
#               whose IP is --node-ip, in one cluster with the others; a master uses all of them.
#   --pki-from DIR   a second master: the first master's /var/lib/minik8s/pki copied to DIR (the CA,
#               service-account key, join token); it makes its own serving certificate.
#   --server A,B     a worker of an HA control plane: every master, tried in turn.
#   --root DIR  write everything below DIR and start nothing (to look at the result, and for tests).
#   --bin-dir D take the binaries from D (default target/release, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

role=${1:-}
[ -n "$role" ] && shift || true
all_args=("$@")
server="" token="" node_ip="" node_name=$(hostname | tr 'A-Z' 'a-z') flannel=false root="" cluster_cidr=10.244.0.0/16
bin_dir=target/release etcd_cluster="" pki_from="" drain_force=false
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --token) token=$2; shift 2 ;;
    --node-ip) node_ip=$2; shift 2 ;;
    --node-name) node_name=$2; shift 2 ;;
    --flannel) flannel=true; shift ;;
    --root) root=$2; shift 2 ;;
    --cluster-cidr) cluster_cidr=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --etcd-cluster) etcd_cluster=$2; shift 2 ;;
    --pki-from) pki_from=$2; shift 2 ;;
    --force) drain_force=true; shift ;;
    *) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done

units_for() {
  case "$1" in
    master) echo minik8s-master ;;
    worker) echo minik8s-kubelet minik8s-kube-proxy ;;
    all) echo minik8s-master minik8s-kubelet minik8s-kube-proxy ;;
    etcd) echo "" ;;
  esac
}

# What the master serves joining and upgrading workers besides the binaries
# beside it (the node bundle, crates/apiserver/src/node_bundle.rs FILES).
install_share_files() {
  local share=$root/usr/local/share/minik8s f
  mkdir -p "$share"
  for f in scripts/install.sh scripts/join.sh scripts/lib/common.sh scripts/lib/upgrade.sh scripts/images.sh \
    images/function-runtime/server.py deploy/minik8s.env.example deploy/systemd/minik8s-kubelet.service \
    deploy/systemd/minik8s-kube-proxy.service deploy/systemd/flanneld.service doc/deploy.md doc/networking.md; do
    install -D -m 0644 "$f" "$share/$f"
  done
}

if [ "$role" = upgrade ]; then
  # shellcheck source=lib/upgrade.sh
  . scripts/lib/upgrade.sh
  upgrade_main
  exit 0
fi
if [ "$role" = uninstall ]; then
  for u in minik8s-kube-proxy minik8s-kubelet minik8s-master flanneld; do
    systemctl disable --now "$u" 2>/dev/null || true
    rm -f "/etc/systemd/system/$u.service"
  done
  systemctl daemon-reload 2>/dev/null || true
  [ -x /usr/local/bin/kube-proxy ] && /usr/local/bin/kube-proxy --cleanup --cluster-dns 10.96.0.10 || true
  systemctl disable --now minik8s-backup.timer 2>/dev/null || true
  rm -f /etc/systemd/system/minik8s-backup.{service,timer}
  rm -f /usr/local/bin/{master,kubelet,kube-proxy,kubectl,minik8s-add-user,minik8s-backup,nfs-fuse}
  rm -rf /usr/local/share/minik8s
  echo "minik8s removed (/etc/minik8s and /var/lib/minik8s are kept)"
  exit 0
fi
case "$role" in master|worker|all|etcd) ;; *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;; esac
[ -n "$node_ip" ] || { echo "--node-ip is required (the address the other machines reach this one at)" >&2; exit 2; }
if [ "$role" = worker ] && { [ -z "$server" ] || [ -z "$token" ]; }; then
  echo "--server MASTER and --token TOKEN (the master's /var/lib/minik8s/pki/join-token) are required for a worker" >&2; exit 2
fi
[ "$role" = etcd ] && [ -z "$etcd_cluster" ] && { echo "etcd: --etcd-cluster NAME=IP,... is required" >&2; exit 2; }
[ -n "$pki_from" ] && [ ! -s "$pki_from/ca.crt" ] && { echo "--pki-from $pki_from: no ca.crt there (copy the first master's /var/lib/minik8s/pki)" >&2; exit 2; }
# HA: this machine's etcd member and the client URLs of all of them.
etcd_name="" etcd_initial="" etcd_servers=http://127.0.0.1:2379
if [ -n "$etcd_cluster" ]; then
  etcd_servers=""
  IFS=, read -ra members <<<"$etcd_cluster"
  for m in "${members[@]}"; do
    case "$m" in *=*) ;; *) echo "--etcd-cluster: $m is not NAME=IP" >&2; exit 2 ;; esac
    [ "${m#*=}" = "$node_ip" ] && etcd_name=${m%%=*}
    etcd_initial+="${etcd_initial:+,}${m%%=*}=http://${m#*=}:2380"
    etcd_servers+="${etcd_servers:+,}http://${m#*=}:2379"
  done
  [ -n "$etcd_name" ] || [ "$role" = worker ] || { echo "--etcd-cluster: no member has this machine's --node-ip $node_ip" >&2; exit 2; }
fi
[ -n "$server" ] || server=$node_ip
# Every master of the list as https://HOST:6443.
servers=""
IFS=, read -ra masters <<<"$server"
for s in "${masters[@]}"; do
  case "$s" in https://*) ;; http://*) echo "--server: the API is served over TLS: give MASTER or https://MASTER:6443" >&2; exit 2 ;; *) s=https://$s:6443 ;; esac
  servers+="${servers:+,}$s"
done
server=$servers
# `all`: the kubelet joins its own master with the token the master writes (a file).
[ -n "$token" ] || token=/var/lib/minik8s/pki/join-token
master_ip=${server#https://}; master_ip=${master_ip%%:*}
[ "$flannel" = true ] && [ -z "$root" ] && [ "$role" != master ] && [ ! -x /usr/local/bin/flanneld ] && {
  echo "--flannel: put flanneld's release binary at /usr/local/bin/flanneld first (doc/networking.md)" >&2; exit 1; }

# A worker runs the node binaries (the node bundle a master serves holds the same set).
bins=(master kubelet kube-proxy kubectl minik8s-add-user minik8s-backup nfs-fuse)
[ "$role" = worker ] && bins=(kubelet kube-proxy kubectl nfs-fuse)
[ "$role" = etcd ] && bins=()
missing=false
for b in "${bins[@]}"; do [ -x "$bin_dir/$b" ] || missing=true; done
if [ "$missing" = true ] && [ "$role" = worker ] && [ "$bin_dir" = target/release ]; then
  # No build on a worker: the master's node bundle, checked against the
  # cluster's CA through the token (scripts/join.sh), then this script again
  # from the bundle, with its binaries.
  echo "==> no binaries in $bin_dir: joining with the master's node bundle"
  exec bash scripts/join.sh worker "${all_args[@]}"
fi
if [ -z "$root" ]; then
  [ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
  pkgs=(iptables curl)
  [ "$role" = master ] || pkgs+=(docker.io busybox-static)
  [ "$role" = worker ] || pkgs+=(etcd-server)
  [ "$role" = etcd ] && pkgs=(etcd-server)
  ensure_packages "${pkgs[@]}"
fi
if [ "$missing" = true ]; then
  [ "$bin_dir" = target/release ] || { echo "missing binaries in $bin_dir" >&2; exit 1; }
  ensure_build_deps
  echo "==> building release binaries (first time: several minutes)"
  cargo_release_binaries
fi

mkdir -p "$root/usr/local/bin" "$root/etc/minik8s" "$root/etc/systemd/system" "$root/usr/local/share/doc/minik8s"
for b in "${bins[@]}"; do install -m 0755 "$bin_dir/$b" "$root/usr/local/bin/$b"; done
if [ -n "$pki_from" ]; then
  # The cluster's identity from the first master; the serving certificate is
  # this master's own (made at its first start, for its own address).
  mkdir -p "$root/var/lib/minik8s/pki"
  cp -a "$pki_from"/. "$root/var/lib/minik8s/pki/"
  rm -f "$root/var/lib/minik8s/pki/apiserver.crt" "$root/var/lib/minik8s/pki/apiserver.key"
  chmod 700 "$root/var/lib/minik8s/pki"
  echo "==> the cluster PKI from $pki_from"
fi
install -m 0644 doc/deploy.md doc/networking.md "$root/usr/local/share/doc/minik8s/"
case "$role" in master|all) install_share_files ;; esac
env_file=$root/etc/minik8s/minik8s.env
if [ -e "$env_file" ]; then
  echo "==> keeping $env_file"
else
  sed -e "s|^MINIK8S_SERVER=.*|MINIK8S_SERVER=$server|" -e "s|^NODE_NAME=.*|NODE_NAME=$node_name|" \
    -e "s|^JOIN_TOKEN=.*|JOIN_TOKEN=$token|" \
    -e "s|^NODE_IP=.*|NODE_IP=$node_ip|" -e "s|^CLUSTER_CIDR=.*|CLUSTER_CIDR=$cluster_cidr|" \
    -e "s|^FLANNEL_ETCD=.*|FLANNEL_ETCD=$([ -n "$etcd_cluster" ] && echo "$etcd_servers" || echo "http://$master_ip:2379")|" \
    -e "s|^ETCD_SERVERS=.*|ETCD_SERVERS=$etcd_servers|" \
    -e "s|^ALLOCATE_NODE_CIDRS=.*|ALLOCATE_NODE_CIDRS=$([ "$flannel" = true ] && echo false || echo true)|" \
    deploy/minik8s.env.example >"$env_file"
  echo "==> wrote $env_file"
fi
units=$(units_for "$role")
[ "$flannel" = true ] && [ "$role" != master ] && units="flanneld $units"
for u in $units; do install -m 0644 "deploy/systemd/$u.service" "$root/etc/systemd/system/$u.service"; done
# A master snapshots its store hourly (doc/deploy.md, "Backup and restore").
timers=""
case "$role" in master|all)
  timers=minik8s-backup.timer
  install -m 0644 deploy/systemd/minik8s-backup.service deploy/systemd/minik8s-backup.timer "$root/etc/systemd/system/" ;;
esac

if [ "$role" != worker ] && { [ "$flannel" = true ] || [ -n "$etcd_cluster" ]; }; then
  # flannel's workers and the other masters reach this etcd on the VM's address.
  mkdir -p "$root/etc/default"
  cat >"$root/etc/default/etcd.minik8s" <<EOT
ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:2379,http://$node_ip:2379
ETCD_ADVERTISE_CLIENT_URLS=http://$node_ip:2379
EOT
  if [ -n "$etcd_cluster" ]; then
    # One member of a new cluster, in a data directory of its own (the one the
    # package started with belongs to a single-member cluster).
    cat >>"$root/etc/default/etcd.minik8s" <<EOT
ETCD_NAME=$etcd_name
ETCD_DATA_DIR=/var/lib/etcd/minik8s
ETCD_LISTEN_PEER_URLS=http://$node_ip:2380
ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$node_ip:2380
ETCD_INITIAL_CLUSTER=$etcd_initial
ETCD_INITIAL_CLUSTER_STATE=new
ETCD_INITIAL_CLUSTER_TOKEN=minik8s
EOT
  fi
fi
[ -n "$root" ] && { echo "==> installed below $root (nothing started): ${units:-etcd member $etcd_name}"; exit 0; }

if [ -e /etc/default/etcd.minik8s ]; then
  grep -q '^ETCD_LISTEN_CLIENT_URLS' /etc/default/etcd || cat /etc/default/etcd.minik8s >>/etc/default/etcd
  # A member of a new cluster answers once a quorum of members runs: do not
  # wait for it (the master retries its store until then) unless flannel's
  # network must be written now.
  systemctl restart etcd --no-block
  if [ "$flannel" = true ]; then
    for _ in $(seq 300); do
      ETCDCTL_API=3 etcdctl --endpoints "http://$node_ip:2379" endpoint health >/dev/null 2>&1 && break
      sleep 1
    done
    ETCDCTL_API=3 etcdctl --endpoints "http://$node_ip:2379" put /coreos.com/network/config \
      "{\"Network\": \"$cluster_cidr\", \"Backend\": {\"Type\": \"vxlan\"}}" >/dev/null
  fi
fi
[ "$role" = etcd ] && { echo "==> etcd member $etcd_name running"; exit 0; }
[ "$role" = master ] || [ "$role" = etcd ] || bash scripts/images.sh
systemctl daemon-reload
# restart, not only start: installing again over a running node (its join
# command run again after the master's upgrade) runs the new binaries.
for u in $units $timers; do systemctl enable "$u" && systemctl restart "$u"; done
echo "==> running: $units $timers"
if [ "$role" != worker ]; then
  for _ in $(seq 60); do [ -s /var/lib/minik8s/pki/join-token ] && break; sleep 1; done
  join_token=$(cat /var/lib/minik8s/pki/join-token 2>/dev/null)
  echo "join a worker (as root on it; no build there) with:"
  echo "  curl -fsSL --cacert <(echo $(base64 -w0 /var/lib/minik8s/pki/ca.crt) | base64 -d) https://$master_ip:6443/minik8s/join.sh | bash -s - worker --token $join_token --node-ip WORKER_IP"
  echo "or from a copy of this repository: scripts/install.sh worker --server $master_ip --token $join_token --node-ip WORKER_IP"
  echo "upgrade a worker later (after this master: scripts/install.sh upgrade here) with the same curl and: bash -s - upgrade"
  echo "check with: /usr/local/bin/kubectl --kubeconfig /var/lib/minik8s/pki/admin.conf get nodes -o wide"
else
  echo "check on the master with: kubectl --kubeconfig /var/lib/minik8s/pki/admin.conf get nodes -o wide"
fi
