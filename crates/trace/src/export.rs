//! OTLP over HTTP (protobuf), sent by our own HTTP client: the SDK's batch
//! processor runs on a thread of its own, so each send is handed to the
//! process's tokio runtime (reqwest needs one) and awaited from there.
//!
//! One process can speak for several components (the master is the
//! apiserver, the scheduler and the controller manager): [`ComponentExporter`]
//! sends each component's spans under its own `service.name`, so a
//! collector (or Jaeger) shows three services, as it would for Kubernetes.

use crate::store::component_of_span;
use bytes::Bytes;
use futures::future::BoxFuture;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Sends an OTLP body somewhere the caller knows how to reach (the kubelet:
/// its apiserver, with its own credentials); Err with why not.
pub type Post = Arc<dyn Fn(Bytes) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// How a batch leaves the process.
#[derive(Clone)]
pub enum Transport {
    /// A plain POST to the collector's URL.
    Http(reqwest::Client),
    /// Through a caller's [`Post`].
    Post(Post),
}

/// [`Transport`] on a runtime, as the SDK's [`HttpClient`].
#[derive(Clone)]
pub struct Sender {
    transport: Transport,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sender")
    }
}

impl Sender {
    pub fn new(transport: Transport, runtime: tokio::runtime::Handle) -> Sender {
        Sender { transport, runtime }
    }
}

#[async_trait::async_trait]
impl HttpClient for Sender {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let transport = self.transport.clone();
        let sent = self.runtime.spawn(async move {
            match transport {
                Transport::Post(post) => post(request.into_body()).await.map(|()| 200u16),
                Transport::Http(client) => {
                    let (parts, body) = request.into_parts();
                    let mut req = client.post(parts.uri.to_string()).body(body);
                    for (k, v) in &parts.headers {
                        req = req.header(k.as_str(), v.as_bytes());
                    }
                    match req.send().await {
                        Ok(resp) => Ok(resp.status().as_u16()),
                        Err(e) => Err(e.to_string()),
                    }
                }
            }
        });
        let status = sent.await.map_err(|e| Box::new(e) as HttpError)?;
        let status = status.map_err(HttpError::from)?;
        Ok(Response::builder()
            .status(status)
            .body(Bytes::new())
            .map_err(|e| Box::new(e) as HttpError)?)
    }
}

/// The collector's URL for traces: `http://host:4318` gets OTLP's
/// `/v1/traces`; a URL with a path is taken as it is.
pub fn traces_url(endpoint: &str) -> String {
    let with_scheme = if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("http://{endpoint}")
    };
    let after_scheme = with_scheme.split_once("://").map_or("", |(_, r)| r);
    match after_scheme.find('/') {
        Some(i) if after_scheme.len() > i + 1 => with_scheme,
        _ => format!("{}/v1/traces", with_scheme.trim_end_matches('/')),
    }
}

/// Sends each component's spans under its own `service.name`.
#[derive(Debug)]
pub struct ComponentExporter {
    url: String,
    sender: Sender,
    /// The process's own name, for spans of no known component.
    process: &'static str,
    by_component: Mutex<HashMap<String, Arc<opentelemetry_otlp::SpanExporter>>>,
}

impl ComponentExporter {
    pub fn new(url: String, sender: Sender, process: &'static str) -> ComponentExporter {
        ComponentExporter {
            url,
            sender,
            process,
            by_component: Mutex::new(HashMap::new()),
        }
    }

    fn exporter(
        &self,
        component: &str,
    ) -> Result<Arc<opentelemetry_otlp::SpanExporter>, OTelSdkError> {
        let mut map = self.by_component.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get(component) {
            return Ok(e.clone());
        }
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(self.sender.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(self.url.clone())
            .build()
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(component.to_string())
                .build(),
        );
        let exporter = Arc::new(exporter);
        map.insert(component.to_string(), exporter.clone());
        Ok(exporter)
    }
}

impl SpanExporter for ComponentExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut groups: HashMap<String, Vec<SpanData>> = HashMap::new();
        for span in batch {
            groups
                .entry(component_of_span(&span.attributes, self.process))
                .or_default()
                .push(span);
        }
        let mut failed = None;
        for (component, spans) in groups {
            let exporter = self.exporter(&component)?;
            if let Err(e) = exporter.export(spans).await {
                failed = Some(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_without_a_path_gets_otlps() {
        assert_eq!(
            traces_url("127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://jaeger:4318/"),
            "http://jaeger:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://c.example/otlp/v1/traces"),
            "https://c.example/otlp/v1/traces"
        );
    }
}
