//! `kube-proxy`: Service virtual IPs on this node (see the crate docs).
use anyhow::Context;
use clap::Parser;
use kube_proxy::dns;
use kube_proxy::proxier::{self, Iptables};
use minik8s_api::meta::parse_duration;

#[derive(Parser)]
#[command(
    name = "kube-proxy",
    version = minik8s_api::release::GIT_VERSION,
    about = "minik8s kube-proxy: Service VIPs and NodePorts"
)]
struct Args {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// iptables, ipvs, or empty for the best the kernel supports.
    #[arg(long, default_value = "")]
    proxy_mode: String,
    /// The pod network; traffic to a VIP from outside it is masqueraded.
    #[arg(long, default_value = "10.244.0.0/16")]
    cluster_cidr: String,
    /// Changes arriving within this window are applied in one sync.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    iptables_min_sync_period: std::time::Duration,
    /// How often the kernel's rules are read back and repaired.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    iptables_sync_period: std::time::Duration,
    /// Serve the cluster DNS on this IP, port 53 (the kubelets' --cluster-dns).
    /// The address is added to `lo` when the node lacks it, and the
    /// `kube-system/kube-dns` Service reserves it. Empty: no DNS.
    #[arg(long, default_value = "")]
    cluster_dns: String,
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
    /// Servers for names outside the cluster domain (comma-separated);
    /// default: the node's /etc/resolv.conf nameservers, loopback ones excepted.
    #[arg(long, value_delimiter = ',')]
    dns_upstream: Vec<std::net::SocketAddr>,
    /// ipvs mode: the addresses NodePorts listen on (comma-separated);
    /// default: every global IPv4 address of the node.
    #[arg(long, value_delimiter = ',')]
    nodeport_addresses: Vec<std::net::Ipv4Addr>,
    /// The ingress proxy's plain HTTP port on every address of the node
    /// (HTTP/1.1 and h2c); 0: no ingress proxy.
    #[arg(long, default_value_t = 80)]
    ingress_http_port: u16,
    /// The ingress proxy's TLS port (certificates from the Ingresses'
    /// kubernetes.io/tls Secrets, chosen by SNI); 0: no TLS.
    #[arg(long, default_value_t = 443)]
    ingress_https_port: u16,
    /// The IngressClass served (created as the cluster's default if no class is).
    #[arg(long, default_value = "minik8s")]
    ingress_class: String,
    /// The address published in status.loadBalancer of the Ingresses (and so
    /// answered by the cluster DNS for their hosts); default: the source
    /// address of this node's default route.
    #[arg(long)]
    ingress_address: Option<std::net::Ipv4Addr>,
    /// This node's name as its kubelet registered it (the kubelet's
    /// --node-name): endpoints there are the node-local ones of
    /// `internalTrafficPolicy`/`externalTrafficPolicy: Local`. Default: the
    /// host name, lowercased (the kubelet's default too).
    #[arg(long, default_value_t = minik8s_api::net::default_node_name())]
    hostname_override: String,
    /// Where /metrics is served over plain HTTP (Kubernetes' default port;
    /// on every address so Prometheus on the master can scrape it). Empty: none.
    #[arg(long, default_value = "0.0.0.0:10249")]
    metrics_bind_address: String,
    /// Remove kube-proxy's rules (and the --cluster-dns address on lo), then exit.
    #[arg(long)]
    cleanup: bool,
    /// An OTLP/HTTP collector (`host:4318` or a URL) to send this node's
    /// rule syncs to, besides its apiserver's store of recent traces.
    #[arg(long)]
    tracing_endpoint: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let connected = std::sync::Arc::new(std::sync::OnceLock::new());
    let _tracing = minik8s_trace::init(minik8s_trace::Options {
        process: "kube-proxy",
        endpoint: args.tracing_endpoint.clone(),
        store: None,
        to_apiserver: (!args.cleanup)
            .then(|| minik8s_client::traces::to_apiserver(connected.clone())),
    });
    if args.cleanup {
        Iptables::default()
            .cleanup()
            .await
            .context("removing the iptables rules")?;
        if let Ok(ip) = args.cluster_dns.parse::<std::net::Ipv4Addr>() {
            dns::remove_local_address(ip).await?;
        }
        tracing::info!("kube-proxy rules removed");
        return Ok(());
    }
    let client = args.client.connect_limited(kube_proxy::API_RATE_LIMIT)?;
    let _ = connected.set(client.clone());
    minik8s_client::skew::require_supported(
        &client,
        "kube-proxy",
        minik8s_api::release::GIT_VERSION,
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let metrics = kube_proxy::metrics::SyncMetrics::default();
    if !args.metrics_bind_address.is_empty() {
        let addr = args.metrics_bind_address.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = minik8s_process::metrics::serve(&addr, move || metrics.render()).await {
                tracing::warn!(error = %e, "no /metrics");
            }
        });
    }
    let mode = kube_proxy::choose_mode(&args.proxy_mode, kube_proxy::kernel_has_ipvs())
        .map_err(anyhow::Error::msg)
        .context("--proxy-mode")?;
    let node_ips = if mode == kube_proxy::Mode::Ipvs && args.nodeport_addresses.is_empty() {
        kube_proxy::ipvs::node_addresses().await?
    } else {
        args.nodeport_addresses
    };
    tracing::info!(?mode, "proxy mode");
    let cfg = proxier::Config {
        mode,
        node_ips,
        node_name: args.hostname_override.clone(),
        served_locally: (!args.cluster_dns.is_empty())
            .then(|| args.cluster_dns.clone())
            .into_iter()
            .collect(),
        cluster_cidr: (!args.cluster_cidr.is_empty()).then_some(args.cluster_cidr),
        min_sync: args.iptables_min_sync_period,
        resync: args.iptables_sync_period,
        iptables: Iptables::default(),
        metrics,
    };
    let dns = if args.cluster_dns.is_empty() {
        None
    } else {
        let ip: std::net::Ipv4Addr = args.cluster_dns.parse().context("--cluster-dns")?;
        dns::ensure_service(&client, ip).await?;
        dns::ensure_local_address(ip).await?;
        let upstreams = if args.dns_upstream.is_empty() {
            let conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            dns::upstreams_from_resolv_conf(&conf)
        } else {
            args.dns_upstream
        };
        Some(dns::Config {
            listen: (ip, 53).into(),
            domain: args.cluster_domain,
            upstreams,
        })
    };
    let ingress = (args.ingress_http_port != 0).then(|| {
        let any = std::net::Ipv4Addr::UNSPECIFIED;
        kube_proxy::ingress::Options {
            class: args.ingress_class,
            address: args
                .ingress_address
                .or_else(minik8s_api::net::default_route_source)
                .map(|ip| ip.to_string()),
            http: (any, args.ingress_http_port).into(),
            https: (args.ingress_https_port != 0).then(|| (any, args.ingress_https_port).into()),
        }
    });
    let parts = kube_proxy::Parts {
        proxy: Some(cfg),
        dns,
        ingress,
    };
    kube_proxy::run(client, parts).await
}
