//! What a container does around its process, as Kubernetes validates it:
//! probes (one handler each, non-negative timings, `successThreshold` 1 for
//! liveness and startup), lifecycle hooks (one handler each, a `sleep`
//! within the grace period, a known `stopSignal` on a pod with an OS), and
//! which containers may have them (regular init containers may not; a
//! sidecar, `restartPolicy: Always`, may).

use super::*;
use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, PodSpec, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

/// Which list a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContainerKind {
    App,
    Init,
}

/// The signals `lifecycle.stopSignal` may name on Linux (Kubernetes' list).
const LINUX_SIGNALS: &[&str] = &[
    "SIGABRT",
    "SIGALRM",
    "SIGBUS",
    "SIGCHLD",
    "SIGCLD",
    "SIGCONT",
    "SIGFPE",
    "SIGHUP",
    "SIGILL",
    "SIGINT",
    "SIGIO",
    "SIGIOT",
    "SIGKILL",
    "SIGPIPE",
    "SIGPOLL",
    "SIGPROF",
    "SIGPWR",
    "SIGQUIT",
    "SIGSEGV",
    "SIGSTKFLT",
    "SIGSTOP",
    "SIGSYS",
    "SIGTERM",
    "SIGTRAP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGUSR1",
    "SIGUSR2",
    "SIGVTALRM",
    "SIGWINCH",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGRTMIN",
    "SIGRTMIN+1",
    "SIGRTMIN+2",
    "SIGRTMIN+3",
    "SIGRTMIN+4",
    "SIGRTMIN+5",
    "SIGRTMIN+6",
    "SIGRTMIN+7",
    "SIGRTMIN+8",
    "SIGRTMIN+9",
    "SIGRTMIN+10",
    "SIGRTMIN+11",
    "SIGRTMIN+12",
    "SIGRTMIN+13",
    "SIGRTMIN+14",
    "SIGRTMIN+15",
    "SIGRTMAX-14",
    "SIGRTMAX-13",
    "SIGRTMAX-12",
    "SIGRTMAX-11",
    "SIGRTMAX-10",
    "SIGRTMAX-9",
    "SIGRTMAX-8",
    "SIGRTMAX-7",
    "SIGRTMAX-6",
    "SIGRTMAX-5",
    "SIGRTMAX-4",
    "SIGRTMAX-3",
    "SIGRTMAX-2",
    "SIGRTMAX-1",
    "SIGRTMAX",
];

/// The probes, lifecycle and restart policy of one container at `path`.
/// `spec`: its pod spec (grace period, OS).
/// Long: Kubernetes' checks of probes, hooks and the restart policy in
/// its order, which the order of the errors in a 422 follows.
pub(super) fn validate_container_lifecycle(
    c: &Container,
    path: &str,
    kind: ContainerKind,
    spec: &PodSpec,
    errs: &mut Errors,
) {
    let grace = spec.termination_grace_period_seconds.unwrap_or(30);
    let restart = c.restart_policy.as_deref();
    let sidecar = restart == Some("Always");
    match (kind, restart) {
        (_, None) => {}
        (ContainerKind::Init, Some(r)) if !sidecar => {
            errs.push(FieldError::not_supported(
                format!("{path}.restartPolicy"),
                &json!(r),
                &["Always"],
            ));
        }
        (ContainerKind::Init, Some(_)) => {}
        (ContainerKind::App, Some(_)) => errs.push(FieldError::forbidden(
            format!("{path}.restartPolicy"),
            "may not be set for non-init containers",
        )),
    }
    if c.restart_policy_rules.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.restartPolicyRules"),
            "container restart rules are not supported by minik8s",
        ));
    }
    let probes = [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ];
    if kind == ContainerKind::Init && !sidecar {
        let set = std::iter::once(("lifecycle", c.lifecycle.is_some()))
            .chain(probes.iter().map(|(name, p)| (*name, p.is_some())));
        for (field, _) in set.filter(|(_, set)| *set) {
            errs.push(FieldError::forbidden(
                format!("{path}.{field}"),
                "may not be set for init containers without restartPolicy=Always",
            ));
        }
        return;
    }
    for (which, probe) in probes {
        if let Some(p) = probe {
            validate_probe(p, &format!("{path}.{which}"), which, errs);
        }
    }
    let Some(lifecycle) = &c.lifecycle else {
        return;
    };
    for (hook, handler) in [
        ("postStart", &lifecycle.post_start),
        ("preStop", &lifecycle.pre_stop),
    ] {
        let Some(h) = handler else {
            continue;
        };
        let at = format!("{path}.lifecycle.{hook}");
        let handlers = Handlers {
            exec: h.exec.as_ref(),
            http_get: h.http_get.as_ref(),
            tcp_socket: h.tcp_socket.as_ref(),
            grpc: None,
            sleep: h.sleep.is_some(),
        };
        validate_handler(&handlers, &at, errs);
        if let Some(sleep) = h
            .sleep
            .as_ref()
            .filter(|s| !(0..=grace).contains(&s.seconds))
        {
            errs.push(FieldError::invalid(
                format!("{at}.sleep"),
                &json!(sleep.seconds),
                format!(
                    "must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                ),
            ));
        }
    }
    if let Some(signal) = lifecycle.stop_signal.as_deref() {
        let at = format!("{path}.lifecycle.stopSignal");
        match spec.os.as_ref().map(|os| os.name.as_str()) {
            None => errs.push(FieldError::forbidden(
                at,
                "may not be set for containers with empty `spec.os.name`",
            )),
            Some("linux") if !LINUX_SIGNALS.contains(&signal) => {
                errs.push(FieldError::not_supported(at, &json!(signal), LINUX_SIGNALS));
            }
            Some("linux") => {}
            Some(_) => errs.push(FieldError::forbidden(
                at,
                "minik8s nodes run Linux: only a Linux pod may name a stop signal",
            )),
        }
    }
}

/// One probe: a single handler and sane timings.
fn validate_probe(p: &Probe, path: &str, which: &str, errs: &mut Errors) {
    let handlers = Handlers {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        sleep: false,
    };
    validate_handler(&handlers, path, errs);
    for (key, value) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                format!("{path}.{key}"),
                &json!(v),
                "must be greater than or equal to 0",
            ));
        }
    }
    if which != "readinessProbe" {
        if let Some(s) = p.success_threshold.filter(|s| *s != 1) {
            errs.push(FieldError::invalid(
                format!("{path}.successThreshold"),
                &json!(s),
                "must be 1",
            ));
        }
    }
    if let Some(g) = p.termination_grace_period_seconds {
        if which == "readinessProbe" {
            errs.push(FieldError::invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                &json!(g),
                "must not be set for readinessProbes",
            ));
        } else if g <= 0 {
            errs.push(FieldError::invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                &json!(g),
                "must be greater than 0",
            ));
        }
    }
}

/// The handlers a probe (exec, httpGet, tcpSocket, grpc) or a hook (exec,
/// httpGet, tcpSocket, sleep) sets.
struct Handlers<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: bool,
}

/// A probe's or hook's handler: exactly one, well formed.
fn validate_handler(h: &Handlers, path: &str, errs: &mut Errors) {
    let set = [
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("grpc", h.grpc.is_some()),
        ("sleep", h.sleep),
    ];
    let mut set = set.into_iter().filter(|(_, set)| *set).map(|(k, _)| k);
    let Some(first) = set.next() else {
        errs.push(FieldError::required(path, "must specify a handler type"));
        return;
    };
    let at = format!("{path}.{first}");
    match first {
        "exec"
            if h.exec
                .is_some_and(|e| e.command.as_ref().is_none_or(Vec::is_empty)) =>
        {
            errs.push(FieldError::required(format!("{at}.command"), ""));
        }
        "httpGet" => {
            let get = h.http_get.expect("set");
            port_or_name(errs, &get.port, &at);
            one_of(
                errs,
                get.scheme.as_deref(),
                &format!("{at}.scheme"),
                &["HTTP", "HTTPS"],
            );
        }
        "tcpSocket" => port_or_name(errs, &h.tcp_socket.expect("set").port, &at),
        "grpc" => port_number(errs, h.grpc.expect("set").port, &at),
        _ => {}
    }
    for other in set {
        errs.push(FieldError::forbidden(
            format!("{path}.{other}"),
            "may not specify more than 1 handler type",
        ));
    }
}

/// A port by number, 1-65535.
fn port_number(errs: &mut Errors, port: i32, at: &str) {
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            format!("{at}.port"),
            &json!(port),
            "must be between 1 and 65535, inclusive",
        ));
    }
}

/// A port given by number (1-65535) or by the name of a container port.
fn port_or_name(errs: &mut Errors, port: &IntOrString, at: &str) {
    match port {
        IntOrString::String(name) if name.is_empty() => {
            errs.push(FieldError::required(format!("{at}.port"), ""))
        }
        IntOrString::String(name) => {
            if let Some(e) = port_name_error(name) {
                errs.push(FieldError::invalid(format!("{at}.port"), &json!(name), e));
            }
        }
        IntOrString::Int(n) => port_number(errs, *n, at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(mut c: Value, kind: ContainerKind) -> Vec<String> {
        let mut errs = Vec::new();
        let spec = serde_json::from_value(json!({"terminationGracePeriodSeconds": 10})).unwrap();
        c["name"] = json!("c");
        let c = serde_json::from_value(c).unwrap();
        validate_container_lifecycle(&c, "spec.containers[0]", kind, &spec, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn probes_need_exactly_one_handler_and_sane_timings() {
        let e = errors(
            json!({"livenessProbe": {"periodSeconds": 5}}),
            ContainerKind::App,
        );
        assert_eq!(
            e,
            ["spec.containers[0].livenessProbe: Required value: must specify a handler type"]
        );
        let e = errors(
            json!({"readinessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}}),
            ContainerKind::App,
        );
        assert_eq!(e, ["spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"]);
        let e = errors(
            json!({"startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": -1, "successThreshold": 2}}),
            ContainerKind::App,
        );
        assert_eq!(e, [
            "spec.containers[0].startupProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].startupProbe.successThreshold: Invalid value: 2: must be 1",
        ]);
        let e = errors(
            json!({"readinessProbe": {"grpc": {"port": 0}, "terminationGracePeriodSeconds": 5}}),
            ContainerKind::App,
        );
        assert_eq!(e, [
            "spec.containers[0].readinessProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
        ]);
    }

    #[test]
    fn hooks_need_one_handler_and_a_sleep_within_the_grace_period() {
        let e = errors(json!({"lifecycle": {"preStop": {}}}), ContainerKind::App);
        assert_eq!(
            e,
            ["spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"]
        );
        let e = errors(
            json!({"lifecycle": {"postStart": {"sleep": {"seconds": 11}}}}),
            ContainerKind::App,
        );
        assert_eq!(e, ["spec.containers[0].lifecycle.postStart.sleep: Invalid value: 11: must be non-negative and less than terminationGracePeriodSeconds (10)"]);
        let e = errors(
            json!({"lifecycle": {"stopSignal": "SIGUSR1"}}),
            ContainerKind::App,
        );
        assert_eq!(e, ["spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"]);
    }

    #[test]
    fn sysctl_names_follow_kubernetes_rule() {
        use super::super::pod::{is_sysctl_name, validate_pod_spec};
        assert!(is_sysctl_name("net.ipv4.ip_forward"));
        assert!(is_sysctl_name("kernel.shm_rmid_forced"));
        assert!(is_sysctl_name("net/ipv4/conf/eth0.100/forwarding"));
        for bad in [
            "",
            "net..core",
            "Net.core",
            "net.core-",
            "-net",
            &"a".repeat(254),
        ] {
            assert!(!is_sysctl_name(bad), "{bad:?}");
        }
        let spec = json!({"containers": [{"name": "c", "image": "i"}],
                          "securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1024"},
                                                          {"name": "Bad_Name", "value": "1"},
                                                          {"name": "net.core.somaxconn", "value": "2"}]}});
        let mut errs = Vec::new();
        validate_pod_spec(&serde_json::from_value(spec).unwrap(), "spec", &mut errs);
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(text[0].starts_with("spec.securityContext.sysctls[1].name: Invalid value: \"Bad_Name\": must have at most 253 characters"), "{text:?}");
        assert_eq!(
            text[1],
            "spec.securityContext.sysctls[2].name: Duplicate value: \"net.core.somaxconn\""
        );
    }

    #[test]
    fn only_sidecars_among_init_containers_have_probes_and_hooks() {
        let probe = json!({"exec": {"command": ["true"]}});
        let e = errors(json!({"readinessProbe": probe}), ContainerKind::Init);
        assert_eq!(e, ["spec.containers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"]);
        assert!(errors(
            json!({"restartPolicy": "Always", "readinessProbe": probe}),
            ContainerKind::Init
        )
        .is_empty());
        let e = errors(json!({"restartPolicy": "Never"}), ContainerKind::Init);
        assert_eq!(e, ["spec.containers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]);
        let e = errors(json!({"restartPolicy": "Always"}), ContainerKind::App);
        assert_eq!(e, ["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"]);
    }
}
