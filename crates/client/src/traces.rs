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

/// Where the apiserver serves an object's trace context.
pub const CONTEXTS: &str = "/ui/v1/contexts";

/// The trace context the apiserver keeps for the object with this uid
/// (None: it has none, or this process records no traces, or the
/// apiserver could not be asked). The apiserver keeps it, not the object,
/// which reads back exactly as Kubernetes serves it.
pub async fn context_of(client: &Client, uid: &str) -> Option<String> {
    if uid.is_empty() || !tracing::enabled!(target: minik8s_trace::JOURNEY, tracing::Level::DEBUG) {
        return None;
    }
    let path = format!("{CONTEXTS}?uid={uid}");
    let answer = client.get_json(&path).await.ok()?;
    answer["traceparent"].as_str().map(str::to_string)
}

/// [`context_of`] with the answers kept: a pod's or a Deployment's
/// context never changes (an EndpointSlice's does: ask [`context_of`]).
#[derive(Default)]
pub struct Contexts {
    known: std::sync::Mutex<std::collections::HashMap<String, Option<String>>>,
}

/// Answers kept at most (then forgotten all at once: asking again is cheap).
const KEPT: usize = 10_000;

impl Contexts {
    pub async fn of(&self, client: &Client, uid: &str) -> Option<String> {
        if let Some(known) = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
        {
            return known.clone();
        }
        let found = context_of(client, uid).await;
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= KEPT {
            known.clear();
        }
        known.insert(uid.to_string(), found.clone());
        found
    }
}
