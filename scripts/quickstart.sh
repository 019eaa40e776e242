#!/usr/bin/env bash
# README command one: sets up and runs a single-node minik8s with an example workload.
#
#   scripts/quickstart.sh        install what is missing, build, start dockerd (if none runs),
#                                master (apiserver + scheduler + controller manager, embedded
#                                store), a kubelet and kube-proxy (Service VIPs on iptables,
#                                cluster DNS on 10.96.0.10), an image registry on :5000 (the
#                                mirror for Docker Hub names), build the local images (busybox,
#                                nginx, python) and push them under the names tutorials use, run
#                                examples/hello-pod.yaml, examples/web.yaml (a ReplicaSet) and
#                                examples/ingress.yaml (host and paths on kube-proxy's port 80), and
#                                calls the Function of examples/function.yaml through the
#                                serverless gateway on :8090 (scaled from zero for the call),
#                                with our kubectl's invoke, and runs examples/workflow.yaml
#   scripts/quickstart.sh --with-monitoring   the same, and Prometheus on :9090 discovering the
#                                cluster through the API (scripts/lib/monitoring.sh, doc/monitoring.md)
#   scripts/quickstart.sh down   stop everything it started, remove the pods' containers and
#                                kube-proxy's rules (the store in /var/lib/minik8s is kept)
#
# Running it twice is harmless: what runs is reused. The apiserver serves TLS on :6443 (client
# certificates, tokens, RBAC) and plain HTTP on 127.0.0.1:8080 for this machine only. The admin
# kubeconfig (/var/lib/minik8s/pki/admin.conf) is installed as ~/.kube/config unless you have one.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

ACTION=up
WITH_MONITORING=0
for arg in "$@"; do
  case $arg in
    up | down) ACTION=$arg ;;
    --with-monitoring) WITH_MONITORING=1 ;;
    *) echo "usage: scripts/quickstart.sh [up|down] [--with-monitoring]" >&2; exit 2 ;;
  esac
done

RUN_DIR=${MINIK8S_RUN_DIR:-/run/minik8s}
DATA_DIR=${MINIK8S_DATA_DIR:-/var/lib/minik8s}
KUBELET_DIR=${MINIK8S_KUBELET_DIR:-/var/lib/minik8s-kubelet}
LOG_DIR=${MINIK8S_LOG_DIR:-/var/log/minik8s}
REGISTRY_DIR=${MINIK8S_REGISTRY_DIR:-/var/lib/minik8s-registry}
SERVER=https://127.0.0.1:6443
PKI=$DATA_DIR/pki
CLUSTER_DNS=10.96.0.10
BIN=$PWD/target/release
KUBECTL="$BIN/kubectl --kubeconfig $PKI/admin.conf"

running() { [ -f "$RUN_DIR/$1.pid" ] && kill -0 "$(cat "$RUN_DIR/$1.pid")" 2>/dev/null; }

# start NAME CMD...: runs CMD in the background unless NAME already runs.
start() {
  local name=$1; shift
  if running "$name"; then
    echo "==> $name already running (pid $(cat "$RUN_DIR/$name.pid"))"
    return
  fi
  echo "==> starting $name (log $LOG_DIR/$name.log)"
  nohup "$@" >>"$LOG_DIR/$name.log" 2>&1 &
  echo $! >"$RUN_DIR/$name.pid"
}

stop() {
  if running "$1"; then
    echo "==> stopping $1"
    kill "$(cat "$RUN_DIR/$1.pid")"
    for _ in $(seq 100); do running "$1" || break; sleep 0.1; done
    running "$1" && kill -9 "$(cat "$RUN_DIR/$1.pid")"
  fi
  rm -f "$RUN_DIR/$1.pid"
}


if [ "$ACTION" = "down" ]; then
  stop prometheus
  stop prometheus-sd
  stop kube-proxy
  [ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup --cluster-dns "$CLUSTER_DNS" >/dev/null 2>&1 || true
  stop kubelet
  if docker info >/dev/null 2>&1; then
    ids=$(docker ps -aq --filter label=io.minik8s.pod.uid)
    [ -z "$ids" ] || { echo "==> removing pod containers"; docker rm -f $ids >/dev/null; }
    # The kubelet's pod network (its bridge would otherwise outlive dockerd).
    docker network rm minik8s >/dev/null 2>&1 || true
  fi
  stop master
  stop dockerd
  stop registry
  exit 0
fi

ensure_build_deps
ensure_packages docker.io docker-registry busybox-static iptables curl python3
mkdir -p "$RUN_DIR" "$DATA_DIR" "$KUBELET_DIR" "$LOG_DIR" "$REGISTRY_DIR"

# The image registry (Debian's docker-registry): dockerd's mirror for Docker
# Hub names, so manifests that say `image: nginx:1.25` or `busybox` run
# offline; `docker push 127.0.0.1:5000/library/NAME:TAG` adds more.
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 0.0.0.0:5000\n' \
  "$REGISTRY_DIR" >"$RUN_DIR/registry.yml"
start registry docker-registry serve "$RUN_DIR/registry.yml"
wait_until 30 "the registry" curl -fsS http://127.0.0.1:5000/v2/
if docker info >/dev/null 2>&1; then
  echo "==> using the running dockerd (Docker Hub names come from local tags; for its pulls to use"
  echo "    the registry, add \"registry-mirrors\": [\"http://127.0.0.1:5000\"] to /etc/docker/daemon.json)"
else
  start dockerd dockerd --registry-mirror http://127.0.0.1:5000
  wait_until 60 dockerd docker info
fi
MINIK8S_REGISTRY=127.0.0.1:5000 bash scripts/images.sh --all

echo "==> building release binaries (first time: several minutes)"
cargo_release_binaries

start master "$BIN/master" --data-dir "$DATA_DIR"
wait_until 60 "the apiserver" curl -fsS --cacert "$PKI/ca.crt" "$SERVER/readyz"
# The admin's kubeconfig, so `kubectl get pods` works as is (an existing one of yours is kept).
if [ ! -e ~/.kube/config ] || grep -q 'kubernetes-admin@minik8s' ~/.kube/config; then
  mkdir -p ~/.kube && install -m 0600 "$PKI/admin.conf" ~/.kube/config
  echo "==> wrote ~/.kube/config (the cluster admin, a client certificate)"
else
  echo "==> ~/.kube/config is yours and kept: use KUBECONFIG=$PKI/admin.conf"
fi
# The node joins like any worker: with the join token it gets its own
# certificate (system:node:NAME) and kube-proxy's. Credentials from an older
# cluster (another CA) are dropped first.
ca_data=$(base64 -w0 "$PKI/ca.crt")
for conf in "$KUBELET_DIR/kubelet.conf" "$KUBELET_DIR/kube-proxy.conf"; do
  [ -e "$conf" ] && ! grep -q "$ca_data" "$conf" && ! running kubelet && rm -f "$conf"
done
# The node also publishes four make-believe GPUs (Dynamic Resource Allocation,
# doc/dra.md).
start kubelet "$BIN/kubelet" --server "$SERVER" --bootstrap-token "$PKI/join-token" \
  --kubeconfig "$KUBELET_DIR/kubelet.conf" --kube-proxy-kubeconfig "$KUBELET_DIR/kube-proxy.conf" \
  --node-name "$(hostname | tr 'A-Z' 'a-z')" \
  --root-dir "$KUBELET_DIR" --cluster-dns "$CLUSTER_DNS" --fake-gpus 4
wait_until 60 "the node to join (see $LOG_DIR/kubelet.log)" test -s "$KUBELET_DIR/kube-proxy.conf"
start kube-proxy "$BIN/kube-proxy" --kubeconfig "$KUBELET_DIR/kube-proxy.conf" --cluster-dns "$CLUSTER_DNS" \
  --hostname-override "$(hostname | tr 'A-Z' 'a-z')"
wait_until 60 "the node to register" $KUBECTL get node "$(hostname | tr 'A-Z' 'a-z')"

# The hello pod sleeps an hour, then completes. A pod left completed by an
# earlier run would never run again under `apply`, so it starts afresh.
if $KUBECTL get pod hello -o json 2>/dev/null | grep -Eq '"phase": "(Succeeded|Failed)"'; then
  echo "==> pod hello finished in an earlier run; starting it again"
  $KUBECTL delete pod hello
  gone() { ! $KUBECTL get pod hello >/dev/null 2>&1; }
  wait_until 60 "the finished pod hello to go" gone
fi
echo "==> applying examples/hello-pod.yaml, examples/web.yaml, examples/ingress.yaml and examples/function.yaml"
$KUBECTL apply -f examples/hello-pod.yaml -f examples/web.yaml -f examples/ingress.yaml -f examples/function.yaml
# A second run finds the pods in the store with the status of the first one,
# so the containers themselves are waited for too.
containers() { docker ps -q --filter "label=io.minik8s.container.name=$1" | wc -l; }
running_pod() { $KUBECTL get pod hello -o json | grep -q '"phase": "Running"' && [ "$(containers hello)" -ge 1 ]; }
wait_until 120 "pod hello to run" running_pod
web_ready() { $KUBECTL get rs web -o json | grep -q '"readyReplicas": 3' && [ "$(containers httpd)" -ge 3 ]; }
wait_until 120 "the 3 web pods to be ready" web_ready
wait_until 30 "the logs of pod hello" $KUBECTL logs hello
echo
$KUBECTL get pods -o wide
echo
$KUBECTL get rs,svc
echo
$KUBECTL logs hello
echo
# The Service's VIP, through kube-proxy's rules, by name through the cluster DNS
# (a kube-proxy that has just started may need a moment for its first sync).
echo "==> from the pod hello, the Service web by name: wget http://web/"
hello_container=$(docker ps -q --filter label=io.minik8s.pod.name=hello --filter label=io.minik8s.container.name=hello | head -1)
web_by_name() { docker exec "$hello_container" sh -c 'timeout 3 wget -qO- http://web/'; }
# The answer printed is the one that came (a second request right after a
# restart may meet a web container that is not listening yet).
web_answer() { web_out=$(web_by_name); }
wait_until 60 "the web Service to answer by name from pod hello (see $LOG_DIR/kube-proxy.log)" web_answer
echo "$web_out"
echo
# The Ingress: its host name is answered by the cluster DNS with the address
# kube-proxy published in its status; kube-proxy's ingress proxy listens on
# port 80 and picks the Service by host and path.
echo "==> from the pod hello, the Ingress hello-world by its host: wget http://hello.world.minik8s/world"
pages_ready() { for d in hello-page world-page; do $KUBECTL get deploy $d -o json | grep -q '"readyReplicas": 2' || return 1; done; }
wait_until 120 "the Deployments hello-page and world-page to be ready" pages_ready
world_by_host() { docker exec "$hello_container" sh -c 'timeout 3 wget -qO- http://hello.world.minik8s/world'; }
wait_until 60 "the Ingress host to answer from pod hello (see $LOG_DIR/kube-proxy.log)" world_by_host
world_by_host
echo "==> from this machine, as if hello.world.minik8s were in /etc/hosts: curl --resolve hello.world.minik8s:80:127.0.0.1 http://hello.world.minik8s/"
curl -sS --max-time 5 --resolve hello.world.minik8s:80:127.0.0.1 http://hello.world.minik8s/
echo
$KUBECTL get ingress
echo
# A Function at zero instances: the gateway holds the call while one starts.
echo "==> the Function hello (examples/function.yaml) through the serverless gateway: curl -s -d '{\"name\": \"minik8s\"}' http://127.0.0.1:8090/function/default/hello"
call_function() { curl -sf --max-time 70 -d '{"name": "minik8s"}' http://127.0.0.1:8090/function/default/hello; }
wait_until 90 "the Function hello to answer (see $LOG_DIR/master.log)" call_function
call_function
echo
$KUBECTL get functions
echo
# Inside the cluster the gateway is a Service (and the Ingress host functions.minik8s).
echo "==> from pod hello: wget -qO- --post-data '{\"name\": \"a pod\"}' http://serverless-gateway.kube-system.svc.cluster.local/function/default/hello"
fn_by_service() { docker exec "$hello_container" sh -c 'timeout 5 wget -qO- --post-data "{\"name\": \"a pod\"}" http://serverless-gateway.kube-system.svc.cluster.local/function/default/hello'; }
wait_until 60 "the gateway's Service to answer from pod hello" fn_by_service
fn_by_service
echo
echo "==> from pod hello by the Ingress host: wget -qO- http://functions.minik8s/function/default/hello"
fn_by_host() { docker exec "$hello_container" sh -c 'timeout 5 wget -qO- http://functions.minik8s/function/default/hello'; }
wait_until 60 "the Ingress host functions.minik8s to answer from pod hello" fn_by_host
fn_by_host
echo
echo "==> our kubectl calls it too: kubectl invoke hello --data '{\"name\": \"kubectl\"}'"
$KUBECTL invoke hello --data '{"name": "kubectl"}'
echo
# A Workflow: each step calls a function through the gateway, the run's status follows it.
echo "==> examples/workflow.yaml: the Workflow grade and its run grade-90 (score 90 takes the left branch)"
$KUBECTL apply -f examples/workflow.yaml
run_phase() { $KUBECTL get workflowrun grade-90 -o json | python3 -c 'import json, sys; print(json.load(sys.stdin).get("status", {}).get("phase", ""))'; }
run_done() { case "$(run_phase)" in Succeeded|Failed) return 0 ;; *) return 1 ;; esac; }
wait_until 120 "the WorkflowRun grade-90 to end (see $LOG_DIR/master.log)" run_done
$KUBECTL get workflowruns
echo -n "output: "
$KUBECTL get workflowrun grade-90 -o json | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["status"]["output"]))'
echo
if [ "$WITH_MONITORING" = 1 ]; then
  . scripts/lib/monitoring.sh
  start_monitoring
fi
echo "The web view of the loops (nodes, pods, each object's journey): http://127.0.0.1:8080/ui/ on this machine,"
echo "  or https://<this machine>:6443/ui/ signed in with: kubectl create --raw /ui/session -f /dev/null (open its loginPath). See doc/web-view.md."
echo "minik8s is up. Try: kubectl get pods   (the real kubectl, or target/release/kubectl; the admin kubeconfig is $PKI/admin.conf)"
echo "Stop it with: scripts/quickstart.sh down"
