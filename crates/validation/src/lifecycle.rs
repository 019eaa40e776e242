//! What a container does around its process, as Kubernetes validates it:
//! probes (one handler each, non-negative timings, `successThreshold` 1 for
//! liveness and startup), lifecycle hooks (one handler each, a `sleep`
//! within the grace period, a known `stopSignal` on a pod with an OS), and
//! which containers may have them (regular init containers may not; a
//! sidecar, `restartPolicy: Always`, may).

use super::*;

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
pub(super) fn validate_container_lifecycle(
    c: &Value,
    path: &str,
    kind: ContainerKind,
    spec: &Value,
    errs: &mut Errors,
) {
    let grace = spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(30);
    let restart = c.get("restartPolicy");
    let sidecar = restart.and_then(Value::as_str) == Some("Always");
    match (kind, restart) {
        (_, None | Some(Value::Null)) => {}
        (ContainerKind::Init, Some(r)) if !sidecar => {
            errs.push(FieldError::not_supported(
                format!("{path}.restartPolicy"),
                r,
                &["Always"],
            ));
        }
        (ContainerKind::Init, Some(_)) => {}
        (ContainerKind::App, Some(_)) => errs.push(FieldError::forbidden(
            format!("{path}.restartPolicy"),
            "may not be set for non-init containers",
        )),
    }
    if c.get("restartPolicyRules").is_some_and(|r| !r.is_null()) {
        errs.push(FieldError::forbidden(
            format!("{path}.restartPolicyRules"),
            "container restart rules are not supported by minik8s",
        ));
    }
    if kind == ContainerKind::Init && !sidecar {
        for field in [
            "lifecycle",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
        ] {
            if c.get(field).is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
        }
        return;
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe).filter(|p| !p.is_null()) {
            validate_probe(p, &format!("{path}.{probe}"), probe, errs);
        }
    }
    let Some(lifecycle) = c.get("lifecycle").filter(|l| !l.is_null()) else {
        return;
    };
    for hook in ["postStart", "preStop"] {
        if let Some(h) = lifecycle.get(hook).filter(|h| !h.is_null()) {
            let at = format!("{path}.lifecycle.{hook}");
            validate_handler(h, &at, &["exec", "httpGet", "tcpSocket", "sleep"], errs);
            if let Some(seconds) = h.pointer("/sleep/seconds") {
                if !seconds.as_i64().is_some_and(|s| (0..=grace).contains(&s)) {
                    errs.push(FieldError::invalid(
                        format!("{at}.sleep"),
                        seconds,
                        format!("must be non-negative and less than terminationGracePeriodSeconds ({grace})"),
                    ));
                }
            }
        }
    }
    if let Some(signal) = lifecycle.get("stopSignal").filter(|s| !s.is_null()) {
        let at = format!("{path}.lifecycle.stopSignal");
        match spec.pointer("/os/name").and_then(Value::as_str) {
            None => errs.push(FieldError::forbidden(
                at,
                "may not be set for containers with empty `spec.os.name`",
            )),
            Some("linux") if !signal.as_str().is_some_and(|s| LINUX_SIGNALS.contains(&s)) => {
                errs.push(FieldError::not_supported(at, signal, LINUX_SIGNALS));
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
fn validate_probe(p: &Value, path: &str, which: &str, errs: &mut Errors) {
    validate_handler(p, path, &["exec", "httpGet", "tcpSocket", "grpc"], errs);
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        check_non_negative(errs, p, key, path);
    }
    if which != "readinessProbe" {
        if let Some(s) = p.get("successThreshold").filter(|s| s.as_i64() != Some(1)) {
            errs.push(FieldError::invalid(
                format!("{path}.successThreshold"),
                s,
                "must be 1",
            ));
        }
    }
    if let Some(g) = p
        .get("terminationGracePeriodSeconds")
        .filter(|g| !g.is_null())
    {
        if which == "readinessProbe" {
            errs.push(FieldError::invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                g,
                "must not be set for readinessProbes",
            ));
        } else if g.as_i64().is_none_or(|n| n <= 0) {
            errs.push(FieldError::invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                g,
                "must be greater than 0",
            ));
        }
    }
}

/// A probe's or hook's handler: exactly one of `kinds`, each well formed.
fn validate_handler(h: &Value, path: &str, kinds: &[&str], errs: &mut Errors) {
    let mut count = 0;
    for kind in kinds {
        let Some(handler) = h.get(*kind).filter(|v| !v.is_null()) else {
            continue;
        };
        let at = format!("{path}.{kind}");
        if count > 0 {
            errs.push(FieldError::forbidden(
                at,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        count += 1;
        match *kind {
            "exec" if arr(handler, "command").is_empty() => {
                errs.push(FieldError::required(format!("{at}.command"), ""));
            }
            "httpGet" => {
                check_port_or_name(errs, handler, &at);
                check_enum(errs, handler, "scheme", &at, &["HTTP", "HTTPS"]);
            }
            "tcpSocket" => check_port_or_name(errs, handler, &at),
            "grpc" => check_port(errs, handler, "port", &at, true),
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
}

/// A port given by number (1-65535) or by the name of a container port.
fn check_port_or_name(errs: &mut Errors, handler: &Value, at: &str) {
    match handler.get("port") {
        None | Some(Value::Null) => errs.push(FieldError::required(format!("{at}.port"), "")),
        Some(Value::String(name)) => {
            if let Some(e) = port_name_error(name) {
                errs.push(FieldError::invalid(
                    format!("{at}.port"),
                    &Value::String(name.clone()),
                    e,
                ));
            }
        }
        Some(_) => check_port(errs, handler, "port", at, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(c: Value, kind: ContainerKind) -> Vec<String> {
        let mut errs = Vec::new();
        let spec = json!({"terminationGracePeriodSeconds": 10});
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
        validate_pod_spec(&spec, "spec", &mut errs);
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
