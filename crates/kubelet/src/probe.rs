//! Liveness and readiness probes (exec, httpGet, tcpSocket) with Kubernetes'
//! defaults: every `periodSeconds` (10) after `initialDelaySeconds` (0), each
//! attempt bounded by `timeoutSeconds` (1); `successThreshold` (1) successes in
//! a row make the result good, `failureThreshold` (3) failures make it bad.
//! Readiness starts bad; liveness starts good.

use crate::runtime::{ContainerInfo, State};
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Liveness,
    Readiness,
}

/// One probe's running tally for one container instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub successes: i32,
    pub failures: i32,
    pub result: Option<bool>,
    last_run: Option<Instant>,
}

/// The probe settings with Kubernetes' defaults filled in.
pub struct Settings {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: i32,
    pub failure_threshold: i32,
}

impl Settings {
    pub fn of(p: &Probe) -> Settings {
        let secs = |v: Option<i32>, d: i32| Duration::from_secs(v.unwrap_or(d).max(0) as u64);
        Settings {
            initial_delay: secs(p.initial_delay_seconds, 0),
            period: secs(p.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: secs(p.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: p.success_threshold.unwrap_or(1).max(1),
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1),
        }
    }
}

impl Tally {
    /// Is an attempt due, for a container running for `running_for`?
    pub fn due(&self, s: &Settings, running_for: Duration, now: Instant) -> bool {
        running_for >= s.initial_delay
            && self
                .last_run
                .is_none_or(|t| now.duration_since(t) >= s.period)
    }

    /// Records one attempt; the result flips only after enough attempts in a row.
    pub fn record(&mut self, success: bool, s: &Settings, now: Instant) {
        self.last_run = Some(now);
        if success {
            self.successes += 1;
            self.failures = 0;
            if self.successes >= s.success_threshold {
                self.result = Some(true);
            }
        } else {
            self.failures += 1;
            self.successes = 0;
            if self.failures >= s.failure_threshold {
                self.result = Some(false);
            }
        }
    }
}

/// Tallies by (container id, kind).
#[derive(Default)]
pub struct Probes(Mutex<HashMap<(String, Kind), Tally>>);

impl Probes {
    pub fn get(&self, id: &str, kind: Kind) -> Tally {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(id.to_string(), kind))
            .cloned()
            .unwrap_or_default()
    }
    pub fn put(&self, id: &str, kind: Kind, t: Tally) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((id.to_string(), kind), t);
    }
    /// Forgets containers that no longer exist.
    pub fn retain(&self, live: &std::collections::HashSet<String>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _), _| live.contains(id));
    }
}

/// Resolves a probe's port (number or the name of a container port).
pub fn port(c: &Container, p: &IntOrString) -> Option<u16> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    }
}

/// Where a network probe goes: its `host`, or the pod's IP.
fn probe_host(host: &Option<String>, pod_ip: &str) -> String {
    host.clone()
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| pod_ip.to_string())
}

impl crate::Kubelet {
    /// Runs the container's due probes; returns (ready, alive).
    pub(crate) async fn probe_container(
        &self,
        c: &Container,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> (bool, bool) {
        let started = match &cur.state {
            State::Running { started_at } => chrono::DateTime::parse_from_rfc3339(started_at).ok(),
            _ => None,
        };
        let running_for = started
            .map(|s| {
                (chrono::Utc::now() - s.with_timezone(&chrono::Utc))
                    .to_std()
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let (mut ready, mut alive) = (true, true);
        for (kind, probe) in [
            (Kind::Readiness, &c.readiness_probe),
            (Kind::Liveness, &c.liveness_probe),
        ] {
            let Some(p) = probe else { continue };
            let s = Settings::of(p);
            let mut tally = self.probes.get(&cur.id, kind);
            let now = std::time::Instant::now();
            if tally.due(&s, running_for, now) {
                let ok = tokio::time::timeout(s.timeout, self.probe_once(c, p, cur, pod_ip))
                    .await
                    .unwrap_or(false);
                tally.record(ok, &s, now);
                self.probes.put(&cur.id, kind, tally.clone());
            }
            match kind {
                Kind::Readiness => ready = tally.result == Some(true),
                Kind::Liveness => alive = tally.result != Some(false),
            }
        }
        (ready, alive)
    }

    /// One probe attempt: exec in the container, HTTP GET or TCP connect to the pod IP.
    async fn probe_once(
        &self,
        c: &Container,
        p: &k8s_openapi::api::core::v1::Probe,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> bool {
        if let Some(e) = &p.exec {
            return self
                .runtime
                .exec(&cur.id, e.command.clone().unwrap_or_default())
                .await
                .is_ok_and(|code| code == 0);
        }
        if let Some(h) = &p.http_get {
            let Some(port) = port(c, &h.port) else {
                return false;
            };
            let host = probe_host(&h.host, pod_ip);
            let scheme = h
                .scheme
                .clone()
                .unwrap_or_else(|| "HTTP".into())
                .to_lowercase();
            let url = format!(
                "{scheme}://{host}:{port}{}",
                h.path.clone().unwrap_or_else(|| "/".into())
            );
            let mut req = reqwest::Client::new().get(&url).header(
                "User-Agent",
                format!("kube-probe/{}", minik8s_api::release::MAJOR_MINOR),
            );
            for hh in h.http_headers.iter().flatten() {
                req = req.header(&hh.name, &hh.value);
            }
            return req
                .send()
                .await
                .is_ok_and(|r| (200..400).contains(&r.status().as_u16()));
        }
        if let Some(t) = &p.tcp_socket {
            let Some(port) = port(c, &t.port) else {
                return false;
            };
            let host = probe_host(&t.host, pod_ip);
            return tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .is_ok();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_periods() {
        let probe: Probe = serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}, "initialDelaySeconds": 2, "periodSeconds": 5, "failureThreshold": 2})).unwrap();
        let s = Settings::of(&probe);
        let t0 = Instant::now();
        let mut t = Tally::default();
        assert!(!t.due(&s, Duration::from_secs(1), t0), "initial delay");
        assert!(t.due(&s, Duration::from_secs(2), t0));
        t.record(false, &s, t0);
        assert_eq!(t.result, None, "one failure is not enough");
        assert!(
            !t.due(&s, Duration::from_secs(4), t0 + Duration::from_secs(4)),
            "period"
        );
        t.record(false, &s, t0 + Duration::from_secs(5));
        assert_eq!(t.result, Some(false));
        t.record(true, &s, t0 + Duration::from_secs(10));
        assert_eq!(t.result, Some(true), "successThreshold defaults to 1");
    }

    #[test]
    fn named_ports() {
        let c: Container = serde_json::from_value(
            serde_json::json!({"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}),
        )
        .unwrap();
        assert_eq!(port(&c, &IntOrString::String("http".into())), Some(8080));
        assert_eq!(port(&c, &IntOrString::Int(81)), Some(81));
        assert_eq!(port(&c, &IntOrString::String("nope".into())), None);
    }
}
