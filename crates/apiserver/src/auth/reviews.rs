//! The review APIs: questions to the authenticator and the authorizer,
//! answered without storing anything (create-only, as in Kubernetes).
//!
//! ```text
//!  authorization.k8s.io/v1  subjectaccessreviews          "may USER do X?"      (system:auth-delegator)
//!                           localsubjectaccessreviews     the same, in one namespace (admin)
//!                           selfsubjectaccessreviews      "may I do X?"         (kubectl auth can-i)
//!                           selfsubjectrulesreviews       "what may I do here?" (kubectl auth can-i --list)
//!  authentication.k8s.io/v1 tokenreviews                  "whose token is this?"
//!                           selfsubjectreviews            "who am I?"           (kubectl auth whoami)
//! ```

use super::request_info::Attributes;
use super::{user_json, UserInfo};
use crate::ApiServer;
use minik8s_api::registry::ResourceInfo;
use minik8s_api::ApiError;
use minik8s_validation::FieldError;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const AUTHORIZATION: &str = "authorization.k8s.io";
pub const AUTHENTICATION: &str = "authentication.k8s.io";

const fn review(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceInfo {
    use std::borrow::Cow::Borrowed;
    ResourceInfo {
        group: Borrowed(group),
        version: Borrowed("v1"),
        kind: Borrowed(kind),
        plural: Borrowed(plural),
        singular: Borrowed(singular),
        short_names: Borrowed(&[]),
        namespaced,
        subresources: Borrowed(&[]),
        categories: Borrowed(&[]),
        columns: Borrowed(&[]),
    }
}

/// The review resources (create-only, never stored), described like the
/// registry's so discovery and OpenAPI list them the same way.
pub static REVIEWS: &[ResourceInfo] = &[
    review(
        AUTHORIZATION,
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
    ),
    review(
        AUTHORIZATION,
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
    ),
    review(
        AUTHORIZATION,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
    ),
    review(
        AUTHORIZATION,
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
    ),
    review(
        AUTHENTICATION,
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        false,
    ),
    review(
        AUTHENTICATION,
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
    ),
];

/// The review a path names, and the namespace in it.
pub fn route(path: &str) -> Option<(&'static ResourceInfo, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["apis", g, "v1", rest @ ..] if *g == AUTHORIZATION || *g == AUTHENTICATION => (*g, rest),
        _ => return None,
    };
    let (ns, plural) = match rest {
        [plural] => (None, *plural),
        ["namespaces", ns, plural] => (Some(ns.to_string()), *plural),
        _ => return None,
    };
    REVIEWS
        .iter()
        .find(|r| r.group == group && r.plural == plural && r.namespaced == ns.is_some())
        .map(|r| (r, ns))
}

/// The discovery list of a review group.
pub fn resource_list(group: &str) -> Option<Value> {
    let resources: Vec<Value> = REVIEWS
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                   "kind": r.kind, "verbs": ["create"]})
        })
        .collect();
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/v1"),
               "resources": resources})
    })
}

fn invalid(kind: &str, field: &str, value: &str, why: &str) -> ApiError {
    let info = REVIEWS
        .iter()
        .find(|r| r.kind == kind)
        .unwrap_or(&REVIEWS[0]);
    let err = FieldError::invalid(field, &json!(value), why);
    ApiError::invalid(info, "", &[err])
}

/// The request attributes a review's spec describes.
fn spec_attributes(kind: &str, spec: &Value) -> Result<Attributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(r), None) if r.is_object() => Ok(Attributes {
            verb: s(r, "verb"),
            resource_request: true,
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) if n.is_object() => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Default::default()
        }),
        _ => Err(invalid(
            kind,
            "spec.resourceAttributes",
            "",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

impl ApiServer {
    /// Answers a review posted by `user`.
    pub async fn review(
        &self,
        kind: &str,
        namespace: Option<&str>,
        body: Value,
        user: &UserInfo,
    ) -> Result<Value, ApiError> {
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let group = if kind.ends_with("AccessReview") || kind.ends_with("RulesReview") {
            AUTHORIZATION
        } else {
            AUTHENTICATION
        };
        let status = match kind {
            "SelfSubjectAccessReview" => self.access_status(user, &spec_attributes(kind, &spec)?),
            "SubjectAccessReview" | "LocalSubjectAccessReview" => {
                let mut attrs = spec_attributes(kind, &spec)?;
                if let Some(ns) = namespace {
                    if !attrs.namespace.is_empty() && attrs.namespace != ns {
                        return Err(invalid(
                            kind,
                            "spec.resourceAttributes.namespace",
                            &attrs.namespace,
                            "must match metadata.namespace",
                        ));
                    }
                    attrs.namespace = ns.to_string();
                }
                let subject = UserInfo {
                    username: spec["user"].as_str().unwrap_or("").to_string(),
                    uid: spec["uid"].as_str().unwrap_or("").to_string(),
                    groups: serde_json::from_value(spec["groups"].clone()).unwrap_or_default(),
                    extra: serde_json::from_value::<BTreeMap<String, Vec<String>>>(
                        spec["extra"].clone(),
                    )
                    .unwrap_or_default(),
                };
                if subject.username.is_empty() && subject.groups.is_empty() {
                    return Err(invalid(
                        kind,
                        "spec.user",
                        "",
                        "at least one of user or group must be specified",
                    ));
                }
                self.access_status(&subject, &attrs)
            }
            "SelfSubjectRulesReview" => {
                let ns = spec["namespace"].as_str().unwrap_or("");
                self.rules_status(user, ns)
            }
            "SelfSubjectReview" => json!({"userInfo": user_json(user)}),
            "TokenReview" => {
                let token = spec["token"].as_str().unwrap_or("");
                let mut headers = axum::http::HeaderMap::new();
                if let Ok(v) = format!("Bearer {token}").parse() {
                    headers.insert(axum::http::header::AUTHORIZATION, v);
                }
                let conn = super::Connection::default();
                match self.authenticate(&headers, Some(&conn)).await {
                    Ok(Some(u)) if !token.is_empty() => {
                        json!({"authenticated": true, "user": user_json(&u),
                                                                "audiences": spec.get("audiences").cloned().unwrap_or(json!([]))})
                    }
                    _ => {
                        json!({"authenticated": false, "user": {}, "error": "[invalid bearer token]"})
                    }
                }
            }
            _ => return Err(ApiError::unknown_path()),
        };
        let mut meta = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        meta["creationTimestamp"] = Value::Null;
        let mut out = json!({"kind": kind, "apiVersion": format!("{group}/v1"), "metadata": meta, "status": status});
        if kind != "SelfSubjectReview" {
            out["spec"] = spec;
        }
        Ok(out)
    }

    fn access_status(&self, user: &UserInfo, a: &Attributes) -> Value {
        match self.authorize(user, a) {
            Ok(reason) => json!({"allowed": true, "reason": reason}),
            Err(reason) => {
                let mut s = json!({"allowed": false});
                if !reason.is_empty() {
                    s["evaluationError"] = json!(reason);
                }
                s
            }
        }
    }

    fn rules_status(&self, user: &UserInfo, namespace: &str) -> Value {
        let (rules, errors) = self.policy.policy().rules_for(user, namespace);
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        for r in rules {
            match r.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
                Some(urls) => {
                    non_resource_rules.push(json!({"verbs": r.verbs, "nonResourceURLs": urls}))
                }
                None => {
                    let mut rule = json!({"verbs": r.verbs, "apiGroups": r.api_groups.clone().unwrap_or_default(),
                                          "resources": r.resources.clone().unwrap_or_default()});
                    if let Some(names) = r.resource_names.as_ref().filter(|n| !n.is_empty()) {
                        rule["resourceNames"] = json!(names);
                    }
                    resource_rules.push(rule);
                }
            }
        }
        let mut s = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                           "incomplete": !errors.is_empty()});
        if !errors.is_empty() {
            s["evaluationError"] = json!(errors.join(", "));
        }
        s
    }
}
