//! Taints and tolerations, shared by the scheduler (NoSchedule, NoExecute) and
//! the node lifecycle controller (NoExecute eviction).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Does this toleration tolerate this taint? An empty key with `Exists`
/// tolerates every taint; an empty effect matches every effect.
pub fn toleration_matches(t: &Toleration, taint: &Taint) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok = t.key.as_deref().is_none_or(|k| k.is_empty())
        || t.key.as_deref() == Some(taint.key.as_str());
    let value_ok = match t.operator.as_deref() {
        Some("Exists") => true,
        _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    };
    effect_ok && key_ok && value_ok
}

/// Does any of the tolerations tolerate the taint?
pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| toleration_matches(t, taint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn matching_rules() {
        let t = taint("gpu", Some("yes"), "NoSchedule");
        assert!(toleration_matches(
            &tol(Some("gpu"), Some("Equal"), Some("yes"), None),
            &t
        ));
        assert!(!toleration_matches(
            &tol(Some("gpu"), Some("Equal"), Some("no"), None),
            &t
        ));
        assert!(toleration_matches(
            &tol(Some("gpu"), Some("Exists"), None, Some("NoSchedule")),
            &t
        ));
        assert!(!toleration_matches(
            &tol(Some("gpu"), Some("Exists"), None, Some("NoExecute")),
            &t
        ));
        assert!(
            toleration_matches(&tol(None, Some("Exists"), None, None), &t),
            "wildcard"
        );
        assert!(!toleration_matches(
            &tol(Some("disk"), Some("Exists"), None, None),
            &t
        ));
    }
}
