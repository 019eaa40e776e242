//! How a client behaves under load, as client-go does: a client-side rate
//! limit (QPS with a burst), and retries when the server says "later"
//! (429 or 5xx with `Retry-After`) or cannot be reached, with exponential
//! backoff and jitter so that many clients do not retry in step.
//!
//! ```text
//!  request ─▶ rate limiter (wait for a token) ─▶ send
//!     429 Retry-After: 1  ─▶ wait 1 s + jitter ─▶ send again (up to 10 times)
//!     connection refused  ─▶ wait 100 ms, 200 ms, 400 ms (+ jitter) ─▶ again
//! ```

use rand::Rng;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Retries of a request the server asked to retry (client-go: 10).
pub const MAX_RETRIES: u32 = 10;
/// Retries of a request that could not connect.
pub const CONNECT_RETRIES: u32 = 3;

/// A token bucket: `qps` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(qps: f64, burst: u32) -> RateLimiter {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps: qps.max(0.001),
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token now, or says how long to wait for one (the token is
    /// then already taken: callers queue in order).
    fn reserve(&self, now: Instant) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = *s;
        let tokens = (tokens + now.saturating_duration_since(at).as_secs_f64() * self.qps)
            .min(self.burst)
            - 1.0;
        *s = (tokens, now);
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// How long to wait before retrying an answer with `status` and
/// `Retry-After` value `retry_after`; None: do not retry it.
pub fn retry_after(status: u16, retry_after: Option<&str>) -> Option<Duration> {
    let seconds: u64 = retry_after?.trim().parse().ok()?;
    (status == 429 || (500..600).contains(&status))
        .then(|| Duration::from_secs(seconds.clamp(1, 60)))
}

/// Exponential backoff from 100 ms, capped at 5 s, plus up to 50 % jitter.
pub fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(100) * 2u32.saturating_pow(attempt.min(6));
    with_jitter(base.min(Duration::from_secs(5)))
}

/// `d` plus a random part of up to half of it.
pub fn with_jitter(d: Duration) -> Duration {
    d + d.mul_f64(rand::thread_rng().gen_range(0.0..0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let l = RateLimiter::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.reserve(t0), Duration::ZERO);
        }
        // The 4th and 5th wait 100 ms and 200 ms: they queue behind each other.
        assert_eq!(l.reserve(t0), Duration::from_millis(100));
        assert_eq!(l.reserve(t0), Duration::from_millis(200));
        // A second later the debt is paid and tokens came back.
        assert_eq!(l.reserve(t0 + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn retries_only_what_the_server_asks_to_retry() {
        assert_eq!(retry_after(429, Some("1")), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(503, Some("3")), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(429, None), None);
        assert_eq!(retry_after(409, Some("1")), None);
        assert_eq!(retry_after(429, Some("soon")), None);
        assert!(
            backoff(0) >= Duration::from_millis(100) && backoff(0) < Duration::from_millis(150)
        );
        assert!(backoff(20) <= Duration::from_millis(7500));
    }
}
