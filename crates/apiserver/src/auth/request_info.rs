//! What a request asks to do, in the terms authorization decides on: Kubernetes'
//! `RequestInfo` (verb, API group, resource, subresource, namespace, name) or,
//! off the resource paths, the non-resource path and the HTTP method.
//!
//! Derived from the URL shape alone, as Kubernetes derives it, so a request for
//! a resource that does not exist is still authorized (403 before 404).

/// The attributes of one request (authorization's input).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; or for non-resource paths the lower-cased method.
    pub verb: String,
    pub resource_request: bool,
    /// The URL path (what non-resource rules match).
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Attributes {
    /// A resource request (what SubjectAccessReview's resourceAttributes describe).
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            ..Default::default()
        }
    }

    /// `pods` or `pods/log`: what RBAC rules list.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Kubernetes' RequestInfoFactory for `method` on `path` (`watch` is the
/// `watch` query flag).
pub fn parse(method: &str, path: &str, watch: bool) -> Attributes {
    let non_resource = || Attributes {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... and /apis/group/version/... are resource paths; anything
    // shorter (discovery) is not.
    let (group, version, mut rest) = match parts.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return non_resource(),
    };
    let mut verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    // The old /watch/ prefix.
    if rest[0] == "watch" {
        if verb == "get" {
            verb = "watch".into();
        }
        rest = &rest[1..];
    }
    let mut info = Attributes {
        resource_request: true,
        path: path.to_string(),
        api_group: group.into(),
        api_version: version.into(),
        ..Default::default()
    };
    if rest.first() == Some(&"namespaces") {
        if let Some(ns) = rest.get(1) {
            info.namespace = ns.to_string();
            // /namespaces/{ns}/status and /finalize are the namespace's own subresources.
            if rest.len() > 2 && rest[2] != "finalize" && rest[2] != "status" {
                rest = &rest[2..];
            }
        }
    }
    info.resource = rest.first().map(|s| s.to_string()).unwrap_or_default();
    info.name = rest.get(1).map(|s| s.to_string()).unwrap_or_default();
    info.subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
    if info.name.is_empty() {
        match verb.as_str() {
            "get" => verb = "list".into(),
            "delete" => verb = "deletecollection".into(),
            _ => {}
        }
    }
    if watch && (verb == "list" || verb == "get") {
        verb = "watch".into();
    }
    // Streams opened with GET (WebSocket) create a process in the pod.
    if matches!(info.subresource.as_str(), "exec" | "attach" | "portforward") && verb == "get" {
        verb = "create".into();
    }
    info.verb = verb;
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(method: &str, path: &str) -> (String, String, String, String, String, String) {
        let a = parse(method, path, false);
        (
            a.verb,
            a.api_group,
            a.resource,
            a.subresource,
            a.namespace,
            a.name,
        )
    }

    #[test]
    fn verbs_from_method_and_shape() {
        let s = |v: &str| v.to_string();
        assert_eq!(
            p("GET", "/api/v1/namespaces/ns1/pods"),
            (s("list"), s(""), s("pods"), s(""), s("ns1"), s(""))
        );
        assert_eq!(
            p("GET", "/api/v1/namespaces/ns1/pods/web/log"),
            (s("get"), s(""), s("pods"), s("log"), s("ns1"), s("web"))
        );
        assert_eq!(
            p("DELETE", "/apis/apps/v1/namespaces/a/deployments"),
            (
                s("deletecollection"),
                s("apps"),
                s("deployments"),
                s(""),
                s("a"),
                s("")
            )
        );
        assert_eq!(
            p("POST", "/api/v1/namespaces/a/pods/web/exec"),
            (s("create"), s(""), s("pods"), s("exec"), s("a"), s("web"))
        );
        assert_eq!(
            p("GET", "/api/v1/namespaces/a/pods/web/exec"),
            (s("create"), s(""), s("pods"), s("exec"), s("a"), s("web"))
        );
        assert_eq!(parse("GET", "/api/v1/pods", true).verb, "watch");
        assert_eq!(parse("GET", "/api/v1/watch/pods", false).verb, "watch");
    }

    #[test]
    fn namespaces_are_their_own_namespace() {
        let a = parse("GET", "/api/v1/namespaces/team", false);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "team", "team")
        );
        let a = parse("PUT", "/api/v1/namespaces/team/finalize", false);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let a = parse("GET", "/api/v1/namespaces", false);
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", ""));
    }

    #[test]
    fn discovery_and_health_are_not_resources() {
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/version",
            "/healthz",
            "/openapi/v3",
        ] {
            let a = parse("GET", path, false);
            assert!(!a.resource_request, "{path}");
            assert_eq!(a.verb, "get");
            assert_eq!(a.path, path);
        }
        assert!(!parse("GET", "/apis/apps/v1", false).resource_request);
        assert_eq!(parse("POST", "/api/v1", false).verb, "post");
    }
}
