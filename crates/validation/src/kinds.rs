//! Each built-in kind's defaults, validation and field selectors, found by
//! its type: the apiserver's strategy for kind `K` asks `K`'s [`KindRules`]
//! (`crate::default::<K>`, `crate::validate::<K>`), so no kind is looked up
//! by its name and a kind without an impl does not compile. The rules
//! themselves live by group (`pod.rs`, `apps.rs`, `service.rs`, ...,
//! `defaults.rs`); each impl here says which apply to its kind.

use super::*;
use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration_v1, apps::v1 as apps_v1,
    autoscaling::v2 as autoscaling_v2, batch::v1 as batch_v1, certificates::v1 as certificates_v1,
    coordination::v1 as coordination_v1, core::v1 as core_v1, discovery::v1 as discovery_v1,
    networking::v1 as networking_v1, node::v1 as node_v1, policy::v1 as policy_v1,
    rbac::v1 as rbac_v1, resource::v1 as resource_v1, scheduling::v1 as scheduling_v1,
    scheduling::v1beta1 as scheduling_v1beta1, storage::v1 as storage_v1,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions_v1;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration_v1;

/// Where in an object its pod spec is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSpecAt {
    /// The object is a Pod: `spec`.
    Pod,
    /// A workload's template, at this JSON pointer.
    Template(&'static str),
}

impl PodSpecAt {
    /// The pod spec in `obj`, if it has one there.
    pub fn find(self, obj: &Value) -> Option<&Value> {
        match self {
            PodSpecAt::Pod => obj.get("spec"),
            PodSpecAt::Template(pointer) => obj.pointer(pointer),
        }
    }
}

/// The pod template of a ReplicaSet, Deployment, StatefulSet, DaemonSet,
/// Job and ReplicationController.
const TEMPLATE: Option<PodSpecAt> = Some(PodSpecAt::Template("/spec/template/spec"));

/// A kind's own validation on its typed object: Kubernetes' `Validate<Kind>`,
/// and `Validate<Kind>Update` when `old`, the stored object, is given.
pub type Rules<K> = fn(obj: &K, old: Option<&K>, errs: &mut Errors);

/// What differs between built-in kinds before an object is stored. Every
/// method has the behaviour of a kind with no rules of its own.
pub trait KindRules: k8s_openapi::Resource + serde::de::DeserializeOwned {
    /// Where an object of the kind carries a pod spec (Pod Security checks
    /// it): a pod's own, or a workload's pod template.
    const POD_SPEC: Option<PodSpecAt> = None;

    /// Fields a fieldSelector may name besides `metadata.name` and
    /// `metadata.namespace` (Kubernetes' `AddFieldLabelConversionFunc`s).
    const FIELD_SELECTORS: &'static [&'static str] = &[];

    /// What Kubernetes fills in when a field is left out (its
    /// `SetDefaults_*`); `obj` is a JSON object.
    fn apply_defaults(_obj: &mut Value) {}

    /// The kind's own rules, on the object decoded as its k8s-openapi type
    /// (a kind without them costs no decoding).
    const RULES: Option<Rules<Self>> = None;
}

impl KindRules for core_v1::Namespace {
    const FIELD_SELECTORS: &'static [&'static str] = &["status.phase"];

    fn apply_defaults(obj: &mut Value) {
        defaults::namespace(obj);
    }
}

impl KindRules for core_v1::Pod {
    const POD_SPEC: Option<PodSpecAt> = Some(PodSpecAt::Pod);

    const FIELD_SELECTORS: &'static [&'static str] = &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ];

    fn apply_defaults(obj: &mut Value) {
        defaults::pod(obj);
    }

    const RULES: Option<Rules<Self>> = Some(pod::validate_pod);
}

impl KindRules for core_v1::Node {
    const FIELD_SELECTORS: &'static [&'static str] = &["spec.unschedulable"];

    const RULES: Option<Rules<Self>> = Some(node::validate_node);
}

impl KindRules for core_v1::Service {
    fn apply_defaults(obj: &mut Value) {
        defaults::service(obj);
    }

    const RULES: Option<Rules<Self>> = Some(service::validate_service);
}

impl KindRules for core_v1::ReplicationController {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    fn apply_defaults(obj: &mut Value) {
        defaults::replication_controller(obj);
    }

    const RULES: Option<Rules<Self>> = Some(apps::validate_replication_controller);
}

impl KindRules for core_v1::PodTemplate {
    const POD_SPEC: Option<PodSpecAt> = Some(PodSpecAt::Template("/template/spec"));

    fn apply_defaults(obj: &mut Value) {
        defaults::pod_template(obj);
    }

    const RULES: Option<Rules<Self>> = Some(pod::validate_pod_template);
}

impl KindRules for scheduling_v1::PriorityClass {
    fn apply_defaults(obj: &mut Value) {
        defaults::priority_class(obj);
    }

    const RULES: Option<Rules<Self>> = Some(scheduling::validate_priority_class);
}

impl KindRules for node_v1::RuntimeClass {
    const RULES: Option<Rules<Self>> = Some(node::validate_runtime_class);
}

impl KindRules for core_v1::ResourceQuota {
    const RULES: Option<Rules<Self>> = Some(quota::validate_resource_quota);
}

impl KindRules for core_v1::LimitRange {
    fn apply_defaults(obj: &mut Value) {
        defaults::limit_range(obj);
    }

    const RULES: Option<Rules<Self>> = Some(quota::validate_limit_range);
}

impl KindRules for core_v1::ConfigMap {
    const RULES: Option<Rules<Self>> = Some(config::validate_config_map);
}

impl KindRules for core_v1::Secret {
    fn apply_defaults(obj: &mut Value) {
        defaults::secret(obj);
    }

    const RULES: Option<Rules<Self>> = Some(config::validate_secret);
}

impl KindRules for core_v1::ServiceAccount {}

impl KindRules for core_v1::PersistentVolume {
    fn apply_defaults(obj: &mut Value) {
        defaults::persistent_volume(obj);
    }

    const RULES: Option<Rules<Self>> = Some(storage::validate_pv);
}

impl KindRules for core_v1::PersistentVolumeClaim {
    fn apply_defaults(obj: &mut Value) {
        defaults::persistent_volume_claim(obj);
    }

    const RULES: Option<Rules<Self>> = Some(storage::validate_pvc);
}

impl KindRules for storage_v1::StorageClass {
    fn apply_defaults(obj: &mut Value) {
        defaults::storage_class(obj);
    }

    const RULES: Option<Rules<Self>> = Some(storage::validate_storage_class);
}

impl KindRules for storage_v1::CSIStorageCapacity {
    const RULES: Option<Rules<Self>> = Some(storage::validate_csi_storage_capacity);
}

impl KindRules for resource_v1::DeviceClass {
    const RULES: Option<Rules<Self>> = Some(resource::validate_device_class);
}

impl KindRules for resource_v1::ResourceClaim {
    const RULES: Option<Rules<Self>> = Some(resource::validate_resource_claim);
}

impl KindRules for resource_v1::ResourceClaimTemplate {
    const RULES: Option<Rules<Self>> = Some(resource::validate_resource_claim_template);
}

impl KindRules for resource_v1::ResourceSlice {
    const FIELD_SELECTORS: &'static [&'static str] = &["spec.nodeName", "spec.driver"];

    const RULES: Option<Rules<Self>> = Some(resource::validate_resource_slice);
}

impl KindRules for scheduling_v1beta1::Workload {
    const RULES: Option<Rules<Self>> = Some(scheduling::validate_workload);
}

impl KindRules for scheduling_v1beta1::PodGroup {
    const RULES: Option<Rules<Self>> = Some(scheduling::validate_pod_group);
}

impl KindRules for core_v1::Endpoints {
    fn apply_defaults(obj: &mut Value) {
        defaults::endpoints(obj);
    }
}

impl KindRules for core_v1::Event {
    const FIELD_SELECTORS: &'static [&'static str] = &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
}

impl KindRules for discovery_v1::EndpointSlice {
    fn apply_defaults(obj: &mut Value) {
        defaults::endpoint_slice(obj);
    }

    const RULES: Option<Rules<Self>> = Some(service::validate_endpoint_slice);
}

impl KindRules for coordination_v1::Lease {}

impl KindRules for apps_v1::Deployment {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    fn apply_defaults(obj: &mut Value) {
        defaults::deployment(obj);
    }

    const RULES: Option<Rules<Self>> = Some(apps::validate_deployment);
}

impl KindRules for apps_v1::DaemonSet {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    fn apply_defaults(obj: &mut Value) {
        defaults::daemon_set(obj);
    }

    const RULES: Option<Rules<Self>> = Some(apps::validate_daemon_set);
}

impl KindRules for apps_v1::ReplicaSet {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    const FIELD_SELECTORS: &'static [&'static str] = &["status.replicas"];

    fn apply_defaults(obj: &mut Value) {
        defaults::replica_set(obj);
    }

    const RULES: Option<Rules<Self>> = Some(apps::validate_replica_set);
}

impl KindRules for apps_v1::StatefulSet {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    fn apply_defaults(obj: &mut Value) {
        defaults::stateful_set(obj);
    }

    const RULES: Option<Rules<Self>> = Some(apps::validate_stateful_set);
}

impl KindRules for apps_v1::ControllerRevision {}

impl KindRules for autoscaling_v2::HorizontalPodAutoscaler {
    fn apply_defaults(obj: &mut Value) {
        defaults::horizontal_pod_autoscaler(obj);
    }

    const RULES: Option<Rules<Self>> = Some(autoscaling::validate_hpa);
}

impl KindRules for batch_v1::Job {
    const POD_SPEC: Option<PodSpecAt> = TEMPLATE;

    fn apply_defaults(obj: &mut Value) {
        defaults::job(obj);
    }

    const RULES: Option<Rules<Self>> = Some(batch::validate_job);
}

impl KindRules for batch_v1::CronJob {
    const POD_SPEC: Option<PodSpecAt> =
        Some(PodSpecAt::Template("/spec/jobTemplate/spec/template/spec"));

    fn apply_defaults(obj: &mut Value) {
        defaults::cron_job(obj);
    }

    const RULES: Option<Rules<Self>> = Some(batch::validate_cron_job);
}

impl KindRules for policy_v1::PodDisruptionBudget {
    const RULES: Option<Rules<Self>> = Some(policy::validate_pdb);
}

impl KindRules for networking_v1::Ingress {
    const RULES: Option<Rules<Self>> = Some(networking::validate_ingress);
}

impl KindRules for networking_v1::IngressClass {
    fn apply_defaults(obj: &mut Value) {
        defaults::ingress_class(obj);
    }

    const RULES: Option<Rules<Self>> = Some(networking::validate_ingress_class);
}

impl KindRules for networking_v1::NetworkPolicy {
    fn apply_defaults(obj: &mut Value) {
        defaults::network_policy(obj);
    }

    const RULES: Option<Rules<Self>> = Some(network_policy::validate_network_policy);
}

impl KindRules for networking_v1::ServiceCIDR {
    const RULES: Option<Rules<Self>> = Some(service_cidr::validate_service_cidr);
}

impl KindRules for networking_v1::IPAddress {
    const RULES: Option<Rules<Self>> = Some(service_cidr::validate_ip_address);
}

impl KindRules for minik8s_api::lws::LeaderWorkerSet {
    const POD_SPEC: Option<PodSpecAt> = Some(PodSpecAt::Template(
        "/spec/leaderWorkerTemplate/workerTemplate/spec",
    ));

    fn apply_defaults(obj: &mut Value) {
        lws::default(obj);
    }

    const RULES: Option<Rules<Self>> = Some(lws::validate_leader_worker_set);
}

impl KindRules for minik8s_api::disaggregatedset::DisaggregatedSet {
    const RULES: Option<Rules<Self>> = Some(disaggregatedset::validate_disaggregated_set);
}

impl KindRules for minik8s_api::disaggregatedset::DisaggregatedSetRoleScaler {}

impl KindRules for minik8s_api::podgroup::PodGroup {
    const RULES: Option<Rules<Self>> = Some(scheduling::validate_volcano_pod_group);
}

impl KindRules for minik8s_api::serverless::Function {}

impl KindRules for minik8s_api::workflow::Workflow {}

impl KindRules for minik8s_api::workflow::WorkflowRun {}

impl KindRules for rbac_v1::Role {
    const RULES: Option<Rules<Self>> = Some(rbac::validate_role);
}

impl KindRules for rbac_v1::RoleBinding {
    const RULES: Option<Rules<Self>> = Some(rbac::validate_role_binding);
}

impl KindRules for rbac_v1::ClusterRole {
    const RULES: Option<Rules<Self>> = Some(rbac::validate_cluster_role);
}

impl KindRules for rbac_v1::ClusterRoleBinding {
    const RULES: Option<Rules<Self>> = Some(rbac::validate_cluster_role_binding);
}

impl KindRules for certificates_v1::CertificateSigningRequest {}

impl KindRules for apiextensions_v1::CustomResourceDefinition {}

impl KindRules for admissionregistration_v1::MutatingWebhookConfiguration {
    fn apply_defaults(obj: &mut Value) {
        admission::default_webhooks(obj, true);
    }

    const RULES: Option<Rules<Self>> = Some(admission::validate_mutating_webhooks);
}

impl KindRules for admissionregistration_v1::ValidatingWebhookConfiguration {
    fn apply_defaults(obj: &mut Value) {
        admission::default_webhooks(obj, false);
    }

    const RULES: Option<Rules<Self>> = Some(admission::validate_validating_webhooks);
}

impl KindRules for admissionregistration_v1::ValidatingAdmissionPolicy {
    fn apply_defaults(obj: &mut Value) {
        admission::default_policy(obj);
    }

    const RULES: Option<Rules<Self>> = Some(admission::validate_policy);
}

impl KindRules for admissionregistration_v1::ValidatingAdmissionPolicyBinding {
    const RULES: Option<Rules<Self>> = Some(admission::validate_binding);
}

impl KindRules for admissionregistration_v1::MutatingAdmissionPolicy {
    fn apply_defaults(obj: &mut Value) {
        mutating_policy::default_mutating_policy(obj);
    }

    const RULES: Option<Rules<Self>> = Some(mutating_policy::validate_mutating_policy);
}

impl KindRules for admissionregistration_v1::MutatingAdmissionPolicyBinding {
    const RULES: Option<Rules<Self>> = Some(mutating_policy::validate_mutating_binding);
}

impl KindRules for apiregistration_v1::APIService {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(errs: Errors) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn each_kind_gets_its_own_rules_by_type() {
        // A namespaced Role may not grant non-resource URLs; a ClusterRole may.
        let rule = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert_eq!(
            fields(crate::validate::<rbac_v1::Role>(&rule, None)),
            ["rules[0].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs"]
        );
        assert!(crate::validate::<rbac_v1::ClusterRole>(&rule, None).is_empty());
        // A kind with no rules of its own still refuses what minik8s does not do.
        assert!(
            crate::validate::<core_v1::ConfigMap>(&json!({"data": {"a": "b"}}), None).is_empty()
        );
        let mut lease = json!({"spec": {}});
        crate::default::<coordination_v1::Lease>(&mut lease);
        assert_eq!(lease, json!({"spec": {}}), "no defaults of its own");
    }

    #[test]
    fn field_selectors_are_the_kinds_own_plus_name_and_namespace() {
        let pod = crate::field_selectors::<core_v1::Pod>();
        assert!(pod.contains(&"spec.nodeName") && pod.contains(&"metadata.namespace"));
        assert_eq!(
            crate::field_selectors::<core_v1::Node>(),
            ["metadata.name", "metadata.namespace", "spec.unschedulable"]
        );
        assert_eq!(
            crate::field_selectors::<core_v1::ConfigMap>(),
            ["metadata.name", "metadata.namespace"]
        );
    }

    #[test]
    fn a_kind_says_where_its_pod_spec_is() {
        let spec = json!({"containers": [{"name": "c", "image": "i"}]});
        let pod = json!({"spec": spec});
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}});
        let deployment = json!({"spec": {"template": {"spec": spec}}});
        let find = |at: Option<PodSpecAt>, obj: &Value| at.and_then(|at| at.find(obj)).cloned();
        assert_eq!(find(core_v1::Pod::POD_SPEC, &pod), Some(spec.clone()));
        assert_eq!(find(batch_v1::CronJob::POD_SPEC, &cron), Some(spec.clone()));
        assert_eq!(
            find(apps_v1::Deployment::POD_SPEC, &deployment),
            Some(spec.clone())
        );
        // Kubernetes' Pod Security checks PodTemplates too (warnings only).
        let template = json!({"template": {"spec": spec}});
        assert_eq!(find(core_v1::PodTemplate::POD_SPEC, &template), Some(spec));
        assert_eq!(core_v1::ConfigMap::POD_SPEC, None);
        assert_eq!(core_v1::Pod::POD_SPEC, Some(PodSpecAt::Pod));
    }

    #[test]
    fn defaults_skip_what_is_not_an_object() {
        let mut not_an_object = json!("pod");
        crate::default::<core_v1::Pod>(&mut not_an_object);
        assert_eq!(not_an_object, json!("pod"));
    }
}

#[cfg(test)]
#[path = "kinds_tests.rs"]
mod kind_rules_tests;
