//! The one table that describes every built-in resource.
//!
//! Routing, discovery, OpenAPI, storage keys, kubectl's aliases and the Table
//! columns are all derived from it; adding a kind means adding one entry here
//! plus its defaulting/validation. The apiserver serves from a [`Registry`]:
//! this table plus kinds registered while it runs. Clients know the built-ins
//! by type ([`of`]) and everything else through discovery.

mod columns;
mod live;
use columns::*;
pub use live::{ColumnSpec, Registry, RegistryError, ResourceSpec};

/// A subresource served under `<resource>/<name>/<sub>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// `status`: writes change only `.status`.
    Status,
    /// `scale`: an `autoscaling/v1` `Scale` view of `spec.replicas`.
    Scale,
    /// `log`: pod logs, proxied to the kubelet.
    Log,
    /// `binding`: the scheduler's way to set `spec.nodeName`.
    Binding,
    /// `exec`: a command in a pod's container over an upgraded connection,
    /// proxied to the kubelet.
    Exec,
    /// `attach`: the streams of a container's own process, proxied the same way.
    Attach,
    /// `portforward`: TCP connections to the pod's ports, proxied the same way.
    PortForward,
    /// `eviction`: a deletion that respects PodDisruptionBudgets (`kubectl drain`).
    Eviction,
    /// `ephemeralcontainers`: debugging containers added to a running pod (`kubectl debug`).
    EphemeralContainers,
    /// `resize`: a running pod's container CPU and memory, changed in place.
    Resize,
    /// `approval`: a CertificateSigningRequest's Approved/Denied conditions.
    Approval,
    /// `token`: a ServiceAccount's TokenRequest.
    Token,
}

impl Subresource {
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Log => "log",
            Subresource::Binding => "binding",
            Subresource::Exec => "exec",
            Subresource::Attach => "attach",
            Subresource::PortForward => "portforward",
            Subresource::Eviction => "eviction",
            Subresource::EphemeralContainers => "ephemeralcontainers",
            Subresource::Resize => "resize",
            Subresource::Approval => "approval",
            Subresource::Token => "token",
        }
    }

    /// Verbs as discovery lists them.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status
            | Subresource::Scale
            | Subresource::EphemeralContainers
            | Subresource::Resize
            | Subresource::Approval => &["get", "patch", "update"],
            Subresource::Log => &["get"],
            Subresource::Binding | Subresource::Eviction | Subresource::Token => &["create"],
            Subresource::Exec | Subresource::Attach | Subresource::PortForward => {
                &["create", "get"]
            }
        }
    }
}

/// A printer column of the server-side Table (`kubectl get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: i32,
    pub description: &'static str,
}

const fn col(name: &'static str, priority: i32) -> Column {
    Column {
        name,
        kind: "string",
        priority,
        description: "",
    }
}

/// Everything the system knows about one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    pub subresources: &'static [Subresource],
    pub categories: &'static [&'static str],
    /// Table columns after NAME (which every table has first, unless its columns
    /// list "Name" themselves, as Events do: last and wide only).
    pub columns: &'static [Column],
}

impl ResourceInfo {
    /// Whether this is kind `K` (its group and kind), typed: a branch on a
    /// kind names its type rather than a string.
    pub fn is<K: k8s_openapi::Resource>(&self) -> bool {
        self.group == K::GROUP && self.kind == K::KIND
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `/api/v1` or `/apis/apps/v1`.
    pub fn gv_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The collection URL (namespace `None` = all namespaces or cluster scope).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => {
                format!("{}/namespaces/{}/{}", self.gv_path(), ns, self.plural)
            }
            _ => format!("{}/{}", self.gv_path(), self.plural),
        }
    }

    pub fn object_path(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{}", self.collection_path(namespace), name)
    }

    /// `pods` or `replicasets.apps`, the form used in Status messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Storage key prefix: `/registry/<group>/<plural>/` (+ `<ns>/`).
    pub fn key_prefix(&self, namespace: Option<&str>) -> String {
        let all = storage_prefix(self.group, self.plural);
        match namespace {
            Some(ns) if self.namespaced => format!("{all}{ns}/"),
            _ => all,
        }
    }

    /// Storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{}", self.key_prefix(namespace), name)
    }

    pub fn has(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// Does `name` (plural, singular, short name or kind, any case) denote this resource?
    pub fn matches_alias(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        lower == self.plural
            || lower == self.singular
            || lower == self.kind.to_ascii_lowercase()
            || self.short_names.contains(&lower.as_str())
            || lower == format!("{}.{}", self.plural, self.group)
    }
}

use Subresource::*;

/// Every resource served, in discovery order.
pub static REGISTRY: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
        subresources: &[Status],
        categories: &[],
        columns: NAMESPACE_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        namespaced: true,
        subresources: &[
            Status,
            Log,
            Binding,
            Exec,
            Attach,
            PortForward,
            Eviction,
            EphemeralContainers,
            Resize,
        ],
        categories: &["all"],
        columns: POD_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        namespaced: false,
        subresources: &[Status],
        categories: &[],
        columns: NODE_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: SERVICE_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        short_names: &["rc"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &["all"],
        columns: REPLICASET_COLUMNS,
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        short_names: &["pc"],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: PRIORITYCLASS_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        singular: "podtemplate",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: PODTEMPLATE_COLUMNS,
    },
    ResourceInfo {
        group: "node.k8s.io",
        version: "v1",
        kind: "RuntimeClass",
        plural: "runtimeclasses",
        singular: "runtimeclass",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: RUNTIMECLASS_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        short_names: &["quota"],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: RESOURCEQUOTA_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        short_names: &["limits"],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: LIMITRANGE_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: CONFIGMAP_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: SECRET_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        namespaced: false,
        subresources: &[Status],
        categories: &[],
        columns: PV_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: PVC_COLUMNS,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIStorageCapacity",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: CSI_STORAGE_CAPACITY_COLUMNS,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        short_names: &["sc"],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: STORAGECLASS_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        namespaced: true,
        subresources: &[Token],
        categories: &[],
        columns: SERVICEACCOUNT_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: ENDPOINTS_COLUMNS,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: EVENT_COLUMNS,
    },
    ResourceInfo {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: ENDPOINTSLICE_COLUMNS,
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: LEASE_COLUMNS,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &["all"],
        columns: DEPLOYMENT_COLUMNS,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: DAEMONSET_COLUMNS,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &["all"],
        columns: REPLICASET_COLUMNS,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &["all"],
        columns: STATEFULSET_COLUMNS,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: REVISION_COLUMNS,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        short_names: &[],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: JOB_COLUMNS,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: CRONJOB_COLUMNS,
    },
    ResourceInfo {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        singular: "horizontalpodautoscaler",
        short_names: &["hpa"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: HPA_COLUMNS,
    },
    ResourceInfo {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: PDB_COLUMNS,
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        singular: "ingress",
        short_names: &["ing"],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: INGRESS_COLUMNS,
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        plural: "ingressclasses",
        singular: "ingressclass",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: INGRESS_CLASS_COLUMNS,
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        singular: "networkpolicy",
        short_names: &["netpol"],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: NETWORK_POLICY_COLUMNS,
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "ServiceCIDR",
        plural: "servicecidrs",
        singular: "servicecidr",
        short_names: &[],
        namespaced: false,
        subresources: &[Status],
        categories: &[],
        columns: SERVICE_CIDR_COLUMNS,
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IPAddress",
        plural: "ipaddresses",
        singular: "ipaddress",
        short_names: &["ip"],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: IP_ADDRESS_COLUMNS,
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        kind: "DeviceClass",
        plural: "deviceclasses",
        singular: "deviceclass",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: AGE_ONLY_COLUMNS,
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaim",
        plural: "resourceclaims",
        singular: "resourceclaim",
        short_names: &[],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: RESOURCE_CLAIM_COLUMNS,
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaimTemplate",
        plural: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: AGE_ONLY_COLUMNS,
    },
    ResourceInfo {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceSlice",
        plural: "resourceslices",
        singular: "resourceslice",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: RESOURCE_SLICE_COLUMNS,
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1beta1",
        kind: "Workload",
        plural: "workloads",
        singular: "workload",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: AGE_ONLY_COLUMNS,
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1beta1",
        kind: "PodGroup",
        plural: "podgroups",
        singular: "podgroup",
        short_names: &[],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: AGE_ONLY_COLUMNS,
    },
    ResourceInfo {
        group: "leaderworkerset.x-k8s.io",
        version: "v1",
        kind: "LeaderWorkerSet",
        plural: "leaderworkersets",
        singular: "leaderworkerset",
        short_names: &["lws"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &[],
        columns: LWS_COLUMNS,
    },
    ResourceInfo {
        group: "disaggregatedset.x-k8s.io",
        version: "v1",
        kind: "DisaggregatedSet",
        plural: "disaggregatedsets",
        singular: "disaggregatedset",
        short_names: &[],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: DS_COLUMNS,
    },
    ResourceInfo {
        group: "disaggregatedset.x-k8s.io",
        version: "v1",
        kind: "DisaggregatedSetRoleScaler",
        plural: "disaggregatedsetrolescalers",
        singular: "disaggregatedsetrolescaler",
        short_names: &["dsrs"],
        namespaced: true,
        subresources: &[Status, Scale],
        categories: &[],
        columns: ROLE_SCALER_COLUMNS,
    },
    ResourceInfo {
        group: "scheduling.volcano.sh",
        version: "v1beta1",
        kind: "PodGroup",
        plural: "podgroups",
        singular: "podgroup",
        short_names: &["pg", "podgroup-v1beta1"],
        namespaced: true,
        subresources: &[Status],
        categories: &[],
        columns: PODGROUP_COLUMNS,
    },
    ResourceInfo {
        group: "serverless.minik8s.io",
        version: "v1alpha1",
        kind: "Function",
        plural: "functions",
        singular: "function",
        short_names: &["fn"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: FUNCTION_COLUMNS,
    },
    ResourceInfo {
        group: "serverless.minik8s.io",
        version: "v1alpha1",
        kind: "Workflow",
        plural: "workflows",
        singular: "workflow",
        short_names: &["wf"],
        namespaced: true,
        subresources: &[],
        categories: &["all"],
        columns: WORKFLOW_COLUMNS,
    },
    ResourceInfo {
        group: "serverless.minik8s.io",
        version: "v1alpha1",
        kind: "WorkflowRun",
        plural: "workflowruns",
        singular: "workflowrun",
        short_names: &["wfr"],
        namespaced: true,
        subresources: &[Status],
        categories: &["all"],
        columns: WORKFLOW_RUN_COLUMNS,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        singular: "role",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: ROLE_COLUMNS,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        short_names: &[],
        namespaced: true,
        subresources: &[],
        categories: &[],
        columns: ROLE_BINDING_COLUMNS,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: ROLE_COLUMNS,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &[],
        columns: ROLE_BINDING_COLUMNS,
    },
    ResourceInfo {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        singular: "certificatesigningrequest",
        short_names: &["csr"],
        namespaced: false,
        subresources: &[Status, Approval],
        categories: &[],
        columns: CSR_COLUMNS,
    },
    ResourceInfo {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        subresources: &[Status],
        categories: &["api-extensions"],
        columns: ROLE_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
        singular: "mutatingwebhookconfiguration",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &["api-extensions"],
        columns: WEBHOOK_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        singular: "validatingwebhookconfiguration",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &["api-extensions"],
        columns: WEBHOOK_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicy",
        plural: "validatingadmissionpolicies",
        singular: "validatingadmissionpolicy",
        short_names: &[],
        namespaced: false,
        subresources: &[Status],
        categories: &["api-extensions"],
        columns: POLICY_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicyBinding",
        plural: "validatingadmissionpolicybindings",
        singular: "validatingadmissionpolicybinding",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &["api-extensions"],
        columns: POLICY_BINDING_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingAdmissionPolicy",
        plural: "mutatingadmissionpolicies",
        singular: "mutatingadmissionpolicy",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &["api-extensions"],
        columns: MUTATING_POLICY_COLUMNS,
    },
    ResourceInfo {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingAdmissionPolicyBinding",
        plural: "mutatingadmissionpolicybindings",
        singular: "mutatingadmissionpolicybinding",
        short_names: &[],
        namespaced: false,
        subresources: &[],
        categories: &["api-extensions"],
        columns: POLICY_BINDING_COLUMNS,
    },
    ResourceInfo {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        singular: "apiservice",
        short_names: &[],
        namespaced: false,
        subresources: &[Status],
        categories: &["api-extensions"],
        columns: APISERVICE_COLUMNS,
    },
];

/// Where a resource's objects are stored: `/registry/<group>/<plural>/`, the
/// core group written as `core`.
pub fn storage_prefix(group: &str, plural: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("/registry/{group}/{plural}/")
}

/// The resource with this group, version and plural.
pub fn by_plural(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    REGISTRY
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The built-in resource of a k8s-openapi type (or the LeaderWorkerSet type),
/// looked up by the type's own `API_VERSION` and `KIND`: `registry::of::<Pod>()`.
/// Every type used this way is a built-in, so a missing entry is a bug here.
pub fn of<K: k8s_openapi::Resource>() -> &'static ResourceInfo {
    by_kind(K::API_VERSION, K::KIND)
        .unwrap_or_else(|| panic!("{} {} is not a built-in kind", K::API_VERSION, K::KIND))
}

/// The resource with this `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    REGISTRY
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// The resource a user means by `name` (plural, singular, short name or kind).
pub fn by_alias(name: &str) -> Option<&'static ResourceInfo> {
    REGISTRY.iter().find(|r| r.matches_alias(name))
}

/// The distinct `(group, version)` pairs, in registry order.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in REGISTRY {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests;
