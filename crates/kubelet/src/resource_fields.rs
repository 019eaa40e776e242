//! The downward API's `resourceFieldRef`: a container's CPU, memory or
//! ephemeral-storage requests and limits, in an environment variable or a
//! downwardAPI volume file, as the real kubelet computes them: divided by
//! the `divisor` (default 1) and rounded up; a limit the container does not
//! set is the node's allocatable.
//!
//! ```text
//!  limits.cpu 250m, divisor 1m ──▶ "250"     limits.cpu 250m, divisor 1 ──▶ "1"
//!  limits.memory unset          ──▶ the node's allocatable memory, in bytes
//! ```

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
use minik8s_api::quantity::Quantity;
use std::collections::BTreeMap;

/// What `resourceFieldRef` reads: each container's resources and the node's
/// allocatable (cpu millicores, memory bytes).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ResourceView {
    pub allocatable: (i64, i64),
    pub containers: BTreeMap<String, ResourceRequirements>,
}

impl ResourceView {
    pub fn of(pod: &Pod, allocatable: (i64, i64)) -> ResourceView {
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
            .map(|c| (c.name.clone(), c.resources.clone().unwrap_or_default()))
            .collect();
        ResourceView {
            allocatable,
            containers,
        }
    }

    /// The value of `resource` (`limits.cpu`, `requests.memory`...) of a
    /// container, divided by `divisor`. Err: what the kubelet reports.
    pub fn value(
        &self,
        container: &str,
        resource: &str,
        divisor: Option<&Q>,
    ) -> Result<String, String> {
        let requirements = self
            .containers
            .get(container)
            .ok_or_else(|| format!("container {container:?} not found"))?;
        let (list, name) = resource
            .split_once('.')
            .ok_or_else(|| format!("unsupported container resource : {resource}"))?;
        let amounts = match list {
            "limits" => requirements.limits.as_ref(),
            "requests" => requirements.requests.as_ref(),
            _ => return Err(format!("unsupported container resource : {resource}")),
        };
        let quantity = |q: Option<&Q>| q.and_then(|q| Quantity::parse(&q.0).ok());
        let divisor = quantity(divisor)
            .filter(|d| d.0 > 0.0)
            .unwrap_or(Quantity(1.0));
        let set = quantity(amounts.and_then(|l| l.get(name)));
        match name {
            "cpu" => {
                let millis = match set {
                    Some(q) => q.millis(),
                    None if list == "limits" => self.allocatable.0,
                    None => 0,
                };
                let per = divisor.millis().max(1);
                Ok(((millis + per - 1) / per).to_string())
            }
            "memory" | "ephemeral-storage" => {
                let bytes = match set {
                    Some(q) => q.units(),
                    None if list == "limits" && name == "memory" => self.allocatable.1,
                    None => 0,
                };
                let per = divisor.units().max(1);
                Ok(((bytes + per - 1) / per).to_string())
            }
            _ if name.starts_with("hugepages-") => {
                let bytes = set.map_or(0, |q| q.units());
                let per = divisor.units().max(1);
                Ok(((bytes + per - 1) / per).to_string())
            }
            _ => Err(format!("unsupported container resource : {resource}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_divided_rounded_up_and_default_to_the_node() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "1250m"}}}]}}))
        .unwrap();
        let view = ResourceView::of(&pod, (2000, 8 << 30));
        let q = |s: &str| Q(s.to_string());
        assert_eq!(view.value("c", "limits.cpu", None).unwrap(), "2");
        assert_eq!(
            view.value("c", "limits.cpu", Some(&q("1m"))).unwrap(),
            "1250"
        );
        assert_eq!(
            view.value("c", "requests.cpu", Some(&q("1m"))).unwrap(),
            "250"
        );
        assert_eq!(
            view.value("c", "requests.memory", Some(&q("1Mi"))).unwrap(),
            "32"
        );
        assert_eq!(
            view.value("c", "limits.memory", None).unwrap(),
            (8u64 << 30).to_string()
        );
        assert_eq!(
            view.value("c", "requests.ephemeral-storage", None).unwrap(),
            "0"
        );
        assert!(view.value("c", "limits.gpu", None).is_err());
        assert!(view.value("other", "limits.cpu", None).is_err());
    }
}
