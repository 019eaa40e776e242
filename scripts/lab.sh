#!/usr/bin/env bash
# A multi-node minik8s on one host: every node is a network namespace with its
# own dockerd, kubelet and kube-proxy; the control plane (`master`, embedded
# store) has a namespace of its own. All of them hang off one bridge, like VMs
# on one lab network, and pods reach each other through the kubelets' host-gw
# routes. doc/lab.md explains the layout.
#
#   scripts/lab.sh up [N]        start N nodes (default LAB_NODES, else 3)
#   scripts/lab.sh status        what runs, and `kubectl get nodes`
#   scripts/lab.sh down          stop everything and leave the host as it was
#   scripts/lab.sh stop-node N   stop node N's kubelet, kube-proxy and dockerd (a node failure)
#   scripts/lab.sh start-node N  start node N again (dockerd with the images, kubelet, kube-proxy)
#   scripts/lab.sh join N        a new machine N (the next number) joins with the master's one-command
#                                join (no Rust toolchain on its PATH; installs below $LAB_DIR/nodeN/root)
#   scripts/lab.sh upgrade-master DIR [FILES]  the master to the binaries in DIR (its bundle's scripts from FILES)
#   scripts/lab.sh upgrade N     joined machine N upgrades from the master's bundle (drain, install, restart, uncordon)
#   scripts/lab.sh kill N A / start N A   kill -9 agent A (kubelet, kube-proxy, dockerd) of node N, start it again
#   scripts/lab.sh stop-master N / start-master N, stop-etcd N / start-etcd N
#                                kill -9 a control-plane process (N = 1; HA mode: 1..3), start it again
#   scripts/lab.sh stop-apiserver|stop-scheduler|stop-controller-manager N (and start-…)
#                                HA mode: kill -9 one process of control-plane machine N, start it again
#   scripts/lab.sh partition N / heal N   cut node N off from the control plane (iptables DROP), and back
#   scripts/lab.sh kubectl ARGS  our kubectl against the lab
#   scripts/lab.sh exec N CMD    run CMD in node N's network namespace (cp: the master's)
#
#   host (root netns): ${LAB_NAME}-host $LAB_NET.1/24 (a veth, the host's port on the switch)
#                                    │
#   netns ${LAB_NAME}-sw: bridge br0 ─┬──────────────┬──────────────┬── ...
#                                    │              │              │
#     netns ${LAB_NAME}-cp      ${LAB_NAME}-node1   ${LAB_NAME}-node2
#     master :6443 (TLS)        dockerd, kubelet,  dockerd, kubelet,
#     $LAB_NET.10               kube-proxy         kube-proxy
#                               $LAB_NET.11        $LAB_NET.12
#                               pods 10.244.x.0/24 pods 10.244.y.0/24
#
# The switch has a namespace of its own so that frames between the lab's
# machines never pass the host's netfilter: a host with its own dockerd,
# kubelet or kube-proxy (the quick start) has FORWARD policy DROP, bridge
# netfilter on and masquerade rules for its own pod subnet, which may be one
# of the lab's.
#
# Settings (environment): LAB_DIR (state, default /tmp/mk8s-lab: keep it short,
# socket paths must stay under 108 bytes), LAB_NODES, LAB_NAME (prefix of the
# namespaces, links and cgroups), LAB_NET (the underlay's first three octets),
# LAB_BIN (the binaries; default target/release, built if missing),
# LAB_MASTER_ARGS and LAB_KUBELET_ARGS (extra flags, e.g. short node timeouts;
# in HA mode LAB_MASTER_ARGS go to the controller managers),
# LAB_POD_NETWORK: host-gw (default: the kubelets route between the nodes) or
# vxlan (the script does what flanneld would: a flannel.1 vxlan device, routes,
# neighbour and fdb entries, its masquerade rules and a subnet.env per node, which
# the kubelets read as they would flannel's), LAB_STORE: embedded (default) or
# etcd (Debian's etcd-server in the control plane's namespace, as on lab VMs),
# LAB_HA=1: an HA control plane (doc/deploy.md): three control-plane
# namespaces cp, cp2, cp3 with one etcd member each (a 3-member cluster), and
# in cp and in cp2 an apiserver, a scheduler and a controller manager as three
# processes (as kubeadm runs them; the last two elected leaders on Leases,
# each talking to its machine's apiserver); the nodes' kubelets and
# kube-proxies are given both apiservers and fail over.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/lib/common.sh

LAB_DIR=${LAB_DIR:-/tmp/mk8s-lab}
LAB_NODES=${LAB_NODES:-3}
LAB_NAME=${LAB_NAME:-mk8s}
LAB_NET=${LAB_NET:-192.168.77}
LAB_BIN=${LAB_BIN:-$ROOT/target/release}
LAB_MASTER_ARGS=${LAB_MASTER_ARGS:-}
LAB_KUBELET_ARGS=${LAB_KUBELET_ARGS:-}
LAB_POD_NETWORK=${LAB_POD_NETWORK:-host-gw}
LAB_HA=${LAB_HA:-0}
LAB_STORE=${LAB_STORE:-embedded}
[ "$LAB_HA" = 1 ] && LAB_STORE=etcd
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/12
CLUSTER_DNS=10.96.0.10
SWITCH_NS=$LAB_NAME-sw
HOST_LINK=$LAB_NAME-host
CP_NS=$LAB_NAME-cp
CP_IP=$LAB_NET.10
SERVER=https://$CP_IP:6443
# HA: the other control-plane machines (cp3 runs only an etcd member).
CP2_NS=$LAB_NAME-cp2
CP2_IP=$LAB_NET.8
CP3_NS=$LAB_NAME-cp3
CP3_IP=$LAB_NET.9
# The NFS server's machine (Debian's nfs-ganesha and rpcbind; LAB_NFS=0 leaves it out).
LAB_NFS=${LAB_NFS:-1}
NFS_NS=$LAB_NAME-nfs
NFS_IP=$LAB_NET.7
# What the nodes are given: every apiserver.
NODE_SERVERS=$SERVER
[ "$LAB_HA" = 1 ] && NODE_SERVERS="$SERVER,https://$CP2_IP:6443"
# The admin's kubeconfig (the master's, pointed at $CP_IP); nodes join with the master's token.
KUBECONFIG_LAB=$LAB_DIR/admin.conf
PKI=$LAB_DIR/cp/pki

log() { printf '[lab %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
nodes() { seq 1 "$LAB_NODES"; }
# The control plane's namespaces and addresses (one, or three in HA mode).
cp_namespaces() { echo "$CP_NS"; [ "$LAB_HA" != 1 ] || echo "$CP2_NS $CP3_NS"; }
# Every namespace but the nodes' and the switch's.
host_namespaces() { cp_namespaces; [ "$LAB_NFS" != 1 ] || echo "$NFS_NS"; }
cp_ip() { case $1 in "$CP2_NS") echo "$CP2_IP" ;; "$CP3_NS") echo "$CP3_IP" ;; *) echo "$CP_IP" ;; esac; }
cp_dir() { case $1 in "$CP2_NS") echo "$LAB_DIR/cp2" ;; "$CP3_NS") echo "$LAB_DIR/cp3" ;; *) echo "$LAB_DIR/cp" ;; esac; }
node_ns() { echo "$LAB_NAME-node$1"; }
node_ip() { echo "$LAB_NET.$((10 + $1))"; }
node_dir() { echo "$LAB_DIR/node$1"; }
in_ns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" -- "$@"; }
dk() { local n=$1; shift; docker -H "unix://$(node_dir "$n")/docker.sock" "$@"; }
kubectl_lab() { "$LAB_BIN/kubectl" --kubeconfig "$KUBECONFIG_LAB" "$@"; }

# spawn PIDFILE LOG NETNS CMD...: starts CMD in NETNS as a session leader
# (so it outlives this script and its pid is $!).
spawn() {
  local pidfile=$1 logfile=$2 ns=$3; shift 3
  setsid nsenter --net="/run/netns/$ns" -- "$@" </dev/null >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
}

# A process counts as alive until it exits, not until its zombie is reaped
# (the lab's daemons are reparented to whatever reaps orphans, maybe slowly).
running_pid() { local s; s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }
alive() { [ -f "$1" ] && running_pid "$(cat "$1")"; }

# stop_pids SECONDS PIDFILE...: TERM, wait, then KILL what is left.
stop_pids() {
  local secs=$1; shift
  local pids=() f
  for f in "$@"; do alive "$f" && pids+=("$(cat "$f")"); done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq $((secs * 10))); do
    local left=0 p
    for p in "${pids[@]}"; do running_pid "$p" && left=1; done
    [ $left = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

not() { ! "$@"; }

# until_ok SECONDS WHAT CMD...: wait_until, or stop here.
until_ok() { wait_until "$@" || die "the lab is not up (see $LAB_DIR/*/*.log)"; }

check_tools() {
  [ "$(id -u)" = 0 ] || die "the lab needs root (network namespaces, dockerd)"
  command -v dockerd >/dev/null && command -v iptables >/dev/null && [ -x /bin/busybox ] ||
    ensure_packages docker.io iptables busybox-static
  local b missing=()
  [ "$LAB_NFS" != 1 ] || { [ -x /usr/bin/ganesha.nfsd ] && [ -x /usr/sbin/rpcbind ]; } ||
    ensure_packages nfs-ganesha nfs-ganesha-vfs rpcbind
  local ha_bins=()
  [ "$LAB_HA" != 1 ] || ha_bins=(apiserver scheduler controller-manager)
  for b in master kubelet kube-proxy kubectl nfs-fuse "${ha_bins[@]}"; do [ -x "$LAB_BIN/$b" ] || missing+=("$b"); done
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$LAB_BIN" = "$ROOT/target/release" ] || die "missing in LAB_BIN=$LAB_BIN: ${missing[*]}"
    ensure_build_deps
    log "building release binaries (first time: several minutes)"
    local ha_packages=()
    for b in "${ha_bins[@]}"; do ha_packages+=(-p "$b"); done
    cargo_release_binaries "${ha_packages[@]}"
  fi
}

underlay_up() {
  # The switch: a bridge in its own namespace, with bridge netfilter off there
  # (its tables are empty anyway), so lab traffic meets no host rule.
  ip netns add "$SWITCH_NS"
  in_ns "$SWITCH_NS" sysctl -qw net.bridge.bridge-nf-call-iptables=0 \
    net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0 2>/dev/null || true
  ip -n "$SWITCH_NS" link add br0 type bridge
  ip -n "$SWITCH_NS" link set br0 up
  # The host's port: routed traffic to and from the host itself only.
  ip link add "$HOST_LINK" type veth peer name host netns "$SWITCH_NS"
  ip -n "$SWITCH_NS" link set host master br0 up
  ip addr add "$LAB_NET.1/24" dev "$HOST_LINK"
  ip link set "$HOST_LINK" up
  local ns
  for ns in $(host_namespaces); do machine_ns "$ns"; done
  for ns in $(cp_namespaces); do
    ip -n "$ns" addr add "$(cp_ip "$ns")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  if [ "$LAB_NFS" = 1 ]; then
    ip -n "$NFS_NS" addr add "$NFS_IP/24" dev eth0
    ip -n "$NFS_NS" link set eth0 up
  fi
  for n in $(nodes); do node_underlay "$n"; done
}

# A machine on the switch: namespace NS, its eth0 on br0.
machine_ns() {
  local ns=$1 port=${1#"$LAB_NAME-"}
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$SWITCH_NS" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$SWITCH_NS" link set "$port" master br0 up
  # A new namespace copies these from the host, which may say otherwise.
  in_ns "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
    net.ipv4.conf.default.rp_filter=0
}

node_underlay() {
  local n=$1 ns ip
  ns=$(node_ns "$n") ip=$(node_ip "$n")
  machine_ns "$ns"
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  # No default route (nothing leaves the lab); Service VIPs need a route
  # for node-originated traffic, since routing happens before OUTPUT's DNAT.
  ip -n "$ns" route add "$SERVICE_CIDR" dev eth0
}

# The lab's NFS server on $NFS_IP: rpcbind and nfs-ganesha (user space:
# kernels without nfsd work) exporting $LAB_DIR/nfs/export, read-write, no
# root squash. The nodes' kubelets mount it with nfs-fuse.
start_nfs() {
  local d=$LAB_DIR/nfs
  mkdir -p "$d/export"
  chmod 0777 "$d/export"
  cat >"$d/ganesha.conf" <<EOF
NFS_CORE_PARAM { Protocols = 3; NFS_Port = 2049; MNT_Port = 20048; Bind_addr = $NFS_IP; }
NFSV4 { Graceless = true; }
EXPORT { Export_Id = 1; Path = $d/export; Pseudo = /export; Access_Type = RW; Squash = No_Root_Squash;
         Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
EOF
  spawn "$d/rpcbind.pid" "$d/rpcbind.log" "$NFS_NS" rpcbind -f -w
  until_ok 10 "rpcbind on $NFS_IP" in_ns "$NFS_NS" bash -c "echo >/dev/tcp/$NFS_IP/111"
  spawn "$d/ganesha.pid" "$d/ganesha.out" "$NFS_NS" ganesha.nfsd -F -f "$d/ganesha.conf" \
    -L "$d/ganesha.log" -p "$d/ganesha.pidfile"
  until_ok 30 "the NFS server on $NFS_IP" in_ns "$NFS_NS" bash -c "echo >/dev/tcp/$NFS_IP/2049 && echo >/dev/tcp/$NFS_IP/20048"
}

start_dockerd() {
  local n=$1 d
  d=$(node_dir "$n")
  mkdir -p "$d"
  # Its own key: without it every daemon shares /etc/docker/key.json's ID.
  echo "{ \"deprecated-key-path\": \"$d/key.json\" }" >"$d/daemon.json"
  # --bridge=none: the kubelet makes the pod network on the node's podCIDR.
  # --userland-proxy=false turns on hairpin mode (a pod reaching itself via a VIP).
  spawn "$d/dockerd.pid" "$d/dockerd.log" "$(node_ns "$n")" dockerd \
    --config-file "$d/daemon.json" --data-root "$d/data" --exec-root "$d/exec" \
    --pidfile "$d/dockerd.pidfile" -H "unix://$d/docker.sock" --bridge=none \
    --iptables=true --ip-forward=true --userland-proxy=false \
    --registry-mirror "http://$CP_IP:5000" --insecure-registry "$CP_IP:5000" \
    --cgroup-parent "/$LAB_NAME-node$n" --shutdown-timeout 2 --log-level warn
}

# The image registry on the master (Debian's docker-registry): every node's
# dockerd uses it as its mirror for Docker Hub names, and a student can
# `docker push $CP_IP:5000/library/NAME:TAG` once for every node.
start_registry() {
  command -v docker-registry >/dev/null || ensure_packages docker-registry
  mkdir -p "$LAB_DIR/cp/registry"
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s:5000\n' \
    "$LAB_DIR/cp/registry" "$CP_IP" >"$LAB_DIR/cp/registry.yml"
  spawn "$LAB_DIR/cp/registry.pid" "$LAB_DIR/cp/registry.log" "$CP_NS" docker-registry serve "$LAB_DIR/cp/registry.yml"
}

load_images() {
  log "images: build on node1, copy to the others, push the Docker Hub names to the registry"
  until_ok 30 "the registry" in_ns "$CP_NS" curl -fsS "http://$CP_IP:5000/v2/"
  # LAB_IMAGES=all adds nginx and python (scripts/images.sh --all).
  local all=()
  [ "${LAB_IMAGES:-}" = all ] && all=(--all)
  DOCKER_HOST="unix://$(node_dir 1)/docker.sock" MINIK8S_REGISTRY="$CP_IP:5000" \
    bash "$ROOT/scripts/images.sh" "${all[@]}" >/dev/null
  local name
  if [ ${#all[@]} = 0 ]; then
    # Without --all, images.sh pushes nothing: busybox under its usual names.
    for name in busybox:latest busybox:1.36 busybox:1.28; do
      dk 1 tag minik8s/busybox:latest "$CP_IP:5000/library/$name"
      dk 1 push -q "$CP_IP:5000/library/$name" >/dev/null
    done
  fi
  dk 1 save -o "$LAB_DIR/images.tar" minik8s/busybox:latest minik8s/pause:latest
  local pids=() n
  for n in $(nodes); do
    [ "$n" = 1 ] || { dk "$n" load -q -i "$LAB_DIR/images.tar" >/dev/null & pids+=($!); }
  done
  for p in "${pids[@]}"; do wait "$p"; done
}

# vxlan: flanneld's work for node N, by hand. Subnet 10.244.N.0/24, VTEP
# flannel.1 with a MAC made from N, and for every other node M a route via
# M's VTEP address, a neighbour entry (M's MAC) and an fdb entry (that MAC
# is behind M's underlay address).
vtep_mac() { printf '0e:00:00:77:%02x:%02x' "$(( $1 / 256 ))" "$(( $1 % 256 ))"; }
flannel_node() {
  local n=$1 ns m d
  ns=$(node_ns "$n") d=$(node_dir "$n")
  mkdir -p "$d"
  ip -n "$ns" link add flannel.1 address "$(vtep_mac "$n")" mtu 1450 type vxlan id 1 \
    local "$(node_ip "$n")" dev eth0 dstport 8472 nolearning
  ip -n "$ns" addr add "10.244.$n.0/32" dev flannel.1
  ip -n "$ns" link set flannel.1 up
  for m in $(nodes); do
    [ "$m" = "$n" ] && continue
    ip -n "$ns" route replace "10.244.$m.0/24" via "10.244.$m.0" dev flannel.1 onlink
    ip -n "$ns" neigh replace "10.244.$m.0" lladdr "$(vtep_mac "$m")" dev flannel.1 nud permanent
    bridge -n "$ns" fdb append "$(vtep_mac "$m")" dev flannel.1 dst "$(node_ip "$m")"
  done
  # flannel's --ip-masq rules: pod-to-pod keeps its addresses, pod-to-elsewhere is masqueraded.
  in_ns "$ns" iptables-restore -w --noflush <<EOT
*nat
:LAB-FLANNEL - [0:0]
-A POSTROUTING -j LAB-FLANNEL
-A LAB-FLANNEL -s $CLUSTER_CIDR -d $CLUSTER_CIDR -j RETURN
-A LAB-FLANNEL -s $CLUSTER_CIDR ! -d 224.0.0.0/4 -j MASQUERADE
-A LAB-FLANNEL ! -s $CLUSTER_CIDR -d 10.244.$n.0/24 -j RETURN
-A LAB-FLANNEL ! -s $CLUSTER_CIDR -d $CLUSTER_CIDR -j MASQUERADE
COMMIT
*filter
:LAB-FLANNEL-FWD - [0:0]
-A FORWARD -j LAB-FLANNEL-FWD
-A LAB-FLANNEL-FWD -s $CLUSTER_CIDR -j ACCEPT
-A LAB-FLANNEL-FWD -d $CLUSTER_CIDR -j ACCEPT
COMMIT
EOT
  printf 'FLANNEL_NETWORK=%s\nFLANNEL_SUBNET=10.244.%s.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n' \
    "$CLUSTER_CIDR" "$n" >"$d/subnet.env"
}

# A node's agents join as lab VMs do (scripts/install.sh worker): the kubelet
# has only the master's address and the join token, checks the CA against it
# and gets its own certificate and kube-proxy's.
start_node_agents() {
  local n=$1
  start_kubelet "$n"
  until_ok 60 "node$n to join (see $(node_dir "$n")/kubelet.log)" test -s "$(node_dir "$n")/kube-proxy.conf"
  start_kube_proxy "$n"
}
start_kubelet() {
  local n=$1 d
  d=$(node_dir "$n")
  spawn "$d/kubelet.pid" "$d/kubelet.log" "$(node_ns "$n")" "$LAB_BIN/kubelet" --server "$NODE_SERVERS" \
    --bootstrap-token "$(cat "$PKI/join-token")" --kubeconfig "$d/kubelet.conf" \
    --kube-proxy-kubeconfig "$d/kube-proxy.conf" \
    --node-name "node$n" --node-ip "$(node_ip "$n")" --docker-socket "unix://$d/docker.sock" \
    --root-dir "$d/kubelet" --cluster-dns "$CLUSTER_DNS" --flannel-subnet-env "$d/subnet.env" \
    $LAB_KUBELET_ARGS
}
start_kube_proxy() {
  local n=$1 d
  d=$(node_dir "$n")
  spawn "$d/kube-proxy.pid" "$d/kube-proxy.log" "$(node_ns "$n")" "$LAB_BIN/kube-proxy" --kubeconfig "$d/kube-proxy.conf" \
    --cluster-cidr "$CLUSTER_CIDR" --cluster-dns "$CLUSTER_DNS" --ingress-address "$(node_ip "$n")" \
    --hostname-override "node$n"
}

# One agent of a node crashes (kill -9) and comes back: the kubelet, the
# kube-proxy or the node's dockerd (its containers' shims live on).
cmd_kill_agent() {
  local n=${1:?usage: lab.sh kill N kubelet|kube-proxy|dockerd} what=${2:?what} f
  case $what in kubelet | kube-proxy | dockerd) ;; *) die "kubelet, kube-proxy or dockerd, not $what" ;; esac
  f="$(node_dir "$n")/$what.pid"
  alive "$f" || die "$what of node$n is not running"
  log "killing $what on node$n"
  kill -KILL "$(cat "$f")"
  wait_until 10 "$what to exit" not alive "$f" || die "$what of node$n did not exit"
}
# A node cut off from the control plane (a network partition): its
# namespace drops every packet to and from the masters, until healed.
cmd_partition() {
  local n=${1:?usage: lab.sh partition|heal N} ns ip
  ns=$(node_ns "$n")
  log "cutting node$n off from the control plane"
  in_ns "$ns" iptables -N LAB-PARTITION
  for ip in "$CP_IP" $([ "$LAB_HA" = 1 ] && echo "$CP2_IP"); do
    in_ns "$ns" iptables -A LAB-PARTITION -s "$ip" -j DROP
    in_ns "$ns" iptables -A LAB-PARTITION -d "$ip" -j DROP
  done
  in_ns "$ns" iptables -I INPUT -j LAB-PARTITION
  in_ns "$ns" iptables -I OUTPUT -j LAB-PARTITION
}
cmd_heal() {
  local n=${1:?usage: lab.sh partition|heal N} ns
  ns=$(node_ns "$n")
  log "healing node$n's partition"
  in_ns "$ns" iptables -D INPUT -j LAB-PARTITION
  in_ns "$ns" iptables -D OUTPUT -j LAB-PARTITION
  in_ns "$ns" iptables -F LAB-PARTITION
  in_ns "$ns" iptables -X LAB-PARTITION
}
cmd_start_agent() {
  local n=${1:?usage: lab.sh start N kubelet|kube-proxy|dockerd} what=${2:?what}
  alive "$(node_dir "$n")/$what.pid" && die "$what of node$n is running"
  log "starting $what on node$n"
  case $what in
    kubelet) start_kubelet "$n" ;;
    kube-proxy) start_kube_proxy "$n" ;;
    dockerd) start_dockerd "$n"; until_ok 60 "node$n's dockerd" dk "$n" version ;;
    *) die "kubelet, kube-proxy or dockerd, not $what" ;;
  esac
}

# The control plane of one control-plane namespace: the `master` process
# (apiserver, scheduler, controller manager), or in HA mode the three as
# processes of their own.
start_master() {
  local ns=$1 d
  d=$(cp_dir "$ns")
  mkdir -p "$d"
  if [ "$LAB_HA" = 1 ]; then
    local c
    for c in $CP_PROCESSES; do alive "$d/$c.pid" || start_cp_process "$ns" "$c"; done
    return
  fi
  # The node binaries on the control-plane machine's own disk, as install.sh
  # puts them beside the master: what it serves joining machines (lab.sh join).
  # The master runs from there too, so that `upgrade-master` replaces it as
  # install.sh replaces /usr/local/bin/master.
  mkdir -p "$d/bin"
  local b
  for b in master kubelet kube-proxy kubectl nfs-fuse; do [ -e "$d/bin/$b" ] || cp "$LAB_BIN/$b" "$d/bin/$b"; done
  [ -s "$LAB_DIR/bundle-files" ] || echo "${LAB_BUNDLE_FILES:-$ROOT}" >"$LAB_DIR/bundle-files"
  # shellcheck disable=SC2046 # the saved store flags are words
  spawn "$d/master.pid" "$d/master.log" "$ns" "$d/bin/master" --node-bundle-bin-dir "$d/bin" \
    --node-bundle-files "$(cat "$LAB_DIR/bundle-files")" \
    --advertise-address "$(cp_ip "$ns")" --pki-dir "$d/pki" $(cat "$LAB_DIR/store-flags") \
    --cluster-cidr "$CLUSTER_CIDR" --allocate-node-cidrs "$(cat "$LAB_DIR/ipam")" \
    --local-path-root "$LAB_DIR/storage" $LAB_MASTER_ARGS
}

# HA mode's control-plane processes of one machine.
CP_PROCESSES="apiserver scheduler controller-manager"
start_cp_process() {
  local ns=$1 what=$2 d
  d=$(cp_dir "$ns")
  case $what in
    apiserver)
      # shellcheck disable=SC2046 # the saved store flags are words
      spawn "$d/apiserver.pid" "$d/apiserver.log" "$ns" "$LAB_BIN/apiserver" \
        --advertise-address "$(cp_ip "$ns")" --pki-dir "$d/pki" $(cat "$LAB_DIR/store-flags") ;;
    scheduler | controller-manager)
      # Each talks to its own machine's apiserver (the kubeconfig names
      # 127.0.0.1), which writes the kubeconfigs on the first machine.
      until_ok 60 "$what's kubeconfig in $ns" test -s "$d/pki/$what.conf"
      if [ "$what" = scheduler ]; then
        spawn "$d/$what.pid" "$d/$what.log" "$ns" "$LAB_BIN/scheduler" --kubeconfig "$d/pki/$what.conf"
      else
        spawn "$d/$what.pid" "$d/$what.log" "$ns" "$LAB_BIN/controller-manager" \
          --kubeconfig "$d/pki/$what.conf" --cluster-signing-dir "$d/pki" \
          --cluster-cidr "$CLUSTER_CIDR" --allocate-node-cidrs "$(cat "$LAB_DIR/ipam")" \
          --local-path-root "$LAB_DIR/storage" $LAB_MASTER_ARGS
      fi ;;
    *) die "apiserver, scheduler or controller-manager, not $what" ;;
  esac
}

# HA faults: a master (1: cp, 2: cp2) or an etcd member (1-3) dies as if its
# machine lost power, and comes back.
cp_ns_of() { case $1 in 1) echo "$CP_NS" ;; 2) echo "$CP2_NS" ;; 3) echo "$CP3_NS" ;; *) die "control-plane machine 1, 2 or 3, not $1" ;; esac; }
# The pid files of a control-plane process kind (HA mode's "master" is its three processes).
cp_pidfiles() {
  local d=$1 what=$2 c
  if [ "$what" = master ] && [ "$LAB_HA" = 1 ]; then
    for c in $CP_PROCESSES; do echo "$d/$c.pid"; done
  else
    echo "$d/$what.pid"
  fi
}
cmd_stop_cp() {
  local what=${1:?usage: lab.sh stop-master|stop-etcd N} n=${2:?N} d f any=false
  d=$(cp_dir "$(cp_ns_of "$n")")
  case $what in master | etcd) ;; *) [ "$LAB_HA" = 1 ] || die "stop-$what: HA mode only (LAB_HA=1)" ;; esac
  log "killing $what on control-plane machine $n"
  for f in $(cp_pidfiles "$d" "$what"); do
    alive "$f" && { kill -KILL "$(cat "$f")"; any=true; }
  done
  [ "$any" = true ] || die "$what $n is not running"
}
cmd_start_cp() {
  local what=$1 n=${2:?N} ns f
  ns=$(cp_ns_of "$n")
  case $what in master | etcd) ;; *) [ "$LAB_HA" = 1 ] || die "start-$what: HA mode only (LAB_HA=1)" ;; esac
  if [ "$what" != master ]; then
    for f in $(cp_pidfiles "$(cp_dir "$ns")" "$what"); do alive "$f" && die "$what $n is running"; done
  fi
  log "starting $what on control-plane machine $n"
  case $what in
    master) start_master "$ns" ;;
    etcd) start_etcd_members "$ns" ;;
    *) start_cp_process "$ns" "$what" ;;
  esac
}

# etcd: one member in the control plane's namespace, or (HA) one in each of
# cp, cp2 and cp3, forming one 3-member cluster.
start_etcd_members() {
  local only=${1:-} ns ip d cluster=""
  for ns in $(cp_namespaces); do
    ip=$(cp_ip "$ns")
    cluster+="${cluster:+,}${ns#"$LAB_NAME-"}=http://$ip:2380"
  done
  for ns in ${only:-$(cp_namespaces)}; do
    ip=$(cp_ip "$ns") d=$(cp_dir "$ns")
    mkdir -p "$d"
    spawn "$d/etcd.pid" "$d/etcd.log" "$ns" etcd --name "${ns#"$LAB_NAME-"}" \
      --data-dir "$d/etcd" --listen-client-urls "http://127.0.0.1:2379,http://$ip:2379" \
      --advertise-client-urls "http://$ip:2379" --listen-peer-urls "http://$ip:2380" \
      --initial-advertise-peer-urls "http://$ip:2380" --initial-cluster "$cluster" \
      --initial-cluster-state new --listen-metrics-urls http://127.0.0.1:2381
  done
  for ns in ${only:-$(cp_namespaces)}; do
    until_ok 60 "etcd in $ns" in_ns "$ns" curl -fsS http://127.0.0.1:2379/health
  done
}

etcd_endpoints() {
  local ns out=""
  for ns in $(cp_namespaces); do out+="${out:+,}http://$(cp_ip "$ns"):2379"; done
  echo "$out"
}

all_nodes_ready() {
  local ready
  ready=$(kubectl_lab get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
  [ "$ready" -ge "$LAB_NODES" ]
}

cmd_up() {
  [ -e "$LAB_DIR" ] && die "$LAB_DIR exists: the lab is up (or was not taken down); run: $0 down"
  check_tools
  local t0=$SECONDS n
  mkdir -p "$LAB_DIR/cp"
  echo "$LAB_NODES" >"$LAB_DIR/nodes"   # so down and status know, whatever the environment says
  echo "$LAB_HA" >"$LAB_DIR/ha"
  log "underlay: switch $SWITCH_NS, host $HOST_LINK $LAB_NET.1/24, namespaces $CP_NS and $LAB_NODES nodes, pod network $LAB_POD_NETWORK"
  underlay_up
  local ipam=true
  case "$LAB_POD_NETWORK" in
    host-gw) ;;
    vxlan) ipam=false; for n in $(nodes); do flannel_node "$n"; done ;;
    *) die "LAB_POD_NETWORK is host-gw or vxlan, not $LAB_POD_NETWORK" ;;
  esac
  local store=(--data-dir "$LAB_DIR/cp/data")
  case "$LAB_STORE" in
    embedded) ;;
    etcd)
      command -v etcd >/dev/null || ensure_packages etcd-server
      start_etcd_members
      store=(--etcd-servers "$(etcd_endpoints)")
      ;;
    *) die "LAB_STORE is embedded or etcd, not $LAB_STORE" ;;
  esac
  echo "$ipam" >"$LAB_DIR/ipam"
  echo "${store[*]}" >"$LAB_DIR/store-flags"
  start_master "$CP_NS"
  if [ "$LAB_HA" = 1 ]; then
    # The second master shares the cluster's CA, signing keys and join token
    # (as kubeadm's "upload-certs" shares them); it issues its own serving certificate.
    until_ok 60 "the first master's PKI" test -s "$PKI/join-token"
    mkdir -p "$LAB_DIR/cp2"
    cp -a "$PKI" "$LAB_DIR/cp2/pki"
    rm -f "$LAB_DIR/cp2/pki/apiserver.crt" "$LAB_DIR/cp2/pki/apiserver.key"
    start_master "$CP2_NS"
  fi
  start_registry
  [ "$LAB_NFS" != 1 ] || start_nfs
  for n in $(nodes); do start_dockerd "$n"; done
  for n in $(nodes); do until_ok 60 "node$n's dockerd" dk "$n" version; done
  load_images
  until_ok 60 "the apiserver at $SERVER" test -s "$PKI/join-token"
  until_ok 60 "the apiserver at $SERVER" curl -fsS --cacert "$PKI/ca.crt" "$SERVER/readyz"
  [ "$LAB_HA" != 1 ] ||
    until_ok 60 "the second apiserver" curl -fsS --cacert "$PKI/ca.crt" "https://$CP2_IP:6443/readyz"
  sed "s|server: https://127.0.0.1:[0-9]*|server: $SERVER|" "$PKI/admin.conf" >"$KUBECONFIG_LAB"
  chmod 600 "$KUBECONFIG_LAB"
  if [ "$LAB_HA" = 1 ]; then
    # The same admin through the second apiserver (kubectl takes one server per cluster).
    sed "s|server: https://127.0.0.1:[0-9]*|server: https://$CP2_IP:6443|" "$PKI/admin.conf" >"$LAB_DIR/admin2.conf"
    chmod 600 "$LAB_DIR/admin2.conf"
  fi
  for n in $(nodes); do start_node_agents "$n"; done
  until_ok 60 "$LAB_NODES Ready nodes" all_nodes_ready
  cat >"$LAB_DIR/env" <<EOF
# source this: the lab's addresses for scripts and tests
LAB_DIR=$LAB_DIR
LAB_NAME=$LAB_NAME
LAB_NODES=$LAB_NODES
LAB_POD_NETWORK=$LAB_POD_NETWORK
LAB_STORE=$LAB_STORE
LAB_HA=$LAB_HA
LAB_SERVER=$SERVER
LAB_NODE_SERVERS=$NODE_SERVERS
LAB_CP_NETNS=/run/netns/$CP_NS
$( [ "$LAB_HA" != 1 ] || printf 'LAB_CP2_NETNS=/run/netns/%s\nLAB_CP2_IP=%s\nLAB_CP3_NETNS=/run/netns/%s\n' "$CP2_NS" "$CP2_IP" "$CP3_NS")
LAB_KUBECONFIG=$KUBECONFIG_LAB
LAB_REGISTRY=$CP_IP:5000
$( [ "$LAB_NFS" != 1 ] || printf 'LAB_NFS_SERVER=%s\nLAB_NFS_EXPORT=%s\n' "$NFS_IP" "$LAB_DIR/nfs/export")
LAB_CLUSTER_DNS=$CLUSTER_DNS
$(for n in $(nodes); do echo "LAB_NODE${n}_NETNS=/run/netns/$(node_ns "$n")"; echo "LAB_NODE${n}_IP=$(node_ip "$n")"; echo "LAB_NODE${n}_DOCKER_HOST=unix://$(node_dir "$n")/docker.sock"; done)
EOF
  log "up in $((SECONDS - t0)) s"
  kubectl_lab get nodes -o wide
  echo "kubectl: $LAB_BIN/kubectl --kubeconfig $KUBECONFIG_LAB   (or: $0 kubectl ...; any kubectl takes that kubeconfig)"
}

cmd_stop_node() {
  local n=${1:?usage: lab.sh stop-node N} d
  d=$(node_dir "$n")
  # As if the machine lost power: the agents die at once, then the pods.
  log "stopping node$n: kubelet, kube-proxy, its containers, dockerd"
  local f ids
  for f in "$d/kubelet.pid" "$d/kube-proxy.pid"; do alive "$f" && kill -KILL "$(cat "$f")"; done
  if alive "$d/dockerd.pid"; then
    ids=$(dk "$n" ps -q)
    [ -z "$ids" ] || dk "$n" kill $ids >/dev/null
  fi
  stop_pids 20 "$d/dockerd.pid"
}

# A stopped node comes back (or a node joins): its dockerd with the lab's
# images, then its kubelet and kube-proxy, which register it again.
cmd_start_node() {
  local n=${1:?usage: lab.sh start-node N}
  alive "$(node_dir "$n")/dockerd.pid" && die "node$n is running"
  log "starting node$n: dockerd, kubelet, kube-proxy"
  start_dockerd "$n"
  until_ok 60 "node$n's dockerd" dk "$n" version
  dk "$n" load -q -i "$LAB_DIR/images.tar" >/dev/null
  start_node_agents "$n"
}

# A fresh VM's PATH: Debian's tools, no Rust toolchain.
MACHINE_PATH=/usr/sbin:/usr/bin:/sbin:/bin
# run_join_script N LOG "ARGS" [VAR=value...]: on machine N, the command
# `scripts/install.sh master` prints, `curl ... join.sh | bash -s - ARGS`,
# with a VM's bare environment (and VARs); its output in LOG.
run_join_script() {
  local n=$1 logfile=$2 args=$3 d ca
  shift 3
  d=$(node_dir "$n") ca=$(base64 -w0 "$PKI/ca.crt")
  in_ns "$(node_ns "$n")" env -i PATH=$MACHINE_PATH HOME="$d" TMPDIR="$d" "$@" bash -c \
    "set -o pipefail; curl -fsSL --cacert <(echo $ca | base64 -d) $SERVER/minik8s/join.sh | bash -s - $args" \
    >"$logfile" 2>&1
}

# A new machine joins the running lab as a lab VM joins a class cluster:
# its namespace on the switch and its dockerd with the lab's images (what
# `apt-get install docker.io` and scripts/images.sh give a VM), then the one
# command `scripts/install.sh master` prints, run with no Rust toolchain on
# PATH: the master's join script, which checks the CA through the token,
# fetches and checks the node bundle, and installs it below nodeN/root (a
# VM's /). The installed kubelet and kube-proxy are then started from their
# installed units and env file, as systemd would (paths below the root; the
# node's docker socket and state directories are the lab's).
cmd_join() {
  local n=${1:?usage: lab.sh join N} d ip root
  [ "$n" = $((LAB_NODES + 1)) ] || die "join: the next machine is node$((LAB_NODES + 1)), not node$n"
  [ "$(cat "$LAB_DIR/ipam" 2>/dev/null)" = true ] ||
    die "join: the vxlan lab's subnets are set up at up (flannel's part), not for a new machine"
  d=$(node_dir "$n") ip=$(node_ip "$n") root=$(node_dir "$n")/root
  log "node$n ($ip) joins: a new machine, dockerd, then the master's join script"
  node_underlay "$n"
  echo "$n" >"$LAB_DIR/nodes"
  LAB_NODES=$n
  start_dockerd "$n"
  until_ok 60 "node$n's dockerd" dk "$n" version
  dk "$n" load -q -i "$LAB_DIR/images.tar" >/dev/null
  env -i PATH=$MACHINE_PATH bash -c 'command -v cargo || command -v rustc' >/dev/null &&
    die "join: a Rust toolchain is on $MACHINE_PATH: the new machine must not have one"
  run_join_script "$n" "$d/join.log" "worker --token $(cat "$PKI/join-token") --node-ip $ip --node-name node$n --root $root" ||
    die "node$n did not join: $(tail -n 5 "$d/join.log")"
  log "node$n: installed below $root (the join's output: $d/join.log)"
  run_installed_unit "$n" kubelet
  until_ok 60 "node$n to get its certificates (see $d/kubelet.log)" test -s "$root/etc/minik8s/kube-proxy.conf"
  run_installed_unit "$n" kube-proxy
  until_ok 60 "node$n Ready" node_ready "node$n"
  log "node$n joined"
}

# run_installed_unit N kubelet|kube-proxy: the unit's ExecStart as systemd runs
# it, with the env file install.sh wrote, from node N's root.
run_installed_unit() {
  local n=$1 unit=$2 d root exec_start
  d=$(node_dir "$n") root=$(node_dir "$n")/root
  exec_start=$(sed -n 's/^ExecStart=//p' "$root/etc/systemd/system/minik8s-$unit.service")
  local from=/usr/local/bin to=$root/usr/local/bin
  exec_start=${exec_start//"$from"/"$to"}
  spawn "$d/$unit.pid" "$d/$unit.log" "$(node_ns "$n")" bash -c "set -a; . '$root/etc/minik8s/minik8s.env'; set +a
    KUBELET_KUBECONFIG=$root\$KUBELET_KUBECONFIG KUBE_PROXY_KUBECONFIG=$root\$KUBE_PROXY_KUBECONFIG
    KUBELET_ARGS='--docker-socket unix://$d/docker.sock --root-dir $d/kubelet --flannel-subnet-env $d/subnet.env $LAB_KUBELET_ARGS'
    KUBE_PROXY_ARGS='--ingress-address $(node_ip "$n")'
    exec $exec_start"
}

# The master machine's upgrade, as `scripts/install.sh upgrade` does it on a
# master VM: the new binaries (DIR: master and the node binaries it serves)
# installed over the old ones, the master restarted, /readyz waited for; the
# node bundle's scripts from FILES (default this checkout).
cmd_upgrade_master() {
  local from=${1:?usage: lab.sh upgrade-master BIN_DIR [FILES_DIR]} files=${2:-$ROOT} d b
  [ "$LAB_HA" = 1 ] && die "upgrade-master: the single-master lab only"
  d=$(cp_dir "$CP_NS")
  for b in master kubelet kube-proxy kubectl nfs-fuse; do
    [ -x "$from/$b" ] || die "upgrade-master: no $b in $from"
  done
  log "upgrading the master to $("$from/master" --version | awk '{print $NF}')"
  for b in master kubelet kube-proxy kubectl nfs-fuse; do install -m 0755 "$from/$b" "$d/bin/$b"; done
  echo "$files" >"$LAB_DIR/bundle-files"
  stop_pids 30 "$d/master.pid"
  start_master "$CP_NS"
  until_ok 60 "the upgraded apiserver at $SERVER" curl -fsS --cacert "$PKI/ca.crt" "$SERVER/readyz"
  log "master upgraded"
}

# A joined machine upgrades with the command doc/deploy.md gives (the
# master's join script, `upgrade`): its node drained, the master's bundle
# installed below nodeN/root, its units restarted, uncordoned. The machine's
# systemctl is `lab.sh systemctl N` (no systemd in a namespace).
cmd_upgrade() {
  local n=${1:?usage: lab.sh upgrade N} d root
  d=$(node_dir "$n") root=$(node_dir "$n")/root
  [ -s "$root/etc/minik8s/minik8s.env" ] || die "upgrade: node$n was not joined with lab.sh join"
  cat >"$d/systemctl" <<EOF
#!/bin/sh
# systemctl of lab machine node$n: the lab runs its units.
LAB_DIR='$LAB_DIR' LAB_NAME='$LAB_NAME' LAB_NET='$LAB_NET' LAB_BIN='$LAB_BIN' LAB_NFS='$LAB_NFS' LAB_KUBELET_ARGS='$LAB_KUBELET_ARGS' exec bash '$ROOT/scripts/lab.sh' systemctl $n "\$@"
EOF
  chmod +x "$d/systemctl"
  log "node$n upgrades: the master's join script, upgrade"
  run_join_script "$n" "$d/upgrade.log" "upgrade --root $root" MINIK8S_SYSTEMCTL="$d/systemctl" ||
    die "node$n did not upgrade: $(tail -n 5 "$d/upgrade.log")"
  log "node$n upgraded (the output: $d/upgrade.log)"
}

# lab.sh systemctl N daemon-reload | restart UNIT...: what install.sh asks of
# systemd on lab machine N.
cmd_systemctl() {
  local n=${1:?usage: lab.sh systemctl N VERB UNIT...} verb=${2:?verb} u d
  shift 2
  d=$(node_dir "$n")
  case $verb in
    daemon-reload) ;;
    restart)
      for u in "$@"; do
        case $u in minik8s-kubelet | minik8s-kube-proxy) ;; *) die "systemctl: node$n has no unit $u" ;; esac
        stop_pids 30 "$d/${u#minik8s-}.pid"
        run_installed_unit "$n" "${u#minik8s-}"
      done ;;
    *) die "systemctl: the lab knows daemon-reload and restart, not $verb" ;;
  esac
}

node_ready() {
  kubectl_lab get node "$1" --no-headers 2>/dev/null | awk '$2 == "Ready" {ok = 1} END {exit !ok}'
}

# Processes started for the lab that a crash may have left behind: whatever
# names the lab's directory on its command line (dockerd, containerd, shims).
leftover_pids() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "$LAB_DIR/" && echo "${p#/proc/}"
  done
  return 0
}

lab_cgroups() {
  find /sys/fs/cgroup -maxdepth 2 -type d -name "$LAB_NAME-node*" 2>/dev/null
}

cmd_down() {
  [ "$(id -u)" = 0 ] || die "the lab needs root"
  local t0=$SECONDS n d pids
  if [ -d "$LAB_DIR" ]; then
    for n in $(nodes); do
      d=$(node_dir "$n")
      stop_pids 5 "$d/kubelet.pid" "$d/kube-proxy.pid"
    done
    stop_pids 10 "$LAB_DIR/cp/master.pid" "$LAB_DIR/cp2/master.pid" \
      "$LAB_DIR"/cp/{apiserver,scheduler,controller-manager}.pid \
      "$LAB_DIR"/cp2/{apiserver,scheduler,controller-manager}.pid
    stop_pids 10 "$LAB_DIR/cp/etcd.pid" "$LAB_DIR/cp2/etcd.pid" "$LAB_DIR/cp3/etcd.pid"
    stop_pids 10 "$LAB_DIR/cp/registry.pid" "$LAB_DIR/nfs/ganesha.pid" "$LAB_DIR/nfs/rpcbind.pid"
    # Pods first (dockerd would stop them too, but one at a time), then the daemons in parallel.
    for n in $(nodes); do
      if [ -S "$(node_dir "$n")/docker.sock" ] && alive "$(node_dir "$n")/dockerd.pid"; then
        pids=$(dk "$n" ps -aq 2>/dev/null || true)
        [ -z "$pids" ] || dk "$n" rm -f $pids >/dev/null 2>&1 &
      fi
    done
    wait
    local files=()
    for n in $(nodes); do files+=("$(node_dir "$n")/dockerd.pid"); done
    stop_pids 20 "${files[@]}"
    pids=$(leftover_pids)
    [ -z "$pids" ] || { log "killing leftovers: $pids"; kill -KILL $pids 2>/dev/null || true; }
  fi
  # Container processes whose shim died: found through --cgroup-parent.
  local cg
  for cg in $(lab_cgroups); do
    find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  # Mounts dockerd left in the host's mount namespace (only after a crash).
  { grep -F " $LAB_DIR/" /proc/mounts || true; } | awk '{print $2}' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # Deleting the switch's namespace deletes the bridge and every veth pair.
  for ns in "$CP_NS" "$CP2_NS" "$CP3_NS" "$NFS_NS" $(for n in $(nodes); do node_ns "$n"; done) "$SWITCH_NS"; do
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
  done
  # (the kernel destroys a namespace's links in the background)
  ip link del "$HOST_LINK" 2>/dev/null || true
  wait_until 10 "$HOST_LINK to go" not ip link show "$HOST_LINK" || true
  for cg in $(lab_cgroups); do
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if grep -qF " $LAB_DIR/" /proc/mounts; then
    die "mounts are left below $LAB_DIR; not removing it"
  fi
  rm -rf --one-file-system "$LAB_DIR"
  log "down in $((SECONDS - t0)) s"
}

cmd_status() {
  if [ ! -d "$LAB_DIR" ]; then echo "lab: down"; return 0; fi
  local n d c
  [ -f "$LAB_DIR/env" ] && grep -E '^LAB_(NODES|POD_NETWORK|STORE|SERVER)=' "$LAB_DIR/env" && echo
  printf '%-8s %-18s %s\n' WHERE PROCESS STATE
  local cp
  for cp in cp cp2 cp3; do
    for c in etcd master $CP_PROCESSES; do
      [ -f "$LAB_DIR/$cp/$c.pid" ] || continue
      printf '%-8s %-18s %s\n' "$cp" "$c" "$(alive "$LAB_DIR/$cp/$c.pid" && echo running || echo stopped)"
    done
  done
  for n in $(nodes); do
    d=$(node_dir "$n")
    for c in dockerd kubelet kube-proxy; do
      printf '%-8s %-18s %s\n' "node$n" "$c" "$(alive "$d/$c.pid" && echo running || echo stopped)"
    done
  done
  echo
  kubectl_lab get nodes -o wide 2>/dev/null || echo "(the apiserver does not answer)"
}

# A lab that is up knows its own size.
[ "${1:-}" != up ] && [ -f "$LAB_DIR/nodes" ] && LAB_NODES=$(cat "$LAB_DIR/nodes")
if [ "${1:-}" != up ] && [ -f "$LAB_DIR/ha" ]; then
  LAB_HA=$(cat "$LAB_DIR/ha")
  [ "$LAB_HA" = 1 ] && NODE_SERVERS="$SERVER,https://$CP2_IP:6443"
fi
case "${1:-}" in
  up) [ -z "${2:-}" ] || LAB_NODES=$2; cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  stop-node) shift; cmd_stop_node "$@" ;;
  stop-master | stop-etcd | stop-apiserver | stop-scheduler | stop-controller-manager) cmd_stop_cp "${1#stop-}" "${2:-}" ;;
  start-master | start-etcd | start-apiserver | start-scheduler | start-controller-manager) cmd_start_cp "${1#start-}" "${2:-}" ;;
  start-node) shift; cmd_start_node "$@" ;;
  join) shift; cmd_join "$@" ;;
  upgrade) shift; cmd_upgrade "$@" ;;
  upgrade-master) shift; cmd_upgrade_master "$@" ;;
  systemctl) shift; cmd_systemctl "$@" ;;
  kill) shift; cmd_kill_agent "$@" ;;
  partition) cmd_partition "${2:-}" ;;
  heal) cmd_heal "${2:-}" ;;
  start) shift; cmd_start_agent "$@" ;;
  kubectl) shift; kubectl_lab "$@" ;;
  exec)
    n=${2:?usage: lab.sh exec N|cp CMD...}; shift 2
    if [ "$n" = cp ]; then in_ns "$CP_NS" "$@"; else in_ns "$(node_ns "$n")" "$@"; fi ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
