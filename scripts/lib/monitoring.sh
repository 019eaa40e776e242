# Sourced by scripts/quickstart.sh for --with-monitoring: Debian's Prometheus
# on :9090 and the cluster's service discovery for it (prometheus-sd on
# 127.0.0.1:9091, as the ServiceAccount of examples/monitoring/prometheus-rbac.yaml).
# Prometheus scrapes
#   the apiserver's /metrics (in the master also the scheduler's and the
#     controllers' families)                          role endpoints: default/kubernetes
#   every kubelet's /metrics and /metrics/cadvisor     role node, port 10250 (TLS)
#   every kube-proxy's /metrics                        role node, port 10249
#   pods and Services annotated prometheus.io/scrape: "true"   roles pod and service
# Debian's Prometheus is built without kubernetes_sd_configs (no client-go), so
# the roles come over HTTP SD (http_sd_configs) from prometheus-sd, which gives
# the same __meta_kubernetes_* labels: the relabeling below is what a
# kubernetes_sd_configs setup uses (doc/monitoring.md).

PROMETHEUS_DIR=$DATA_DIR/prometheus
PROMETHEUS_SD=http://127.0.0.1:9091/targets

write_prometheus_config() {
  local auth="authorization: {credentials_file: $PROMETHEUS_DIR/token}"
  cat >"$PROMETHEUS_DIR/prometheus.yml" <<YAML
# Written by scripts/quickstart.sh --with-monitoring (rewritten on every run).
global:
  scrape_interval: 10s
  evaluation_interval: 10s
scrape_configs:
- job_name: apiserver
  scheme: https
  tls_config: {ca_file: $PKI/ca.crt}
  $auth
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=endpoints", refresh_interval: 10s}]
  relabel_configs:
  - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_service_name, __meta_kubernetes_endpoint_port_name]
    action: keep
    regex: default;kubernetes;https
- job_name: kubelet
  scheme: https
  # Kubelets serve with their own certificates (kube-prometheus skips their
  # verification too); who may read is still decided by the apiserver.
  tls_config: {insecure_skip_verify: true}
  $auth
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=node", refresh_interval: 10s}]
  relabel_configs:
  - action: labelmap
    regex: __meta_kubernetes_node_label_(.+)
- job_name: cadvisor
  scheme: https
  metrics_path: /metrics/cadvisor
  tls_config: {insecure_skip_verify: true}
  $auth
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=node", refresh_interval: 10s}]
  relabel_configs:
  - action: labelmap
    regex: __meta_kubernetes_node_label_(.+)
- job_name: kube-proxy
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=node", refresh_interval: 10s}]
  relabel_configs:
  - source_labels: [__meta_kubernetes_node_address_InternalIP]
    target_label: __address__
    replacement: \$1:10249
  - source_labels: [__meta_kubernetes_node_name]
    target_label: node
- job_name: pods
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=pod", refresh_interval: 10s}]
  relabel_configs:
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
    action: keep
    regex: "true"
  - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
    action: replace
    target_label: __metrics_path__
    regex: (.+)
  - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]
    action: replace
    regex: ([^:]+)(?::\d+)?;(\d+)
    replacement: \$1:\$2
    target_label: __address__
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
- job_name: services
  http_sd_configs: [{url: "$PROMETHEUS_SD?role=service", refresh_interval: 10s}]
  relabel_configs:
  - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_scrape]
    action: keep
    regex: "true"
  - source_labels: [__meta_kubernetes_service_annotation_prometheus_io_path]
    action: replace
    target_label: __metrics_path__
    regex: (.+)
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_service_name]
    target_label: service
YAML
}

start_monitoring() {
  ensure_packages prometheus
  # The package's own service (on systemd machines) would hold port 9090 with
  # a configuration that knows nothing of the cluster.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    echo "==> stopping Debian's prometheus service (the quick start runs its own on :9090)"
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  mkdir -p "$PROMETHEUS_DIR/data"
  echo "==> monitoring: examples/monitoring/prometheus-rbac.yaml, a token of monitoring/prometheus"
  $KUBECTL apply -f examples/monitoring/prometheus-rbac.yaml
  # A year's token, written again on every run of the quick start.
  $KUBECTL -n monitoring create token prometheus --duration 8760h >"$PROMETHEUS_DIR/token.new"
  mv "$PROMETHEUS_DIR/token.new" "$PROMETHEUS_DIR/token"
  cat >"$PROMETHEUS_DIR/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: minik8s, cluster: {server: "$SERVER", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: prometheus, user: {tokenFile: "$PROMETHEUS_DIR/token"}}]
contexts: [{name: prometheus, context: {cluster: minik8s, user: prometheus}}]
current-context: prometheus
YAML
  write_prometheus_config
  start prometheus-sd "$BIN/prometheus-sd" --kubeconfig "$PROMETHEUS_DIR/kubeconfig" --listen 127.0.0.1:9091
  if running prometheus; then
    # A running Prometheus reads its configuration and token again.
    kill -HUP "$(cat "$RUN_DIR/prometheus.pid")"
  fi
  start prometheus prometheus --config.file "$PROMETHEUS_DIR/prometheus.yml" \
    --storage.tsdb.path "$PROMETHEUS_DIR/data" --storage.tsdb.retention.time 2d \
    --web.listen-address 0.0.0.0:9090
  wait_until 30 "prometheus-sd (see $LOG_DIR/prometheus-sd.log)" curl -fsS "$PROMETHEUS_SD?role=node"
  wait_until 60 "Prometheus (see $LOG_DIR/prometheus.log)" curl -fsS http://127.0.0.1:9090/-/ready
  echo "==> Prometheus on http://127.0.0.1:9090 (targets: http://127.0.0.1:9090/targets; queries: doc/monitoring.md)"
}
