//! The table columns (after NAME) of every built-in kind, as kubectl's
//! printers name them; the registry's entries point here.

use super::{col, Column};

pub(super) const POD_COLUMNS: &[Column] = &[
    col("Ready", 0),
    col("Status", 0),
    col("Restarts", 0),
    col("Age", 0),
    col("IP", 1),
    col("Node", 1),
    col("Nominated Node", 1),
    col("Readiness Gates", 1),
];
pub(super) const NODE_COLUMNS: &[Column] = &[
    col("Status", 0),
    col("Roles", 0),
    col("Age", 0),
    col("Version", 0),
    col("Internal-IP", 1),
    col("External-IP", 1),
    col("OS-Image", 1),
    col("Kernel-Version", 1),
    col("Container-Runtime", 1),
];
pub(super) const NAMESPACE_COLUMNS: &[Column] = &[col("Status", 0), col("Age", 0)];
pub(super) const SERVICE_COLUMNS: &[Column] = &[
    col("Type", 0),
    col("Cluster-IP", 0),
    col("External-IP", 0),
    col("Port(s)", 0),
    col("Age", 0),
    col("Selector", 1),
];
pub(super) const ENDPOINTS_COLUMNS: &[Column] = &[col("Endpoints", 0), col("Age", 0)];
pub(super) const RESOURCEQUOTA_COLUMNS: &[Column] =
    &[col("Age", 0), col("Request", 0), col("Limit", 0)];
pub(super) const LIMITRANGE_COLUMNS: &[Column] = &[col("Created At", 0)];
pub(super) const RUNTIMECLASS_COLUMNS: &[Column] = &[col("Handler", 0), col("Age", 0)];
pub(super) const CONFIGMAP_COLUMNS: &[Column] = &[col("Data", 0), col("Age", 0)];
pub(super) const PRIORITYCLASS_COLUMNS: &[Column] = &[
    col("Value", 0),
    col("Global-Default", 0),
    col("Age", 0),
    col("PreemptionPolicy", 0),
];
pub(super) const PODTEMPLATE_COLUMNS: &[Column] =
    &[col("Containers", 0), col("Images", 0), col("Pod Labels", 0)];
pub(super) const SECRET_COLUMNS: &[Column] = &[col("Type", 0), col("Data", 0), col("Age", 0)];
pub(super) const PV_COLUMNS: &[Column] = &[
    col("Capacity", 0),
    col("Access Modes", 0),
    col("Reclaim Policy", 0),
    col("Status", 0),
    col("Claim", 0),
    col("StorageClass", 0),
    col("VolumeAttributesClass", 0),
    col("Reason", 0),
    col("Age", 0),
    col("VolumeMode", 1),
];
pub(super) const PVC_COLUMNS: &[Column] = &[
    col("Status", 0),
    col("Volume", 0),
    col("Capacity", 0),
    col("Access Modes", 0),
    col("StorageClass", 0),
    col("VolumeAttributesClass", 0),
    col("Age", 0),
    col("VolumeMode", 1),
];
pub(super) const STORAGECLASS_COLUMNS: &[Column] = &[
    col("Name", 0),
    col("Provisioner", 0),
    col("ReclaimPolicy", 0),
    col("VolumeBindingMode", 0),
    col("AllowVolumeExpansion", 0),
    col("Age", 0),
];
pub(super) const SERVICEACCOUNT_COLUMNS: &[Column] = &[col("Secrets", 0), col("Age", 0)];
pub(super) const ENDPOINTSLICE_COLUMNS: &[Column] = &[
    col("AddressType", 0),
    col("Ports", 0),
    col("Endpoints", 0),
    col("Age", 0),
];
pub(super) const LEASE_COLUMNS: &[Column] = &[col("Holder", 0), col("Age", 0)];
/// Kubernetes' event table: NAME comes last and only with `-o wide`.
pub(super) const EVENT_COLUMNS: &[Column] = &[
    col("Last Seen", 0),
    col("Type", 0),
    col("Reason", 0),
    col("Object", 0),
    col("Subobject", 1),
    col("Source", 1),
    col("Message", 0),
    col("First Seen", 1),
    col("Count", 1),
    col("Name", 1),
];
pub(super) const REPLICASET_COLUMNS: &[Column] = &[
    col("Desired", 0),
    col("Current", 0),
    col("Ready", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
    col("Selector", 1),
];
pub(super) const DEPLOYMENT_COLUMNS: &[Column] = &[
    col("Ready", 0),
    col("Up-to-date", 0),
    col("Available", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
    col("Selector", 1),
];
pub(super) const JOB_COLUMNS: &[Column] = &[
    col("Status", 0),
    col("Completions", 0),
    col("Duration", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
    col("Selector", 1),
];
pub(super) const CRONJOB_COLUMNS: &[Column] = &[
    col("Schedule", 0),
    col("Timezone", 0),
    col("Suspend", 0),
    col("Active", 0),
    col("Last Schedule", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
    col("Selector", 1),
];
pub(super) const DAEMONSET_COLUMNS: &[Column] = &[
    col("Desired", 0),
    col("Current", 0),
    col("Ready", 0),
    col("Up-to-date", 0),
    col("Available", 0),
    col("Node Selector", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
    col("Selector", 1),
];
pub(super) const PDB_COLUMNS: &[Column] = &[
    col("Min Available", 0),
    col("Max Unavailable", 0),
    col("Allowed Disruptions", 0),
    col("Age", 0),
];
pub(super) const STATEFULSET_COLUMNS: &[Column] = &[
    col("Ready", 0),
    col("Age", 0),
    col("Containers", 1),
    col("Images", 1),
];
pub(super) const REVISION_COLUMNS: &[Column] =
    &[col("Controller", 0), col("Revision", 0), col("Age", 0)];
pub(super) const HPA_COLUMNS: &[Column] = &[
    col("Reference", 0),
    col("Targets", 0),
    col("MinPods", 0),
    col("MaxPods", 0),
    col("Replicas", 0),
    col("Age", 0),
];
pub(super) const ROLE_COLUMNS: &[Column] = &[col("Created At", 0)];
pub(super) const CSR_COLUMNS: &[Column] = &[
    col("Age", 0),
    col("SignerName", 0),
    col("Requestor", 0),
    col("RequestedDuration", 0),
    col("Condition", 0),
];
pub(super) const ROLE_BINDING_COLUMNS: &[Column] = &[
    col("Role", 0),
    col("Age", 0),
    col("Users", 1),
    col("Groups", 1),
    col("ServiceAccounts", 1),
];
pub(super) const APISERVICE_COLUMNS: &[Column] =
    &[col("Service", 0), col("Available", 0), col("Age", 0)];
pub(super) const WEBHOOK_COLUMNS: &[Column] = &[col("Webhooks", 0), col("Age", 0)];
pub(super) const POLICY_COLUMNS: &[Column] =
    &[col("Validations", 0), col("ParamKind", 0), col("Age", 0)];
pub(super) const MUTATING_POLICY_COLUMNS: &[Column] =
    &[col("Mutations", 0), col("ParamKind", 0), col("Age", 0)];
pub(super) const POLICY_BINDING_COLUMNS: &[Column] =
    &[col("PolicyName", 0), col("ParamRef", 0), col("Age", 0)];
/// The upstream CRD's additionalPrinterColumns.
pub(super) const NETWORK_POLICY_COLUMNS: &[Column] = &[col("Pod-Selector", 0), col("Age", 0)];
pub(super) const INGRESS_COLUMNS: &[Column] = &[
    col("Class", 0),
    col("Hosts", 0),
    col("Address", 0),
    col("Ports", 0),
    col("Age", 0),
];

pub(super) const CSI_STORAGE_CAPACITY_COLUMNS: &[Column] =
    &[col("StorageClassName", 0), col("Capacity", 0)];
pub(super) const SERVICE_CIDR_COLUMNS: &[Column] = &[col("CIDRs", 0), col("Age", 0)];
pub(super) const IP_ADDRESS_COLUMNS: &[Column] = &[col("ParentRef", 0)];

pub(super) const INGRESS_CLASS_COLUMNS: &[Column] =
    &[col("Controller", 0), col("Parameters", 0), col("Age", 0)];

/// Volcano's PodGroup printer columns.
pub(super) const PODGROUP_COLUMNS: &[Column] = &[
    col("Status", 0),
    col("MinMember", 0),
    col("Runnings", 0),
    col("Age", 0),
    col("Queue", 1),
];

/// A serverless Function: its runtime, instances ready of those wanted, Ready, where it is called.
pub(super) const FUNCTION_COLUMNS: &[Column] = &[
    col("Runtime", 0),
    col("Instances", 0),
    col("Ready", 0),
    col("URL", 0),
    col("Age", 0),
    col("Reason", 1),
];

/// A Workflow: the step it starts with and how many it has.
pub(super) const WORKFLOW_COLUMNS: &[Column] = &[col("Start", 0), col("Steps", 0), col("Age", 0)];

/// A WorkflowRun, as kubectl shows a Job: phase, steps finished of begun, how long.
pub(super) const WORKFLOW_RUN_COLUMNS: &[Column] = &[
    col("Workflow", 0),
    col("Phase", 0),
    col("Steps", 0),
    col("Duration", 0),
    col("Age", 0),
    col("Message", 1),
];

/// A DisaggregatedSet has no printer columns upstream (NAME, AGE).
pub(super) const DS_COLUMNS: &[Column] = &[col("Age", 0)];

pub(super) const ROLE_SCALER_COLUMNS: &[Column] =
    &[col("Desired", 0), col("Current", 0), col("Age", 0)];

pub(super) const LWS_COLUMNS: &[Column] = &[
    col("Ready", 0),
    col("Desired", 0),
    col("Up-to-date", 0),
    col("Age", 0),
];

pub(super) const AGE_ONLY_COLUMNS: &[Column] = &[col("Age", 0)];
pub(super) const RESOURCE_CLAIM_COLUMNS: &[Column] = &[col("State", 0), col("Age", 0)];
pub(super) const RESOURCE_SLICE_COLUMNS: &[Column] = &[
    col("Node", 0),
    col("Driver", 0),
    col("Pool", 0),
    col("Age", 0),
];
