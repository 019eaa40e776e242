//! Leader election through a `coordination.k8s.io` Lease, as client-go's
//! leaderelection does: the holder renews `renewTime` every `retry` period; a
//! candidate takes the Lease once it has not been renewed for
//! `leaseDurationSeconds`. Writes carry the Lease's resourceVersion, so two
//! candidates cannot both win. A leader that cannot renew in time stops.

use crate::Client;
use k8s_openapi::api::coordination::v1::Lease;
use minik8s_api::registry;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    pub name: String,
    /// This candidate's identity (host and pid).
    pub identity: String,
    pub lease_duration: Duration,
    /// How often the leader renews and candidates retry.
    pub retry: Duration,
}

impl Config {
    /// The Lease `kube-system/<name>` with Kubernetes' timings (15 s lease,
    /// renewed every 2 s).
    pub fn for_lease(name: &str, identity: &str) -> Config {
        Config {
            namespace: "kube-system".into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            retry: Duration::from_secs(2),
        }
    }

    pub fn controller_manager(identity: &str) -> Config {
        Self::for_lease("kube-controller-manager", identity)
    }

    pub fn scheduler(identity: &str) -> Config {
        Self::for_lease("kube-scheduler", identity)
    }

    /// How long a leader goes on without renewing before it stops: two
    /// thirds of the lease (Kubernetes: renew deadline 10 s of 15), so it has
    /// stopped before anyone else may take the Lease.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }
}

/// This process's identity as a candidate: host name and pid, as client-go's.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}_{}", host.trim(), std::process::id())
}

/// What a candidate should do with the Lease as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Ours: renew it.
    Renew,
    /// Free or expired: take it.
    Acquire,
    /// Someone else holds it.
    Wait,
}

fn parse(t: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.with_timezone(&chrono::Utc))
}

/// Decides from the Lease's spec (None: no Lease yet).
pub fn decide(spec: Option<&Value>, me: &str, now: chrono::DateTime<chrono::Utc>) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec
        .get("holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("");
    if holder == me {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = spec
        .get("leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(15);
    let renewed = spec
        .get("renewTime")
        .and_then(Value::as_str)
        .and_then(parse);
    match renewed {
        Some(r) if (now - r).num_milliseconds() < duration * 1000 => Decision::Wait,
        _ => Decision::Acquire,
    }
}

fn micro(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// One attempt: returns whether this candidate holds the Lease afterwards.
pub async fn try_lead(client: &Client, cfg: &Config) -> bool {
    let api = client.dynamic(registry::of::<Lease>(), Some(&cfg.namespace));
    let now = chrono::Utc::now();
    let current = match api.get(&cfg.name).await {
        Ok(l) => Some(l),
        Err(e) if e.is_not_found() => None,
        Err(_) => return false,
    };
    let spec = current.as_ref().and_then(|l| l.get("spec"));
    let mut next = json!({"holderIdentity": cfg.identity, "leaseDurationSeconds": cfg.lease_duration.as_secs(), "renewTime": micro(now)});
    match decide(spec, &cfg.identity, now) {
        Decision::Wait => false,
        Decision::Renew => {
            next["acquireTime"] = spec
                .and_then(|s| s.get("acquireTime"))
                .cloned()
                .unwrap_or(json!(micro(now)));
            next["leaseTransitions"] = spec
                .and_then(|s| s.get("leaseTransitions"))
                .cloned()
                .unwrap_or(json!(0));
            write(&api, cfg, current.as_ref(), next).await
        }
        Decision::Acquire => {
            next["acquireTime"] = json!(micro(now));
            next["leaseTransitions"] = json!(
                spec.and_then(|s| s.get("leaseTransitions"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    + i64::from(current.is_some())
            );
            write(&api, cfg, current.as_ref(), next).await
        }
    }
}

/// Creates or replaces the Lease; a conflict means another candidate won the race.
async fn write(
    api: &crate::DynamicApi,
    cfg: &Config,
    current: Option<&Value>,
    spec: Value,
) -> bool {
    match current {
        None => {
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": spec});
            api.create(&lease).await.is_ok()
        }
        Some(cur) => {
            let mut lease = cur.clone();
            lease["spec"] = spec;
            api.replace(&cfg.name, &lease).await.is_ok()
        }
    }
}

/// Leadership was lost: the leader could not renew its Lease in time.
#[derive(Debug, thiserror::Error)]
#[error("lost the {0} lease")]
pub struct LostLease(pub String);

/// Waits until this candidate leads, then runs `work` while renewing; returns
/// (with an error) when leadership is lost, so the process can stop as upstream does.
pub async fn run_as_leader<F, E>(client: Client, cfg: Config, work: F) -> Result<(), E>
where
    F: std::future::Future<Output = Result<(), E>>,
    E: From<LostLease>,
{
    while !try_lead(&client, &cfg).await {
        tokio::time::sleep(cfg.retry).await;
    }
    tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "became leader");
    let renew = async {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(cfg.retry).await;
            if try_lead(&client, &cfg).await {
                last_ok = tokio::time::Instant::now();
            } else if last_ok.elapsed() >= cfg.renew_deadline() {
                return LostLease(format!("{}/{}", cfg.namespace, cfg.name));
            }
        }
    };
    tokio::select! {
        r = work => r,
        e = renew => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let now = chrono::Utc::now();
        let fresh = json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro(now - chrono::Duration::seconds(5))});
        let stale = json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro(now - chrono::Duration::seconds(16))});
        assert_eq!(decide(None, "b", now), Decision::Acquire);
        assert_eq!(decide(Some(&fresh), "a", now), Decision::Renew);
        assert_eq!(decide(Some(&fresh), "b", now), Decision::Wait);
        assert_eq!(decide(Some(&stale), "b", now), Decision::Acquire);
        assert_eq!(
            decide(Some(&json!({"holderIdentity": ""})), "b", now),
            Decision::Acquire
        );
    }
}
