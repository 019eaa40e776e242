//! Health check node ports: a LoadBalancer Service with
//! `externalTrafficPolicy: Local` has a `healthCheckNodePort`, and every
//! node's kube-proxy answers HTTP on it whether the node holds endpoints of
//! the Service — 200 with the count, or 503 — so an external load balancer
//! sends clients only to nodes that can serve them without a second hop.
//!
//! ```text
//!  LB probe ──GET /──▶ node:healthCheckNodePort ──▶ 200 {"localEndpoints": 2, ...}
//!                                                   503 {"localEndpoints": 0, ...}
//! ```
//!
//! One listener per port, opened and closed as Services come and go
//! ([`HealthChecks::sync`], called with every sync's ports); the answer is
//! the pure [`answer`].

use crate::ServicePort;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The HTTP response for a Service with `local` endpoints on this node, as
/// Kubernetes' service health server writes it.
pub fn answer(namespace: &str, name: &str, local: usize) -> String {
    let body = serde_json::json!({
        "service": {"namespace": namespace, "name": name},
        "localEndpoints": local,
        "serviceProxyHealthy": true,
    })
    .to_string();
    let status = if local > 0 {
        "200 OK"
    } else {
        "503 Service Unavailable"
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: {local}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// What one health check port reports: the Service and its local endpoints.
struct Server {
    service: (String, String),
    local: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// The health check servers of this node.
#[derive(Default)]
pub struct HealthChecks {
    servers: Mutex<HashMap<u16, Server>>,
}

/// Per health check port: the Service and how many endpoints it has here.
pub fn wanted(ports: &[ServicePort]) -> BTreeMap<u16, ((String, String), usize)> {
    let mut out: BTreeMap<u16, ((String, String), HashSet<&str>)> = BTreeMap::new();
    for p in ports {
        let Some(hc) = p.health_check_node_port else {
            continue;
        };
        let entry = out
            .entry(hc)
            .or_insert_with(|| ((p.namespace.clone(), p.service.clone()), HashSet::new()));
        entry
            .1
            .extend(p.local_endpoints.iter().map(|(ip, _)| ip.as_str()));
    }
    out.into_iter()
        .map(|(port, (svc, ips))| (port, (svc, ips.len())))
        .collect()
}

impl HealthChecks {
    /// Opens, updates and closes the listeners to match `ports`.
    pub fn sync(&self, ports: &[ServicePort]) {
        let wanted = wanted(ports);
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers.retain(|port, s| {
            let keep = wanted.get(port).is_some_and(|(svc, _)| *svc == s.service);
            if !keep {
                s.task.abort();
            }
            keep
        });
        for (port, (service, local)) in wanted {
            if let Some(s) = servers.get(&port) {
                s.local.store(local, Ordering::Relaxed);
                continue;
            }
            let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            let listener = match std::net::TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(tokio::net::TcpListener::from_std)
            {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(port, service = %format!("{}/{}", service.0, service.1), error = %e, "health check node port not served");
                    continue;
                }
            };
            let counter = Arc::new(AtomicUsize::new(local));
            let task = tokio::spawn(serve(listener, service.clone(), counter.clone()));
            servers.insert(
                port,
                Server {
                    service,
                    local: counter,
                    task,
                },
            );
        }
    }
}

impl Drop for HealthChecks {
    fn drop(&mut self) {
        let servers = self.servers.get_mut().unwrap_or_else(|p| p.into_inner());
        for s in servers.values() {
            s.task.abort();
        }
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    service: (String, String),
    local: Arc<AtomicUsize>,
) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            // Out of descriptors, say: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let reply = answer(&service.0, &service.1, local.load(Ordering::Relaxed));
        tokio::spawn(async move {
            // Any request gets the answer; the request itself is read and dropped.
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).await;
            let _ = conn.write_all(reply.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_counts_local_endpoints() {
        let ok = answer("shop", "web", 2);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(ok.contains("X-Load-Balancing-Endpoint-Weight: 2\r\n"));
        let body: serde_json::Value =
            serde_json::from_str(ok.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"service": {"namespace": "shop", "name": "web"},
                "localEndpoints": 2, "serviceProxyHealthy": true})
        );
        assert!(answer("shop", "web", 0).starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
    }
}
