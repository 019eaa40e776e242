//! What a client call can end with, and the retry client-go's callers wrap
//! their read-modify-write cycles in.

use minik8s_api::ApiError;
use std::time::Duration;

/// Errors a client call can end with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a `Status`.
    #[error("{0}")]
    Api(#[from] ApiError),
    /// The server could not be reached.
    #[error("{0}")]
    Connect(String),
    /// The server's answer was not what the client expected.
    #[error("decoding the server's answer: {0}")]
    Decode(String),
}

impl ClientError {
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            ClientError::Api(e) => Some(e),
            _ => None,
        }
    }
    pub fn is_not_found(&self) -> bool {
        self.api().is_some_and(ApiError::is_not_found)
    }
    pub fn is_conflict(&self) -> bool {
        self.api().is_some_and(ApiError::is_conflict)
    }
    pub fn is_gone(&self) -> bool {
        self.api().is_some_and(ApiError::is_gone)
    }
}

/// Runs a read-modify-write `attempt` again while it fails with 409 Conflict,
/// as client-go's `retry.RetryOnConflict` does: the server rejects a write that
/// names an outdated resourceVersion, so the caller reads the object afresh and
/// re-applies its change. Up to 10 attempts, 10 ms apart, growing to 200 ms;
/// the last error is returned.
pub async fn retry_on_conflict<T, F, Fut>(mut attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut delay = Duration::from_millis(10);
    for _ in 1..10 {
        match attempt().await {
            Err(e) if e.is_conflict() => {
                tracing::debug!(error = %e, "conflict; reading again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(200));
            }
            other => return other,
        }
    }
    attempt().await
}
