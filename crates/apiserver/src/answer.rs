//! Re-encoding answers after the handler: into the API version the client
//! asked for (autoscaling/v1 HPAs), and into protobuf for clients that prefer it.

use crate::params::error_response;
use axum::body::Bytes;
use axum::http::header;
use axum::response::Response;
use minik8s_api::ApiError;
use minik8s_wire::versions::AlternateVersion;
use serde_json::Value;

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
}

/// A JSON answer (object, list, or each watch event) in the version the
/// client asked for.
pub async fn convert_answer(
    resp: Response,
    alt: std::sync::Arc<AlternateVersion>,
    streams: bool,
) -> Response {
    if !is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let convert = move |bytes: Bytes| -> Bytes {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => {
                let mut out = serde_json::to_vec(&alt.answer(&v)).unwrap_or_default();
                if bytes.ends_with(b"\n") {
                    out.push(b'\n');
                }
                Bytes::from(out)
            }
            Err(_) => bytes,
        }
    };
    if streams {
        // One watch event per chunk.
        use futures::StreamExt;
        let events = body
            .into_data_stream()
            .map(move |chunk| chunk.map(&convert));
        return Response::from_parts(parts, axum::body::Body::from_stream(events));
    }
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Response::from_parts(parts, axum::body::Body::from(convert(bytes))),
        Err(_) => error_response(&ApiError::internal("reading an answer to convert")),
    }
}

/// A JSON answer re-encoded in protobuf for a client that asked for it
/// first; kinds without a protobuf message (custom resources, LWS) stay
/// JSON, which the client accepts as its second choice.
pub async fn to_protobuf(resp: Response) -> Response {
    if !is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return error_response(&ApiError::internal("reading a response to re-encode"));
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| match minik8s_wire::protobuf::encode_object(&v) {
            Ok(pb) => pb,
            Err(e) => {
                tracing::warn!(error = %e, "answering in JSON: the object does not fit its protobuf message");
                None
            }
        });
    match encoded {
        Some(pb) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(minik8s_wire::protobuf::MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::from(pb))
        }
        None => Response::from_parts(parts, axum::body::Body::from(bytes)),
    }
}
