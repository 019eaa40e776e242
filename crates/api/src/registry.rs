//! The one table that describes every built-in resource.
//!
//! Routing, discovery, OpenAPI, storage keys, kubectl's aliases and the Table
//! columns are all derived from it; adding a kind means adding one entry here
//! plus its defaulting/validation. The apiserver serves from a [`Registry`]:
//! this table plus kinds registered while it runs. Clients know the built-ins
//! by type ([`of`]) and everything else through discovery.

use std::borrow::Cow;
use std::sync::Arc;

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

/// Text of a registry entry: borrowed from the built-in table, or owned by
/// an entry made at run time (a custom resource's, dropped with it).
pub type Text = Cow<'static, str>;

/// A printer column of the server-side Table (`kubectl get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: Text,
    pub kind: Text,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: i32,
    pub description: Text,
}

const fn col(name: &'static str, priority: i32) -> Column {
    Column {
        name: Cow::Borrowed(name),
        kind: Cow::Borrowed("string"),
        priority,
        description: Cow::Borrowed(""),
    }
}

/// Everything the system knows about one resource. Built-in entries are
/// the `static` [`REGISTRY`]; an entry made at run time owns its text and is
/// shared as an `Arc` ([`Info`]), dropped when nothing uses it any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: Text,
    pub version: Text,
    pub kind: Text,
    pub plural: Text,
    pub singular: Text,
    pub short_names: Cow<'static, [Text]>,
    pub namespaced: bool,
    pub subresources: Cow<'static, [Subresource]>,
    pub categories: Cow<'static, [Text]>,
    /// Table columns after NAME (which every table has first, unless its columns
    /// list "Name" themselves, as Events do: last and wide only).
    pub columns: Cow<'static, [Column]>,
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
        let all = storage_prefix(&self.group, &self.plural);
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
            || self.short_names.iter().any(|s| *s == lower)
            || lower == format!("{}.{}", self.plural, self.group)
    }
}

use Subresource::*;

/// Every resource served, in discovery order.
pub static REGISTRY: &[ResourceInfo] = &[
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Namespace"),
        plural: Cow::Borrowed("namespaces"),
        singular: Cow::Borrowed("namespace"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ns")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(NAMESPACE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Pod"),
        plural: Cow::Borrowed("pods"),
        singular: Cow::Borrowed("pod"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("po")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[
            Status,
            Log,
            Binding,
            Exec,
            Attach,
            PortForward,
            Eviction,
            EphemeralContainers,
            Resize,
        ]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(POD_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Node"),
        plural: Cow::Borrowed("nodes"),
        singular: Cow::Borrowed("node"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("no")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(NODE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Service"),
        plural: Cow::Borrowed("services"),
        singular: Cow::Borrowed("service"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("svc")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(SERVICE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ReplicationController"),
        plural: Cow::Borrowed("replicationcontrollers"),
        singular: Cow::Borrowed("replicationcontroller"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("rc")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(REPLICASET_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("scheduling.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("PriorityClass"),
        plural: Cow::Borrowed("priorityclasses"),
        singular: Cow::Borrowed("priorityclass"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("pc")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PRIORITYCLASS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("PodTemplate"),
        plural: Cow::Borrowed("podtemplates"),
        singular: Cow::Borrowed("podtemplate"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PODTEMPLATE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("node.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("RuntimeClass"),
        plural: Cow::Borrowed("runtimeclasses"),
        singular: Cow::Borrowed("runtimeclass"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(RUNTIMECLASS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ResourceQuota"),
        plural: Cow::Borrowed("resourcequotas"),
        singular: Cow::Borrowed("resourcequota"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("quota")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(RESOURCEQUOTA_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("LimitRange"),
        plural: Cow::Borrowed("limitranges"),
        singular: Cow::Borrowed("limitrange"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("limits")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(LIMITRANGE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ConfigMap"),
        plural: Cow::Borrowed("configmaps"),
        singular: Cow::Borrowed("configmap"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("cm")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(CONFIGMAP_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Secret"),
        plural: Cow::Borrowed("secrets"),
        singular: Cow::Borrowed("secret"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(SECRET_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("PersistentVolume"),
        plural: Cow::Borrowed("persistentvolumes"),
        singular: Cow::Borrowed("persistentvolume"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("pv")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PV_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("PersistentVolumeClaim"),
        plural: Cow::Borrowed("persistentvolumeclaims"),
        singular: Cow::Borrowed("persistentvolumeclaim"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("pvc")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PVC_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("storage.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("CSIStorageCapacity"),
        plural: Cow::Borrowed("csistoragecapacities"),
        singular: Cow::Borrowed("csistoragecapacity"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(CSI_STORAGE_CAPACITY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("storage.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("StorageClass"),
        plural: Cow::Borrowed("storageclasses"),
        singular: Cow::Borrowed("storageclass"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("sc")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(STORAGECLASS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ServiceAccount"),
        plural: Cow::Borrowed("serviceaccounts"),
        singular: Cow::Borrowed("serviceaccount"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("sa")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Token]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(SERVICEACCOUNT_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Endpoints"),
        plural: Cow::Borrowed("endpoints"),
        singular: Cow::Borrowed("endpoints"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ep")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ENDPOINTS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed(""),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Event"),
        plural: Cow::Borrowed("events"),
        singular: Cow::Borrowed("event"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ev")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(EVENT_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("discovery.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("EndpointSlice"),
        plural: Cow::Borrowed("endpointslices"),
        singular: Cow::Borrowed("endpointslice"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ENDPOINTSLICE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("coordination.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Lease"),
        plural: Cow::Borrowed("leases"),
        singular: Cow::Borrowed("lease"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(LEASE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apps"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Deployment"),
        plural: Cow::Borrowed("deployments"),
        singular: Cow::Borrowed("deployment"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("deploy")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(DEPLOYMENT_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apps"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("DaemonSet"),
        plural: Cow::Borrowed("daemonsets"),
        singular: Cow::Borrowed("daemonset"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ds")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(DAEMONSET_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apps"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ReplicaSet"),
        plural: Cow::Borrowed("replicasets"),
        singular: Cow::Borrowed("replicaset"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("rs")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(REPLICASET_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apps"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("StatefulSet"),
        plural: Cow::Borrowed("statefulsets"),
        singular: Cow::Borrowed("statefulset"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("sts")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(STATEFULSET_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apps"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ControllerRevision"),
        plural: Cow::Borrowed("controllerrevisions"),
        singular: Cow::Borrowed("controllerrevision"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(REVISION_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("batch"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Job"),
        plural: Cow::Borrowed("jobs"),
        singular: Cow::Borrowed("job"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(JOB_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("batch"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("CronJob"),
        plural: Cow::Borrowed("cronjobs"),
        singular: Cow::Borrowed("cronjob"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("cj")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(CRONJOB_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("autoscaling"),
        version: Cow::Borrowed("v2"),
        kind: Cow::Borrowed("HorizontalPodAutoscaler"),
        plural: Cow::Borrowed("horizontalpodautoscalers"),
        singular: Cow::Borrowed("horizontalpodautoscaler"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("hpa")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(HPA_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("policy"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("PodDisruptionBudget"),
        plural: Cow::Borrowed("poddisruptionbudgets"),
        singular: Cow::Borrowed("poddisruptionbudget"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("pdb")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PDB_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("networking.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Ingress"),
        plural: Cow::Borrowed("ingresses"),
        singular: Cow::Borrowed("ingress"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ing")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(INGRESS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("networking.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("IngressClass"),
        plural: Cow::Borrowed("ingressclasses"),
        singular: Cow::Borrowed("ingressclass"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(INGRESS_CLASS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("networking.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("NetworkPolicy"),
        plural: Cow::Borrowed("networkpolicies"),
        singular: Cow::Borrowed("networkpolicy"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("netpol")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(NETWORK_POLICY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("networking.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ServiceCIDR"),
        plural: Cow::Borrowed("servicecidrs"),
        singular: Cow::Borrowed("servicecidr"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(SERVICE_CIDR_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("networking.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("IPAddress"),
        plural: Cow::Borrowed("ipaddresses"),
        singular: Cow::Borrowed("ipaddress"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("ip")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(IP_ADDRESS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("resource.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("DeviceClass"),
        plural: Cow::Borrowed("deviceclasses"),
        singular: Cow::Borrowed("deviceclass"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(AGE_ONLY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("resource.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ResourceClaim"),
        plural: Cow::Borrowed("resourceclaims"),
        singular: Cow::Borrowed("resourceclaim"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(RESOURCE_CLAIM_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("resource.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ResourceClaimTemplate"),
        plural: Cow::Borrowed("resourceclaimtemplates"),
        singular: Cow::Borrowed("resourceclaimtemplate"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(AGE_ONLY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("resource.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ResourceSlice"),
        plural: Cow::Borrowed("resourceslices"),
        singular: Cow::Borrowed("resourceslice"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(RESOURCE_SLICE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("scheduling.k8s.io"),
        version: Cow::Borrowed("v1beta1"),
        kind: Cow::Borrowed("Workload"),
        plural: Cow::Borrowed("workloads"),
        singular: Cow::Borrowed("workload"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(AGE_ONLY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("scheduling.k8s.io"),
        version: Cow::Borrowed("v1beta1"),
        kind: Cow::Borrowed("PodGroup"),
        plural: Cow::Borrowed("podgroups"),
        singular: Cow::Borrowed("podgroup"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(AGE_ONLY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("leaderworkerset.x-k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("LeaderWorkerSet"),
        plural: Cow::Borrowed("leaderworkersets"),
        singular: Cow::Borrowed("leaderworkerset"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("lws")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(LWS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("disaggregatedset.x-k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("DisaggregatedSet"),
        plural: Cow::Borrowed("disaggregatedsets"),
        singular: Cow::Borrowed("disaggregatedset"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(DS_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("disaggregatedset.x-k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("DisaggregatedSetRoleScaler"),
        plural: Cow::Borrowed("disaggregatedsetrolescalers"),
        singular: Cow::Borrowed("disaggregatedsetrolescaler"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("dsrs")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status, Scale]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ROLE_SCALER_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("scheduling.volcano.sh"),
        version: Cow::Borrowed("v1beta1"),
        kind: Cow::Borrowed("PodGroup"),
        plural: Cow::Borrowed("podgroups"),
        singular: Cow::Borrowed("podgroup"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("pg"), Cow::Borrowed("podgroup-v1beta1")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(PODGROUP_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("serverless.minik8s.io"),
        version: Cow::Borrowed("v1alpha1"),
        kind: Cow::Borrowed("Function"),
        plural: Cow::Borrowed("functions"),
        singular: Cow::Borrowed("function"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("fn")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(FUNCTION_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("serverless.minik8s.io"),
        version: Cow::Borrowed("v1alpha1"),
        kind: Cow::Borrowed("Workflow"),
        plural: Cow::Borrowed("workflows"),
        singular: Cow::Borrowed("workflow"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("wf")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(WORKFLOW_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("serverless.minik8s.io"),
        version: Cow::Borrowed("v1alpha1"),
        kind: Cow::Borrowed("WorkflowRun"),
        plural: Cow::Borrowed("workflowruns"),
        singular: Cow::Borrowed("workflowrun"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("wfr")]),
        namespaced: true,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("all")]),
        columns: Cow::Borrowed(WORKFLOW_RUN_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("rbac.authorization.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("Role"),
        plural: Cow::Borrowed("roles"),
        singular: Cow::Borrowed("role"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ROLE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("rbac.authorization.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("RoleBinding"),
        plural: Cow::Borrowed("rolebindings"),
        singular: Cow::Borrowed("rolebinding"),
        short_names: Cow::Borrowed(&[]),
        namespaced: true,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ROLE_BINDING_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("rbac.authorization.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ClusterRole"),
        plural: Cow::Borrowed("clusterroles"),
        singular: Cow::Borrowed("clusterrole"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ROLE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("rbac.authorization.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ClusterRoleBinding"),
        plural: Cow::Borrowed("clusterrolebindings"),
        singular: Cow::Borrowed("clusterrolebinding"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(ROLE_BINDING_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("certificates.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("CertificateSigningRequest"),
        plural: Cow::Borrowed("certificatesigningrequests"),
        singular: Cow::Borrowed("certificatesigningrequest"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("csr")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status, Approval]),
        categories: Cow::Borrowed(&[]),
        columns: Cow::Borrowed(CSR_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apiextensions.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("CustomResourceDefinition"),
        plural: Cow::Borrowed("customresourcedefinitions"),
        singular: Cow::Borrowed("customresourcedefinition"),
        short_names: Cow::Borrowed(&[Cow::Borrowed("crd"), Cow::Borrowed("crds")]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(ROLE_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("MutatingWebhookConfiguration"),
        plural: Cow::Borrowed("mutatingwebhookconfigurations"),
        singular: Cow::Borrowed("mutatingwebhookconfiguration"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(WEBHOOK_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ValidatingWebhookConfiguration"),
        plural: Cow::Borrowed("validatingwebhookconfigurations"),
        singular: Cow::Borrowed("validatingwebhookconfiguration"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(WEBHOOK_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ValidatingAdmissionPolicy"),
        plural: Cow::Borrowed("validatingadmissionpolicies"),
        singular: Cow::Borrowed("validatingadmissionpolicy"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(POLICY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("ValidatingAdmissionPolicyBinding"),
        plural: Cow::Borrowed("validatingadmissionpolicybindings"),
        singular: Cow::Borrowed("validatingadmissionpolicybinding"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(POLICY_BINDING_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("MutatingAdmissionPolicy"),
        plural: Cow::Borrowed("mutatingadmissionpolicies"),
        singular: Cow::Borrowed("mutatingadmissionpolicy"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(MUTATING_POLICY_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("admissionregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("MutatingAdmissionPolicyBinding"),
        plural: Cow::Borrowed("mutatingadmissionpolicybindings"),
        singular: Cow::Borrowed("mutatingadmissionpolicybinding"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(POLICY_BINDING_COLUMNS),
    },
    ResourceInfo {
        group: Cow::Borrowed("apiregistration.k8s.io"),
        version: Cow::Borrowed("v1"),
        kind: Cow::Borrowed("APIService"),
        plural: Cow::Borrowed("apiservices"),
        singular: Cow::Borrowed("apiservice"),
        short_names: Cow::Borrowed(&[]),
        namespaced: false,
        subresources: Cow::Borrowed(&[Status]),
        categories: Cow::Borrowed(&[Cow::Borrowed("api-extensions")]),
        columns: Cow::Borrowed(APISERVICE_COLUMNS),
    },
];

/// Where a resource's objects are stored: `/registry/<group>/<plural>/`, the
/// core group written as `core`.
pub fn storage_prefix(group: &str, plural: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("/registry/{group}/{plural}/")
}

/// A registry entry as a server passes it around: shared, and dropped (a
/// run-time entry's text with it) when the last user lets it go. A built-in
/// entry is also a `&'static ResourceInfo` of [`REGISTRY`] ([`of`]); [`shared`]
/// gives its `Info`.
pub type Info = Arc<ResourceInfo>;

/// The built-in entries as [`Info`]s, made once: every [`Registry`] and
/// every [`shared`] built-in shares them.
fn builtins() -> &'static [Info] {
    static BUILTINS: std::sync::LazyLock<Vec<Info>> =
        std::sync::LazyLock::new(|| REGISTRY.iter().cloned().map(Arc::new).collect());
    &BUILTINS
}

/// Where `info` sits in [`REGISTRY`] when it is a built-in, named by its
/// static entry or by the [`Info`] a [`Registry`] serves it as.
fn builtin_index(info: &ResourceInfo) -> Option<usize> {
    REGISTRY
        .iter()
        .position(|r| std::ptr::eq(r, info))
        .or_else(|| builtins().iter().position(|r| std::ptr::eq(&**r, info)))
}

/// The [`Info`] of a static entry: the shared one of a built-in (no copy),
/// else (another static table's, the review APIs') a new one.
pub fn shared(info: &'static ResourceInfo) -> Info {
    match builtin_index(info) {
        Some(i) => builtins()[i].clone(),
        None => Arc::new(info.clone()),
    }
}

/// The static entry of a built-in `info` (one of [`REGISTRY`], or the
/// [`Info`] a [`Registry`] serves it as); None for any other entry.
pub fn builtin_entry(info: &ResourceInfo) -> Option<&'static ResourceInfo> {
    builtin_index(info).map(|i| &REGISTRY[i])
}

/// What names a registry entry where one is kept (a dynamic client's): a
/// built-in's `&'static` entry or an [`Info`].
pub trait IntoInfo {
    fn into_info(self) -> Info;
}

impl IntoInfo for &'static ResourceInfo {
    fn into_info(self) -> Info {
        shared(self)
    }
}

impl IntoInfo for Info {
    fn into_info(self) -> Info {
        self
    }
}

impl IntoInfo for &Info {
    fn into_info(self) -> Info {
        self.clone()
    }
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
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The resource a user means by `name` (plural, singular, short name or kind).
pub fn by_alias(name: &str) -> Option<&'static ResourceInfo> {
    REGISTRY.iter().find(|r| r.matches_alias(name))
}

/// The distinct `(group, version)` pairs, in registry order.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in REGISTRY {
        let gv: (&'static str, &'static str) = (&r.group, &r.version);
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

#[cfg(test)]
mod tests;
