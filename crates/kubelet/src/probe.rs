//! Startup, liveness and readiness probes (exec, httpGet, tcpSocket, grpc)
//! with Kubernetes' defaults: every `periodSeconds` (10) after
//! `initialDelaySeconds` (0), each attempt bounded by `timeoutSeconds` (1);
//! `successThreshold` (1) successes in a row make the result good,
//! `failureThreshold` (3) failures make it bad. Readiness starts bad;
//! liveness starts good. While a container has a startup probe that has not
//! passed, only that probe runs; once it passed it never runs again for that
//! container. A failed startup or liveness probe kills the container (within
//! the probe's own `terminationGracePeriodSeconds` when it has one), and the
//! restart policy decides what follows. Each failed attempt is a Warning
//! `Unhealthy` event, worded as Kubernetes words it.

use crate::runtime::{ContainerInfo, State};
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }
}

/// A container to kill for a failed startup or liveness probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeKill {
    /// The `Killing` event's message.
    pub message: String,
    /// The probe's `terminationGracePeriodSeconds`, when it has one.
    pub grace: Option<i64>,
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
pub(crate) fn probe_host(host: &Option<String>, pod_ip: &str) -> String {
    host.clone()
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| pod_ip.to_string())
}

impl crate::Kubelet {
    /// Runs the container's due probes, keeping their tallies; returns the
    /// kill a failed startup or liveness probe asks for.
    pub(crate) async fn probe_container(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        c: &Container,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> Option<ProbeKill> {
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
        let startup_done = c.startup_probe.is_none()
            || self.probes.get(&cur.id, Kind::Startup).result == Some(true);
        let kinds: &[(Kind, &Option<Probe>)] = if startup_done {
            &[
                (Kind::Readiness, &c.readiness_probe),
                (Kind::Liveness, &c.liveness_probe),
            ]
        } else {
            &[(Kind::Startup, &c.startup_probe)]
        };
        for (kind, probe) in kinds {
            let Some(p) = probe else { continue };
            let s = Settings::of(p);
            let mut tally = self.probes.get(&cur.id, *kind);
            let now = std::time::Instant::now();
            if !tally.due(&s, running_for, now) {
                continue;
            }
            let outcome =
                match tokio::time::timeout(s.timeout, self.probe_once(c, p, cur, pod_ip)).await {
                    Ok(result) => result,
                    Err(_) => Err(format!(
                        "timeout: the probe did not answer within {}s",
                        s.timeout.as_secs()
                    )),
                };
            if let Err(output) = &outcome {
                let message = format!("{} probe failed: {output}", kind.word());
                self.warning_event(pod, "Unhealthy", message);
            }
            tally.record(outcome.is_ok(), &s, now);
            self.probes.put(&cur.id, *kind, tally.clone());
            if tally.result == Some(false) && *kind != Kind::Readiness {
                let what = if *kind == Kind::Startup {
                    "startup"
                } else {
                    "liveness"
                };
                return Some(ProbeKill {
                    message: format!(
                        "Container {} failed {what} probe, will be restarted",
                        c.name
                    ),
                    grace: p.termination_grace_period_seconds,
                });
            }
        }
        None
    }

    /// One probe attempt: exec in the container, HTTP GET, TCP connect or a
    /// gRPC health check to the pod IP. Err: what failed, for the event.
    async fn probe_once(
        &self,
        c: &Container,
        p: &Probe,
        cur: &ContainerInfo,
        pod_ip: &str,
    ) -> Result<(), String> {
        if let Some(e) = &p.exec {
            let command = e.command.clone().unwrap_or_default();
            return match self.runtime.exec(&cur.id, command.clone()).await {
                Ok((0, _)) => Ok(()),
                Ok((code, output)) if output.trim().is_empty() => Err(format!(
                    "command {:?} exited with {code}",
                    command.join(" ")
                )),
                Ok((_, output)) => Err(output.trim_end().to_string()),
                Err(e) => Err(e.to_string()),
            };
        }
        if let Some(h) = &p.http_get {
            let port = port(c, &h.port).ok_or_else(|| format!("unknown port {:?}", h.port))?;
            return http_get(h, &probe_host(&h.host, pod_ip), port).await;
        }
        if let Some(t) = &p.tcp_socket {
            let port = port(c, &t.port).ok_or_else(|| format!("unknown port {:?}", t.port))?;
            let host = probe_host(&t.host, pod_ip);
            return tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map(drop)
                .map_err(|e| format!("dial tcp {host}:{port}: {e}"));
        }
        if let Some(g) = &p.grpc {
            let port = u16::try_from(g.port).map_err(|_| format!("invalid port {}", g.port))?;
            return grpc_health_check(pod_ip, port, g.service.as_deref().unwrap_or("")).await;
        }
        Err("the probe has no handler".into())
    }
}

/// An HTTP GET as probes (and hooks) make it: `kube-probe/<version>` as the
/// agent, the handler's headers; Ok for 200-399.
pub(crate) async fn http_get(
    h: &k8s_openapi::api::core::v1::HTTPGetAction,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
    let path = h.path.clone().unwrap_or_else(|| "/".into());
    let path = if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    };
    let url = format!("{scheme}://{host}:{port}{path}");
    // HTTPS probes do not check the certificate (Kubernetes' rule).
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .map_err(|e| e.to_string())?;
    let mut req = client.get(&url).header(
        "User-Agent",
        format!("kube-probe/{}", minik8s_api::release::MAJOR_MINOR),
    );
    for hh in h.http_headers.iter().flatten() {
        req = req.header(&hh.name, &hh.value);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("Get \"{url}\": {e}"))?;
    let code = resp.status().as_u16();
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {code}"))
    }
}

/// The standard gRPC health check (`grpc.health.v1.Health/Check`) over
/// HTTP/2 without TLS, as Kubernetes' gRPC probe makes it: healthy when the
/// answer is SERVING.
pub async fn grpc_health_check(host: &str, port: u16, service: &str) -> Result<(), String> {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("failed to connect service \"{host}:{port}\": {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .map_err(|e| format!("failed to connect service \"{host}:{port}\": {e}"))?;
    tokio::spawn(conn);
    let request = hyper::Request::post(format!("http://{host}:{port}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header(
            "user-agent",
            format!("kube-probe/{}", minik8s_api::release::MAJOR_MINOR),
        )
        .body(http_body_util::Full::new(bytes::Bytes::from(grpc_frame(
            &health_request(service),
        ))))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("health rpc failed: {e}"))?;
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("health rpc failed: {e}"))?;
    // The status is in the trailers, or in the headers of a trailers-only answer.
    let status_of = |h: &hyper::HeaderMap, name: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let trailers = body.trailers().cloned().unwrap_or_default();
    let code = status_of(&trailers, "grpc-status").or_else(|| status_of(&headers, "grpc-status"));
    if code.as_deref() != Some("0") {
        let message = status_of(&trailers, "grpc-message")
            .or_else(|| status_of(&headers, "grpc-message"))
            .unwrap_or_default();
        return Err(format!(
            "health rpc probe failed: rpc error: code = {} desc = {message}",
            code.unwrap_or_else(|| "Unknown".into())
        ));
    }
    match health_status(&body.to_bytes()) {
        Some(1) => Ok(()),
        other => {
            let name = match other {
                Some(2) => "NOT_SERVING",
                Some(3) => "SERVICE_UNKNOWN",
                _ => "UNKNOWN",
            };
            Err(format!("service unhealthy (responded with \"{name}\")"))
        }
    }
}

/// `HealthCheckRequest { service = 1 }` in protobuf.
fn health_request(service: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if !service.is_empty() {
        out.push(0x0a);
        let mut len = service.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(service.as_bytes());
    }
    out
}

/// A gRPC message frame: uncompressed, its length, the message.
pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The `status` (field 1) of a framed `HealthCheckResponse`; 0 (UNKNOWN) when absent.
fn health_status(framed: &[u8]) -> Option<u64> {
    let message = framed.get(5..)?;
    let mut at = 0;
    while at < message.len() {
        let key = message[at];
        at += 1;
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = *message.get(at)?;
            at += 1;
            value |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        match key {
            0x08 => return Some(value),
            // Only varints are expected; anything else is not a health answer.
            k if k & 0x07 == 0 => {}
            _ => return None,
        }
    }
    Some(0)
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

    #[test]
    fn grpc_health_messages() {
        assert_eq!(health_request(""), Vec::<u8>::new());
        assert_eq!(health_request("db"), [0x0a, 2, b'd', b'b']);
        assert_eq!(grpc_frame(&[0x08, 1]), [0, 0, 0, 0, 2, 0x08, 1]);
        assert_eq!(health_status(&grpc_frame(&[0x08, 1])), Some(1));
        assert_eq!(health_status(&grpc_frame(&[0x08, 2])), Some(2));
        assert_eq!(
            health_status(&grpc_frame(&[])),
            Some(0),
            "SERVING is not the default"
        );
        assert_eq!(health_status(&[0, 0]), None);
    }
}
