//! A node component's spans to its apiserver (`POST /ui/v1/traces`, the
//! master's store of recent traces), with the component's own credentials.

use crate::Client;
use std::sync::{Arc, OnceLock};

/// The path the apiserver takes OTLP/HTTP trace exports at.
pub const PATH: &str = "/ui/v1/traces";

/// A [`minik8s_trace::Post`] through `client` once it is set (the
/// tracing starts before the process has its client).
pub fn to_apiserver(client: Arc<OnceLock<Client>>) -> minik8s_trace::Post {
    Arc::new(move |body| {
        let client = client.get().cloned();
        Box::pin(async move {
            let Some(client) = client else {
                return Err("not connected to the apiserver yet".to_string());
            };
            let body = Some(("application/x-protobuf", body.to_vec()));
            client
                .send(reqwest::Method::POST, PATH, body, "application/x-protobuf")
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    })
}
