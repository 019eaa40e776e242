//! Roles, ClusterRoles and their bindings: names are URL path segments
//! (`system:basic-user`), as Kubernetes' ValidateRBACName allows. Escalation
//! prevention needs the writer, so it runs as admission (`auth/escalation.rs`).

use super::Strategy;
use minik8s_validation::NameRule;

pub struct Lifecycle;

impl Strategy for Lifecycle {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}
