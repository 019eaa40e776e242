#!/usr/bin/env bash
# Installs minik8s on a lab VM as systemd services (doc/deploy.md walks through a whole class setup).
#
#   scripts/install.sh master --node-ip IP [--flannel]
#   scripts/install.sh worker --server MASTER --token TOKEN --node-ip IP [--node-name NAME] [--flannel]
#   scripts/install.sh all    --node-ip IP          one machine that is both
#   scripts/install.sh uninstall                    stop and remove the units, binaries and rules
#
# It installs what it needs with apt (docker.io, iptables; etcd-server on the master), builds the
# release binaries if needed, copies them to /usr/local/bin, writes /etc/minik8s/minik8s.env (kept
# if it exists) and the units, then enables and starts them.
#   The master serves the API on https://IP:6443 (its plain port stays on 127.0.0.1:8080) and
#   prints the join token (/var/lib/minik8s/pki/join-token). A worker needs only the master's
#   address (MASTER, or https://MASTER:6443) and that token: its kubelet checks the cluster's CA
#   against the token and gets its own certificate (system:node:NAME), and kube-proxy's.
#   --flannel   pod network by flannel (its binary must be at /usr/local/bin/flanneld): the master's
#               etcd listens on NODE_IP and holds flannel's network config, node IPAM is off.
#               Without it the kubelets route pod subnets to each other themselves (host-gw).
#   --root DIR  write everything below DIR and start nothing (to look at the result, and for tests).
#   --bin-dir D take the binaries from D (default target/release, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

role=${1:-}
[ -n "$role" ] && shift || true
server="" token="" node_ip="" node_name=$(hostname | tr 'A-Z' 'a-z') flannel=false root="" cluster_cidr=10.244.0.0/16
bin_dir=target/release
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
    *) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done

units_for() {
  case "$1" in
    master) echo minik8s-master ;;
    worker) echo minik8s-kubelet minik8s-kube-proxy ;;
    all) echo minik8s-master minik8s-kubelet minik8s-kube-proxy ;;
  esac
}

if [ "$role" = uninstall ]; then
  for u in minik8s-kube-proxy minik8s-kubelet minik8s-master flanneld; do
    systemctl disable --now "$u" 2>/dev/null || true
    rm -f "/etc/systemd/system/$u.service"
  done
  systemctl daemon-reload 2>/dev/null || true
  [ -x /usr/local/bin/kube-proxy ] && /usr/local/bin/kube-proxy --cleanup --cluster-dns 10.96.0.10 || true
  rm -f /usr/local/bin/{master,kubelet,kube-proxy,kubectl,minik8s-add-user}
  echo "minik8s removed (/etc/minik8s and /var/lib/minik8s are kept)"
  exit 0
fi
case "$role" in master|worker|all) ;; *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;; esac
[ -n "$node_ip" ] || { echo "--node-ip is required (the address the other machines reach this one at)" >&2; exit 2; }
if [ "$role" = worker ] && { [ -z "$server" ] || [ -z "$token" ]; }; then
  echo "--server MASTER and --token TOKEN (the master's /var/lib/minik8s/pki/join-token) are required for a worker" >&2; exit 2
fi
[ -n "$server" ] || server=$node_ip
case "$server" in https://*) ;; http://*) echo "--server: the API is served over TLS: give MASTER or https://MASTER:6443" >&2; exit 2 ;; *) server=https://$server:6443 ;; esac
# `all`: the kubelet joins its own master with the token the master writes (a file).
[ -n "$token" ] || token=/var/lib/minik8s/pki/join-token
master_ip=${server#https://}; master_ip=${master_ip%%:*}
[ "$flannel" = true ] && [ -z "$root" ] && [ "$role" != master ] && [ ! -x /usr/local/bin/flanneld ] && {
  echo "--flannel: put flanneld's release binary at /usr/local/bin/flanneld first (doc/networking.md)" >&2; exit 1; }

if [ -z "$root" ]; then
  [ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
  pkgs=(iptables curl)
  [ "$role" = master ] || pkgs+=(docker.io busybox-static)
  [ "$role" = worker ] || pkgs+=(etcd-server)
  ensure_packages "${pkgs[@]}"
fi
bins=(master kubelet kube-proxy kubectl minik8s-add-user)
missing=false
for b in "${bins[@]}"; do [ -x "$bin_dir/$b" ] || missing=true; done
if [ "$missing" = true ]; then
  [ "$bin_dir" = target/release ] || { echo "missing binaries in $bin_dir" >&2; exit 1; }
  ensure_build_deps
  echo "==> building release binaries (first time: several minutes)"
  cargo build --release --quiet -p master -p kubelet -p kube-proxy -p kubectl
fi

mkdir -p "$root/usr/local/bin" "$root/etc/minik8s" "$root/etc/systemd/system" "$root/usr/local/share/doc/minik8s"
for b in "${bins[@]}"; do install -m 0755 "$bin_dir/$b" "$root/usr/local/bin/$b"; done
install -m 0644 doc/deploy.md doc/networking.md "$root/usr/local/share/doc/minik8s/"
env_file=$root/etc/minik8s/minik8s.env
if [ -e "$env_file" ]; then
  echo "==> keeping $env_file"
else
  sed -e "s|^MINIK8S_SERVER=.*|MINIK8S_SERVER=$server|" -e "s|^NODE_NAME=.*|NODE_NAME=$node_name|" \
    -e "s|^JOIN_TOKEN=.*|JOIN_TOKEN=$token|" \
    -e "s|^NODE_IP=.*|NODE_IP=$node_ip|" -e "s|^CLUSTER_CIDR=.*|CLUSTER_CIDR=$cluster_cidr|" \
    -e "s|^FLANNEL_ETCD=.*|FLANNEL_ETCD=http://$master_ip:2379|" \
    -e "s|^ALLOCATE_NODE_CIDRS=.*|ALLOCATE_NODE_CIDRS=$([ "$flannel" = true ] && echo false || echo true)|" \
    deploy/minik8s.env.example >"$env_file"
  echo "==> wrote $env_file"
fi
units=$(units_for "$role")
[ "$flannel" = true ] && [ "$role" != master ] && units="flanneld $units"
for u in $units; do install -m 0644 "deploy/systemd/$u.service" "$root/etc/systemd/system/$u.service"; done

if [ "$role" != worker ] && [ "$flannel" = true ]; then
  # flannel's workers reach the master's etcd, and read the network from it.
  mkdir -p "$root/etc/default"
  cat >"$root/etc/default/etcd.minik8s" <<EOT
ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:2379,http://$node_ip:2379
ETCD_ADVERTISE_CLIENT_URLS=http://$node_ip:2379
EOT
fi
[ -n "$root" ] && { echo "==> installed below $root (nothing started): $units"; exit 0; }

if [ -e /etc/default/etcd.minik8s ]; then
  grep -q '^ETCD_LISTEN_CLIENT_URLS' /etc/default/etcd || cat /etc/default/etcd.minik8s >>/etc/default/etcd
  systemctl restart etcd
  ETCDCTL_API=3 etcdctl --endpoints "http://$node_ip:2379" put /coreos.com/network/config \
    "{\"Network\": \"$cluster_cidr\", \"Backend\": {\"Type\": \"vxlan\"}}" >/dev/null
fi
[ "$role" = master ] || bash scripts/images.sh
systemctl daemon-reload
for u in $units; do systemctl enable --now "$u"; done
echo "==> running: $units"
if [ "$role" != worker ]; then
  for _ in $(seq 60); do [ -s /var/lib/minik8s/pki/join-token ] && break; sleep 1; done
  echo "join a worker with: scripts/install.sh worker --server $master_ip --token $(cat /var/lib/minik8s/pki/join-token 2>/dev/null) --node-ip WORKER_IP"
  echo "check with: /usr/local/bin/kubectl --kubeconfig /var/lib/minik8s/pki/admin.conf get nodes -o wide"
else
  echo "check on the master with: kubectl --kubeconfig /var/lib/minik8s/pki/admin.conf get nodes -o wide"
fi
