//! Ingress: Kubernetes' DefaultIngressClass admission. An Ingress created
//! without a class (neither `spec.ingressClassName` nor the old
//! `kubernetes.io/ingress.class` annotation) gets the cluster's default
//! IngressClass, the newest one annotated
//! `ingressclass.kubernetes.io/is-default-class: "true"`.

use super::Context;
use minik8s_validation::FieldError;
use serde_json::{json, Value};

pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The default IngressClass's name, if one is marked.
pub fn default_class(ctx: &Context) -> Option<String> {
    ctx.ingress_classes
        .all()
        .into_iter()
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .and_then(Value::as_str)
                == Some("true")
        })
        .max_by_key(|c| {
            (
                c.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                minik8s_api::meta::name(c).to_string(),
            )
        })
        .map(|c| minik8s_api::meta::name(&c).to_string())
}

pub struct Ingress;

impl super::Strategy for Ingress {
    fn prepare_for_create(&self, ctx: &Context, obj: &mut Value) -> Result<(), FieldError> {
        let has_class = obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|c| !c.is_null());
        let annotated = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get("kubernetes.io/ingress.class"))
            .is_some();
        if !has_class && !annotated {
            if let Some(class) = default_class(ctx) {
                if obj["spec"].is_object() {
                    obj["spec"]["ingressClassName"] = json!(class);
                }
            }
        }
        Ok(())
    }
}
