#!/usr/bin/env bash
# README command one: sets up and runs a single-node minik8s with an example workload.
#
#   scripts/quickstart.sh        install what is missing, build, start, apply examples/web.yaml
#   scripts/quickstart.sh down   stop what it started (data in /var/lib/minik8s is kept)
#
# Running it twice is harmless: a running apiserver is reused.
# The apiserver listens on 127.0.0.1:8080 (all interfaces, port 8080).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh

RUN_DIR=${MINIK8S_RUN_DIR:-/run/minik8s}
DATA_DIR=${MINIK8S_DATA_DIR:-/var/lib/minik8s}
LOG_DIR=${MINIK8S_LOG_DIR:-/var/log/minik8s}
SERVER=http://127.0.0.1:8080
BIN=target/release

running() { [ -f "$RUN_DIR/$1.pid" ] && kill -0 "$(cat "$RUN_DIR/$1.pid")" 2>/dev/null; }

stop() {
  for c in apiserver; do
    if running "$c"; then
      echo "==> stopping $c"
      kill "$(cat "$RUN_DIR/$c.pid")"
      for _ in $(seq 50); do running "$c" || break; sleep 0.1; done
    fi
    rm -f "$RUN_DIR/$c.pid"
  done
}

if [ "${1:-up}" = "down" ]; then
  stop
  exit 0
fi

ensure_build_deps
echo "==> building release binaries (first time: a few minutes)"
cargo build --release --quiet -p apiserver -p kubectl

mkdir -p "$RUN_DIR" "$DATA_DIR" "$LOG_DIR"
if running apiserver; then
  echo "==> apiserver already running (pid $(cat "$RUN_DIR/apiserver.pid"))"
else
  echo "==> starting apiserver (embedded store in $DATA_DIR, log $LOG_DIR/apiserver.log)"
  nohup "$BIN/apiserver" --listen 0.0.0.0:8080 --data-dir "$DATA_DIR" >>"$LOG_DIR/apiserver.log" 2>&1 &
  echo $! >"$RUN_DIR/apiserver.pid"
fi
for _ in $(seq 100); do
  curl -fsS "$SERVER/readyz" >/dev/null 2>&1 && break
  running apiserver || { echo "apiserver exited; see $LOG_DIR/apiserver.log" >&2; tail -5 "$LOG_DIR/apiserver.log" >&2; exit 1; }
  sleep 0.1
done

echo "==> applying examples/web.yaml"
"$BIN/kubectl" --server "$SERVER" apply -f examples/web.yaml
echo
"$BIN/kubectl" --server "$SERVER" get all -o wide
echo
echo "minik8s is up: kubectl --server $SERVER get all   (or the real kubectl: kubectl -s $SERVER get all)"
echo "Pods are created and run once the controller manager, scheduler and kubelet exist (see doc/)."
