# shellcheck shell=bash
# `scripts/install.sh upgrade`: this machine's minik8s to new binaries, as
# kubeadm upgrades a cluster (doc/deploy.md, "Upgrade"): the master first,
# then every node, one at a time:
#
#   master   the new binaries (--bin-dir, else target/release, built) installed,
#            minik8s-master restarted, /readyz waited for;
#   node     drained (kubectl drain: its pods evicted, PodDisruptionBudgets
#            honoured), the new kubelet, kube-proxy, kubectl and nfs-fuse
#            installed, both units restarted, the node waited for Ready at the
#            new version, uncordoned.
#
# A worker takes its new binaries from the master's node bundle (join.sh
# upgrade: the same checks as a join) unless --bin-dir names them. Version skew
# is checked before anything changes: a master moves at most one minor version,
# a kubelet never gets newer than the apiserver. Sourced by install.sh, which
# has parsed the flags (bin_dir, root, drain_force, all_args) and cd'ed to the
# tree it runs from (a checkout, or the node bundle).

die() { echo "upgrade: $*" >&2; exit 1; }

# minor_of v1.37.0+minik8s.2 -> 37
minor_of() { local v=${1#v}; v=${v#*.}; echo "${v%%.*}"; }

# The Node's kubeletVersion, or nothing.
kubelet_version_of() {
  "$@" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["nodeInfo"]["kubeletVersion"])' 2>/dev/null || true
}

# node_ready_at KUBECTL... : the node is Ready and reports $new_version.
node_ready_at() {
  "$@" get node "$NODE_NAME" -o json 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
sys.exit(0 if ready and node["status"]["nodeInfo"]["kubeletVersion"] == sys.argv[1] else 1)' "$new_version"
}

upgrade_master() {
  local b new running
  if [ ! -x "$bin_dir/master" ]; then
    [ "$bin_dir" = target/release ] || die "no master binary in $bin_dir"
    ensure_build_deps
    echo "==> building release binaries"
    cargo_release_binaries
  fi
  new=$("$bin_dir/master" --version 2>/dev/null | awk '{print $NF}') || true
  [ -n "$new" ] || die "$bin_dir/master does not tell its version (master --version): not a minik8s release to upgrade to"
  # This machine's running master (below --root nothing runs).
  running=""
  [ -n "$root" ] || running=$(curl -fsS --max-time 5 http://127.0.0.1:8080/version 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])' 2>/dev/null || true)
  if [ -n "$running" ]; then
    local from to
    from=$(minor_of "$running") to=$(minor_of "$new")
    [ "$to" -ge "$from" ] || die "the master runs $running; $new is older (a downgrade is not supported)"
    [ "$to" -le $((from + 1)) ] || die "the master runs $running; upgrade one minor version at a time, not to $new"
    echo "==> master: $running -> $new"
  fi
  # Its own binaries and what it serves joining and upgrading nodes: the
  # node binaries beside it, and these scripts.
  for b in master kubectl minik8s-add-user minik8s-backup kubelet kube-proxy nfs-fuse; do
    if [ -x "$bin_dir/$b" ]; then install -m 0755 "$bin_dir/$b" "$root/usr/local/bin/$b"; fi
  done
  install_share_files
  install -m 0644 deploy/systemd/minik8s-master.service "$root/etc/systemd/system/"
  [ -n "$root" ] && { echo "==> master binaries installed below $root (nothing restarted)"; return 0; }
  $systemctl daemon-reload
  $systemctl restart minik8s-master
  for _ in $(seq 120); do curl -fsS --max-time 2 http://127.0.0.1:8080/readyz >/dev/null 2>&1 && break; sleep 1; done
  curl -fsS --max-time 2 http://127.0.0.1:8080/readyz >/dev/null 2>&1 ||
    die "the master did not come back (journalctl -u minik8s-master)"
  echo "==> master running $new"
}

upgrade_node() {
  local kc=$1 current b
  local kubectl=("$bin_dir/kubectl" --kubeconfig "$kc")
  [ -s "$kc" ] || die "no kubeconfig at $kc: has this node joined?"
  new_version=$("$bin_dir/kubelet" --version 2>/dev/null | awk '{print $NF}') || true
  [ -n "$new_version" ] || die "$bin_dir/kubelet does not tell its version (kubelet --version): not a minik8s release to upgrade to"
  local server
  server=$("${kubectl[@]}" version 2>/dev/null | sed -n 's/^Server Version: //p') || true
  [ -n "$server" ] || die "the apiserver does not answer ($MINIK8S_SERVER)"
  # The version skew policy: never a kubelet newer than the apiserver.
  [ "$(minor_of "$new_version")" -le "$(minor_of "$server")" ] ||
    die "kubelet $new_version would be newer than the apiserver ($server): upgrade the master first"
  current=$(kubelet_version_of "${kubectl[@]}" get node "$NODE_NAME" -o json)
  local same=true
  for b in kubelet kube-proxy kubectl nfs-fuse; do
    cmp -s "$bin_dir/$b" "$root/usr/local/bin/$b" || same=false
  done
  if [ "$current" = "$new_version" ] && [ "$same" = true ]; then
    echo "==> node $NODE_NAME already runs $new_version: nothing to do"
    return 0
  fi
  echo "==> node $NODE_NAME: ${current:-?} -> $new_version"
  local drain=(drain "$NODE_NAME" --ignore-daemonsets --delete-emptydir-data --timeout 10m)
  [ "$drain_force" = true ] && drain+=(--force)
  "${kubectl[@]}" "${drain[@]}" ||
    die "draining $NODE_NAME failed (above): it stays cordoned and unchanged; fix that and run again, or: kubectl uncordon $NODE_NAME"
  for b in kubelet kube-proxy kubectl nfs-fuse; do
    install -m 0755 "$bin_dir/$b" "$root/usr/local/bin/$b"
  done
  install -m 0644 deploy/systemd/minik8s-kubelet.service deploy/systemd/minik8s-kube-proxy.service "$root/etc/systemd/system/"
  $systemctl daemon-reload
  $systemctl restart minik8s-kubelet minik8s-kube-proxy
  local ok=false
  for _ in $(seq 120); do node_ready_at "${kubectl[@]}" && { ok=true; break; }; sleep 1; done
  [ "$ok" = true ] ||
    die "$NODE_NAME is not Ready at $new_version after 2 minutes: it stays cordoned (journalctl -u minik8s-kubelet)"
  "${kubectl[@]}" uncordon "$NODE_NAME"
  echo "==> node $NODE_NAME upgraded to $new_version"
}

upgrade_main() {
  local etc=$root/etc/systemd/system has_master=false has_node=false
  [ -e "$etc/minik8s-master.service" ] && has_master=true
  [ -e "$etc/minik8s-kubelet.service" ] && has_node=true
  [ "$has_master" = true ] || [ "$has_node" = true ] ||
    die "minik8s is not installed here (no units in $etc): install.sh master|worker|all first"
  local env_file=$root/etc/minik8s/minik8s.env
  [ -s "$env_file" ] || die "no $env_file"
  set -a
  # shellcheck disable=SC1090
  . "$env_file"
  set +a
  systemctl=${MINIK8S_SYSTEMCTL:-systemctl}
  if [ "$has_master" = false ] && [ ! -x "$bin_dir/kubelet" ] && [ "$bin_dir" = target/release ]; then
    # A worker builds nothing: the master's bundle, checked as at the join.
    local token=$JOIN_TOKEN
    [ -f "$root$token" ] && token=$(cat "$root$token")
    echo "==> no binaries in $bin_dir: upgrading from the master's node bundle"
    exec bash scripts/join.sh upgrade --server "${MINIK8S_SERVER%%,*}" --token "$token" "${all_args[@]}"
  fi
  [ -z "$root" ] && [ "$(id -u)" != 0 ] && die "run as root"
  [ "$has_master" = true ] && upgrade_master
  if [ "$has_node" = true ]; then
    # A master's own node drains with the admin's credentials, a worker with its kubelet's.
    local kc=$root$KUBELET_KUBECONFIG
    [ "$has_master" = true ] && kc=$root${PKI_DIR:-/var/lib/minik8s/pki}/admin.conf
    upgrade_node "$kc"
  fi
}
