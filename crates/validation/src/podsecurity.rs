//! Pod Security Standards, pure: the checks of the `baseline` and
//! `restricted` levels (Kubernetes' pod-security-admission `policy` package),
//! with their reasons and details worded as Kubernetes words them, in its
//! order. The apiserver's admission (`pod_security.rs` there) reads the
//! namespace's `pod-security.kubernetes.io/*` labels and enforces, warns
//! and audits with these.

use serde_json::Value;

/// A Pod Security level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// One failed check: (reason, detail), e.g. ("privileged", "container \"c\" must not set securityContext.privileged=true").
pub type Violation = (String, String);

/// The capabilities baseline allows to add (Docker's defaults).
const BASELINE_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];
/// The volume types restricted allows.
const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

fn quote(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(one: &str, many: &str, n: usize) -> String {
    if n == 1 {
        one.into()
    } else {
        many.into()
    }
}

/// All containers (init, regular, ephemeral) with their names.
fn containers(spec: &Value) -> Vec<&Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten())
        .collect()
}

/// `container "a"` or `containers "a", "b"`, as Kubernetes names them.
fn named_containers(names: &[String]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        quote(names)
    )
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or("").to_string()
}

/// The checks `spec` fails at `level`, in Kubernetes' order.
pub fn check(level: Level, spec: &Value) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let pod = PodView::of(spec);
    let mut out = Vec::new();
    for check in CHECKS.iter().filter(|c| c.applies.at(level)) {
        (check.run)(&pod, &mut out);
    }
    out
}

/// What the checks read of a pod spec.
struct PodView<'a> {
    spec: &'a Value,
    /// The pod's `securityContext`.
    psc: &'a Value,
    /// All containers: init, regular, ephemeral.
    containers: Vec<&'a Value>,
    volumes: Vec<&'a Value>,
}

impl<'a> PodView<'a> {
    /// The names of the containers `bad` holds for.
    fn containers_where(&self, bad: impl Fn(&&Value) -> bool) -> Vec<String> {
        self.containers
            .iter()
            .filter(|c| bad(c))
            .map(|c| name(c))
            .collect()
    }

    fn of(spec: &'a Value) -> Self {
        PodView {
            spec,
            psc: &spec["securityContext"],
            containers: containers(spec),
            volumes: spec["volumes"].as_array().into_iter().flatten().collect(),
        }
    }
}

/// The levels a check runs at: restricted replaces some baseline checks
/// with stricter ones of its own (Kubernetes' `OverrideCheckIDs`).
#[derive(Clone, Copy)]
enum Applies {
    Both,
    BaselineOnly,
    RestrictedOnly,
}

impl Applies {
    fn at(self, level: Level) -> bool {
        match self {
            Applies::Both => true,
            Applies::BaselineOnly => level == Level::Baseline,
            Applies::RestrictedOnly => level == Level::Restricted,
        }
    }
}

/// One check of the Pod Security Standards (Kubernetes'
/// `pod-security-admission/policy/check_*.go`, each function named after
/// its check ID): the levels it runs at, and what it finds, pushed as
/// (reason, detail).
struct Check {
    applies: Applies,
    run: fn(&PodView<'_>, &mut Vec<Violation>),
}

/// Every check, in the order Kubernetes reports them.
const CHECKS: &[Check] = &[
    Check {
        applies: Applies::Both,
        run: app_armor_profile,
    },
    Check {
        applies: Applies::BaselineOnly,
        run: capabilities_baseline,
    },
    Check {
        applies: Applies::Both,
        run: host_namespaces,
    },
    Check {
        applies: Applies::BaselineOnly,
        run: host_path_volumes,
    },
    Check {
        applies: Applies::Both,
        run: host_ports,
    },
    Check {
        applies: Applies::Both,
        run: privileged,
    },
    Check {
        applies: Applies::Both,
        run: proc_mount,
    },
    Check {
        applies: Applies::BaselineOnly,
        run: seccomp_profile_baseline,
    },
    Check {
        applies: Applies::Both,
        run: sysctls,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: allow_privilege_escalation,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: capabilities_restricted,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: restricted_volumes,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: run_as_non_root,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: run_as_user,
    },
    Check {
        applies: Applies::RestrictedOnly,
        run: seccomp_profile_restricted,
    },
];

fn push(out: &mut Vec<Violation>, reason: &str, detail: String) {
    out.push((reason.to_string(), detail));
}

/// `appArmorProfile` (baseline): no pod or container AppArmor profile of type `Unconfined`.
fn app_armor_profile(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let bad = pod.containers_where(|c| {
        c.pointer("/securityContext/appArmorProfile/type") == Some(&Value::from("Unconfined"))
    });
    if !bad.is_empty()
        || pod.psc.pointer("/appArmorProfile/type") == Some(&Value::from("Unconfined"))
    {
        push(
            out,
            "appArmorProfile",
            format!(
                "{} must not set appArmorProfile.type to \"Unconfined\"",
                named_containers(&bad)
            ),
        );
    }
}

/// `capabilities_baseline`: capabilities added beyond the default set
/// (restricted has its own, stricter check).
fn capabilities_baseline(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let mut details = Vec::new();
    for c in &pod.containers {
        let added: Vec<String> = c
            .pointer("/securityContext/capabilities/add")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|cap| !BASELINE_CAPS.contains(cap))
            .map(str::to_string)
            .collect();
        if !added.is_empty() {
            details.push(format!(
                "container {:?} must not include {} in securityContext.capabilities.add",
                name(c),
                quote(&added)
            ));
        }
    }
    if !details.is_empty() {
        push(out, "non-default capabilities", details.join("; "));
    }
}

/// `hostNamespaces` (baseline): no host network, PID or IPC namespace.
fn host_namespaces(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let hosts: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|k| pod.spec[**k] == true)
        .map(|k| format!("{k}=true"))
        .collect();
    if !hosts.is_empty() {
        push(out, "host namespaces", hosts.join(", "));
    }
}

/// `hostPathVolumes`: no hostPath volume (restricted reports them as
/// restricted volume types).
fn host_path_volumes(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let host: Vec<String> = pod
        .volumes
        .iter()
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| name(v))
        .collect();
    if !host.is_empty() {
        push(
            out,
            "hostPath volumes",
            format!(
                "{} {}",
                plural("volume", "volumes", host.len()),
                quote(&host)
            ),
        );
    }
}

/// `hostPorts` (baseline): no container port bound on the host.
fn host_ports(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let mut with_ports = Vec::new();
    let mut ports = Vec::new();
    for c in &pod.containers {
        let hp: Vec<String> = c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["hostPort"].as_i64())
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !hp.is_empty() {
            with_ports.push(name(c));
            ports.extend(hp);
        }
    }
    if !with_ports.is_empty() {
        push(
            out,
            "hostPort",
            format!(
                "{} {} {} {}",
                named_containers(&with_ports),
                plural("uses", "use", with_ports.len()),
                plural("hostPort", "hostPorts", ports.len()),
                ports.join(", ")
            ),
        );
    }
}

/// `privileged` (baseline): no privileged container.
fn privileged(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let bad = pod
        .containers_where(|c| c.pointer("/securityContext/privileged") == Some(&Value::Bool(true)));
    if !bad.is_empty() {
        push(
            out,
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                named_containers(&bad)
            ),
        );
    }
}

/// `procMount` (baseline): the default /proc mask only.
fn proc_mount(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let bad = pod.containers_where(|c| {
        c.pointer("/securityContext/procMount")
            .and_then(Value::as_str)
            .is_some_and(|m| m != "Default")
    });
    if !bad.is_empty() {
        push(
            out,
            "procMount",
            format!(
                "{} must not set securityContext.procMount to \"Unmasked\"",
                named_containers(&bad)
            ),
        );
    }
}

/// `seccompProfile_baseline`: no seccomp profile of type `Unconfined`
/// (restricted requires RuntimeDefault or Localhost instead).
fn seccomp_profile_baseline(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let bad = pod.containers_where(|c| {
        c.pointer("/securityContext/seccompProfile/type") == Some(&Value::from("Unconfined"))
    });
    if pod.psc.pointer("/seccompProfile/type") == Some(&Value::from("Unconfined")) {
        push(
            out,
            "seccompProfile",
            "pod must not set securityContext.seccompProfile.type to \"Unconfined\"".into(),
        );
    } else if !bad.is_empty() {
        push(
            out,
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
                named_containers(&bad)
            ),
        );
    }
}

/// `sysctls` (baseline): only the namespaced sysctls Kubernetes deems safe.
fn sysctls(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let unsafe_sysctls: Vec<String> = pod.psc["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| !SAFE_SYSCTLS.contains(n))
        .map(str::to_string)
        .collect();
    if !unsafe_sysctls.is_empty() {
        push(out, "forbidden sysctls", unsafe_sysctls.join(", "));
    }
}

/// `allowPrivilegeEscalation` (restricted): every container sets it false.
fn allow_privilege_escalation(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let bad = pod.containers_where(|c| {
        c.pointer("/securityContext/allowPrivilegeEscalation") != Some(&Value::Bool(false))
    });
    if !bad.is_empty() {
        push(
            out,
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                named_containers(&bad)
            ),
        );
    }
}

/// `capabilities_restricted`: every container drops ALL and adds nothing
/// but NET_BIND_SERVICE.
fn capabilities_restricted(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let mut not_dropped = Vec::new();
    let mut details_add = Vec::new();
    for c in &pod.containers {
        let caps = c.pointer("/securityContext/capabilities");
        let drops_all = caps
            .and_then(|c| c["drop"].as_array())
            .is_some_and(|d| d.iter().any(|x| x == "ALL"));
        if !drops_all {
            not_dropped.push(name(c));
        }
        let added: Vec<String> = caps
            .and_then(|c| c["add"].as_array())
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|cap| *cap != "NET_BIND_SERVICE")
            .map(str::to_string)
            .collect();
        if !added.is_empty() {
            details_add.push(format!(
                "container {:?} must not include {} in securityContext.capabilities.add",
                name(c),
                quote(&added)
            ));
        }
    }
    let mut details = Vec::new();
    if !not_dropped.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            named_containers(&not_dropped)
        ));
    }
    details.extend(details_add);
    if !details.is_empty() {
        push(out, "unrestricted capabilities", details.join("; "));
    }
}

/// `restrictedVolumes`: only the volume types that carry no host access.
fn restricted_volumes(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for v in &pod.volumes {
        let kind = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .find(|k| *k != "name");
        if let Some(kind) = kind.filter(|k| !RESTRICTED_VOLUMES.contains(k)) {
            bad.push(name(v));
            if !types.contains(&kind.to_string()) {
                types.push(kind.to_string());
            }
        }
    }
    if !bad.is_empty() {
        push(
            out,
            "restricted volume types",
            format!(
                "{} {} {} restricted volume {} {}",
                plural("volume", "volumes", bad.len()),
                quote(&bad),
                plural("uses", "use", bad.len()),
                plural("type", "types", types.len()),
                quote(&types)
            ),
        );
    }
}

/// `runAsNonRoot` (restricted): the pod or every container says non-root.
fn run_as_non_root(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let pod_non_root = pod.psc["runAsNonRoot"].as_bool();
    let mut details = Vec::new();
    if pod_non_root == Some(false) {
        details.push("pod must not set securityContext.runAsNonRoot=false".to_string());
    }
    let explicit_false = pod.containers_where(|c| {
        c.pointer("/securityContext/runAsNonRoot") == Some(&Value::Bool(false))
    });
    if !explicit_false.is_empty() {
        details.push(format!(
            "{} must not set securityContext.runAsNonRoot=false",
            named_containers(&explicit_false)
        ));
    }
    if pod_non_root != Some(true) {
        let unset = pod.containers_where(|c| c.pointer("/securityContext/runAsNonRoot").is_none());
        if !unset.is_empty() {
            details.push(format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                named_containers(&unset)
            ));
        }
    }
    if !details.is_empty() {
        push(out, "runAsNonRoot != true", details.join("; "));
    }
}

/// `runAsUser` (restricted): no pod or container runs as UID 0.
fn run_as_user(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let mut details = Vec::new();
    if pod.psc["runAsUser"] == 0 {
        details.push("pod must not set runAsUser=0".to_string());
    }
    let root =
        pod.containers_where(|c| c.pointer("/securityContext/runAsUser") == Some(&Value::from(0)));
    if !root.is_empty() {
        details.push(format!(
            "{} must not set runAsUser=0",
            named_containers(&root)
        ));
    }
    if !details.is_empty() {
        push(out, "runAsUser=0", details.join("; "));
    }
}

/// `seccompProfile_restricted`: a RuntimeDefault or Localhost profile,
/// set on the pod or on every container.
fn seccomp_profile_restricted(pod: &PodView<'_>, out: &mut Vec<Violation>) {
    let ok = |t: Option<&Value>| {
        t.and_then(Value::as_str)
            .is_some_and(|t| t == "RuntimeDefault" || t == "Localhost")
    };
    let pod_ok = ok(pod.psc.pointer("/seccompProfile/type"));
    let bad = pod.containers_where(
        |c| match c.pointer("/securityContext/seccompProfile/type") {
            Some(t) => !ok(Some(t)),
            None => !pod_ok,
        },
    );
    if !bad.is_empty() {
        let who = if pod_ok { "" } else { "pod or " };
        push(out, "seccompProfile", format!("{who}{} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"", named_containers(&bad)));
    }
}

/// `violates PodSecurity "restricted:latest": reason (detail), ...`.
pub fn message(level: Level, version: &str, violations: &[Violation]) -> String {
    let list = violations
        .iter()
        .map(|(r, d)| format!("{r} ({d})"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "violates PodSecurity \"{}:{version}\": {list}",
        level.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(extra: Value) -> Value {
        let mut c = json!({"name": "c", "image": "busybox"});
        if let Some(m) = extra.as_object() {
            for (k, v) in m {
                c[k] = v.clone();
            }
        }
        c
    }

    #[test]
    fn a_privileged_pod_in_restricted_gets_kubernetes_words() {
        let spec = json!({"containers": [c(json!({"securityContext": {"privileged": true}}))]});
        let v = check(Level::Restricted, &spec);
        assert_eq!(
            message(Level::Restricted, "latest", &v),
            "violates PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        assert_eq!(
            check(Level::Baseline, &spec),
            vec![(
                "privileged".to_string(),
                "container \"c\" must not set securityContext.privileged=true".to_string()
            )]
        );
        assert!(check(Level::Privileged, &spec).is_empty());
    }

    #[test]
    fn host_paths_ports_and_namespaces() {
        let spec = json!({"hostNetwork": true, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                          "containers": [c(json!({"ports": [{"containerPort": 80, "hostPort": 80}]}))]});
        let v = check(Level::Baseline, &spec);
        assert_eq!(
            v,
            vec![
                (
                    "host namespaces".to_string(),
                    "hostNetwork=true".to_string()
                ),
                (
                    "hostPath volumes".to_string(),
                    "volume \"root\"".to_string()
                ),
                (
                    "hostPort".to_string(),
                    "container \"c\" uses hostPort 80".to_string()
                ),
            ]
        );
        let r = check(Level::Restricted, &spec);
        assert!(
            r.contains(&(
                "restricted volume types".to_string(),
                "volume \"root\" uses restricted volume type \"hostPath\"".to_string()
            )),
            "{r:?}"
        );
        assert!(!r.iter().any(|(reason, _)| reason == "hostPath volumes"));
    }

    #[test]
    fn a_compliant_pod_passes_restricted() {
        let spec = json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [c(json!({"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}))]});
        assert_eq!(check(Level::Restricted, &spec), Vec::<Violation>::new());
        let root = json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [c(json!({"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}))]});
        assert_eq!(
            check(Level::Restricted, &root),
            vec![(
                "runAsUser=0".to_string(),
                "pod must not set runAsUser=0".to_string()
            )]
        );
    }
}
