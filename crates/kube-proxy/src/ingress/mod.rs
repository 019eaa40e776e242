//! The built-in ingress proxy: Ingresses of the `minik8s` class
//! (networking.k8s.io/v1) served by every node's kube-proxy, straight to the
//! ready endpoints of their Services.
//!
//! ```text
//!   Ingress, IngressClass, Service, EndpointSlice, Secret (informers)
//!        │ any change (debounced)
//!        ▼
//!   sync.rs: routes::Table::build + endpoints::resolve + TLS keys ──▶ proxy.set(Config)
//!                                                   └──▶ events (missing Service/port), status.loadBalancer
//!   proxy.rs: accept ─▶ route(host, path) ─▶ endpoint (round robin, next on connect failure) ─▶ forward
//! ```
//!
//! `routes.rs` (matching) and `endpoints.rs` (resolution) are pure.

pub mod endpoints;
pub mod hosts;
pub mod proxy;
pub mod routes;
pub mod sync;

use anyhow::Context;
use minik8s_client::{Client, SharedInformers};
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// How kube-proxy serves Ingresses on this node (`--ingress-*` flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// The IngressClass served (`minik8s`; created, as the default, if missing).
    pub class: String,
    /// The address published in the Ingresses' `status.loadBalancer` (the node's IP).
    pub address: Option<String>,
    /// Plain HTTP (HTTP/1.1 and h2c), normally port 80 on every address.
    pub http: SocketAddr,
    /// TLS, normally port 443; None: no TLS listener.
    pub https: Option<SocketAddr>,
}

/// The ingress proxy, registered and bound, not yet serving.
pub struct Ingress {
    client: Client,
    class: String,
    sync: sync::Sync,
    http: TcpListener,
    https: Option<TcpListener>,
}

impl Ingress {
    /// Registers on `informers` (before they start) and binds the ports, so a
    /// taken port is an error at start rather than a silent lack of Ingress.
    pub async fn bind(
        client: &Client,
        informers: &SharedInformers,
        opts: &Options,
    ) -> anyhow::Result<Ingress> {
        let http = TcpListener::bind(opts.http)
            .await
            .with_context(|| format!("binding the ingress proxy to {}", opts.http))?;
        let https = match opts.https {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding the ingress proxy's TLS to {addr}"))?,
            ),
            None => None,
        };
        let settings = sync::Settings {
            class: opts.class.clone(),
            address: opts.address.clone(),
        };
        Ok(Ingress {
            client: client.clone(),
            class: opts.class.clone(),
            sync: sync::Sync::new(client.clone(), informers, settings),
            http,
            https,
        })
    }

    /// Serves until the process ends (call after the informers synced).
    pub fn spawn(self) {
        tracing::info!(
            http = %self.http.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            https = ?self.https.as_ref().and_then(|l| l.local_addr().ok()),
            class = %self.class,
            "ingress proxy listening"
        );
        let proxy = self.sync.proxy.clone();
        tokio::spawn(proxy.clone().serve_http(self.http));
        if let Some(l) = self.https {
            tokio::spawn(proxy.serve_https(l));
        }
        let (client, class, sync) = (self.client, self.class, self.sync);
        tokio::spawn(async move {
            sync::ensure_class(&client, &class).await;
            sync.run().await
        });
    }
}
