//! The schemas of LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) and
//! DisaggregatedSet (disaggregatedset.x-k8s.io/v1), which have no
//! protobuf message to derive it from: its definitions written out here, as
//! upstream's CRD declares them (types, required fields, defaults in the
//! descriptions), referring to core definitions by message name.

/// A field: JSON name, type, required, description. A type is `string`,
/// `int32`, `int64`, `msg:<message>`, `[]msg:<message>`, `map:msg:<message>` or a definition of
/// this file (`lws:<Name>`, `ds:<Name>`).
type Field = (&'static str, &'static str, bool, &'static str);

/// (definition name, description, fields)
pub(super) type Definition = (&'static str, &'static str, &'static [Field]);

pub(super) const PREFIX: &str = "io.x-k8s.leaderworkerset.v1.";

pub(super) const DEFINITIONS: &[Definition] = &[
    ("LeaderWorkerSet", "LeaderWorkerSet is the Schema for the leaderworkersets API: replicas groups of one leader pod and size-1 worker pods, created, updated and restarted together.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "lws:LeaderWorkerSetSpec", false, "LeaderWorkerSetSpec defines the desired state of LeaderWorkerSet."),
        ("status", "lws:LeaderWorkerSetStatus", false, "LeaderWorkerSetStatus defines the observed state of LeaderWorkerSet."),
    ]),
    ("LeaderWorkerSetSpec", "One group is a leader pod and size-1 workers; the LWS keeps replicas groups.", &[
        ("replicas", "int32", false, "Number of leader-workers groups. A scale subresource targets it. Defaults to 1."),
        ("leaderWorkerTemplate", "lws:LeaderWorkerTemplate", true, "LeaderWorkerTemplate defines the template for leader/worker pods."),
        ("rolloutStrategy", "lws:RolloutStrategy", false, "RolloutStrategy defines the strategy that will be applied to update replicas when a revision is made to the leaderWorkerTemplate."),
        ("startupPolicy", "string", false, "StartupPolicy determines the startup policy for the worker statefulset: LeaderCreated (the default) creates the workers with the leader; LeaderReady waits until the leader pod is ready."),
        ("networkConfig", "lws:NetworkConfig", false, "NetworkConfig defines the network configuration of the group."),
        ("groupIdentity", "string", false, "GroupIdentity names the groups: Ordinal (the default, groups <name>-<index>) or Hash (random 40-character group keys, leaders in a Deployment, workers reach the leader by pod IP). Immutable."),
        ("groupReplacementPolicy", "string", false, "GroupReplacementPolicy says when a replacement Hash group may be scheduled: PostTermination (the default: after the old group is gone) or Immediate. Immediate only with groupIdentity Hash."),
        ("scheduling", "lws:Scheduling", false, "Workload-aware gang scheduling (KEP-666, proposed upstream): one level of LWS, replica or replica.leader/replica.worker. Immutable."),
    ]),
    ("Scheduling", "Gang scheduling of the LWS as a whole, or of each replica (group), or of each group's leader or workers.", &[
        ("schedulingPolicy", "lws:SchedulingPolicy", false, "One gang of every pod of the LWS (gang) or none (basic)."),
        ("schedulingConstraints", "lws:SchedulingConstraints", false, "Placement constraints of the gang (accepted, not enforced by minik8s)."),
        ("disruptionMode", "lws:DisruptionMode", false, "Whether the gang is disrupted pod by pod (single) or as a whole (all)."),
        ("replica", "lws:ReplicaScheduling", false, "Gang scheduling of each group; {} means one gang per group of size pods."),
    ]),
    ("ReplicaScheduling", "Gang scheduling of each group, or of its leader or workers.", &[
        ("schedulingPolicy", "lws:SchedulingPolicy", false, "One gang per group (gang) or none (basic)."),
        ("schedulingConstraints", "lws:SchedulingConstraints", false, "Placement constraints of the gang (accepted, not enforced by minik8s)."),
        ("disruptionMode", "lws:DisruptionMode", false, "Whether the gang is disrupted pod by pod (single) or as a whole (all)."),
        ("leader", "lws:RoleScheduling", false, "The leader's own policy (a gang of 1)."),
        ("worker", "lws:RoleScheduling", false, "A gang of each group's size-1 workers."),
    ]),
    ("RoleScheduling", "Gang scheduling of a group's leader or workers.", &[
        ("schedulingPolicy", "lws:SchedulingPolicy", false, "gang or basic."),
        ("schedulingConstraints", "lws:SchedulingConstraints", false, "Placement constraints (accepted, not enforced by minik8s)."),
        ("disruptionMode", "lws:DisruptionMode", false, "single or all."),
        ("resourceClaims", "[]msg:api.core.v1.PodResourceClaim", false, "At most 4 resource claims of the gang (refused by minik8s: use leaderWorkerTemplate.resourceClaimTemplates)."),
    ]),
    ("SchedulingPolicy", "Exactly one of basic and gang.", &[
        ("basic", "lws:BasicSchedulingPolicy", false, "Pods schedule one by one."),
        ("gang", "lws:GangSchedulingPolicy", false, "Pods schedule all or nothing."),
    ]),
    ("BasicSchedulingPolicy", "Pods schedule one by one.", &[]),
    ("GangSchedulingPolicy", "Pods schedule all or nothing.", &[
        ("minCount", "int32", false, "The gang's size; when set it must equal the number of its pods."),
        ("minGroupCount", "int32", false, "Not supported (gangs of groups)."),
    ]),
    ("SchedulingConstraints", "Placement constraints of a gang.", &[]),
    ("DisruptionMode", "Exactly one of single and all.", &[
        ("single", "lws:BasicSchedulingPolicy", false, "Pods are disrupted one by one."),
        ("all", "lws:BasicSchedulingPolicy", false, "The gang is disrupted as a whole."),
    ]),
    ("LeaderWorkerTemplate", "Templates of a group's leader and workers.", &[
        ("leaderTemplate", "msg:api.core.v1.PodTemplateSpec", false, "LeaderTemplate defines the pod template for leader pods. If absent, the worker template is used for the leader."),
        ("workerTemplate", "msg:api.core.v1.PodTemplateSpec", true, "WorkerTemplate defines the pod template for worker pods."),
        ("size", "int32", false, "Number of pods to create per group, leader included. Defaults to 1. Changing it rolls the groups."),
        ("restartPolicy", "string", false, "RestartPolicy defines the restart policy when pod failures happen: RecreateGroupOnPodRestart (the default) recreates the whole group when any of its pods restarts; RecreateGroupAfterStart does so only once the group has started; None restarts pods alone. Default is deprecated and means None."),
        ("subGroupPolicy", "lws:SubGroupPolicy", false, "SubGroupPolicy describes the policy that will be applied when creating subgroups in each replica."),
        ("volumeClaimTemplates", "[]msg:api.core.v1.PersistentVolumeClaim", false, "VolumeClaimTemplates is a list of claims that pods are allowed to reference; each leader and worker pod gets its own."),
        ("persistentVolumeClaimRetentionPolicy", "msg:api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy", false, "PersistentVolumeClaimRetentionPolicy describes the lifecycle of the claims created from volumeClaimTemplates."),
        ("resourceClaimTemplates", "[]lws:GroupResourceClaim", false, "minik8s extension (kubernetes-sigs/lws#444): one ResourceClaim per group from each template, shared by the group's leader and workers; containers name it in resources.claims."),
    ]),
    ("GroupResourceClaim", "A ResourceClaim made for each group and shared by its pods.", &[
        ("name", "string", true, "The claim's entry name in the pods' spec.resourceClaims, which containers name in resources.claims."),
        ("resourceClaimTemplateName", "string", true, "The ResourceClaimTemplate (in the LWS's namespace) each group's claim is made from."),
    ]),
    ("SubGroupPolicy", "How a group is split into subgroups of subGroupSize pods.", &[
        ("subGroupPolicyType", "string", false, "LeaderWorker (the default) places the leader in subgroup 0; LeaderExcluded leaves it out of every subgroup."),
        ("subGroupSize", "int32", false, "The number of pods per subgroup. size or size-1 must be divisible by it."),
    ]),
    ("RolloutStrategy", "How a change to the template rolls out to the groups.", &[
        ("type", "string", false, "Type defines the rollout strategy; only RollingUpdate is supported."),
        ("rollingUpdateConfiguration", "lws:RollingUpdateConfiguration", false, "RollingUpdateConfiguration defines the parameters to be used when type is RollingUpdate."),
    ]),
    ("RollingUpdateConfiguration", "Parameters of a rolling update of groups.", &[
        ("partition", "int32", false, "Groups with an index below the partition are not updated. Defaults to 0."),
        ("maxUnavailable", "msg:apimachinery.pkg.util.intstr.IntOrString", false, "The maximum number of groups that can be unavailable during the update: a number or a percentage of replicas (rounded down). Defaults to 1."),
        ("maxSurge", "msg:apimachinery.pkg.util.intstr.IntOrString", false, "The maximum number of groups that can be scheduled above the original number of groups: a number or a percentage of replicas (rounded up). Defaults to 0."),
    ]),
    ("NetworkConfig", "How the group's pods are named in DNS.", &[
        ("subdomainPolicy", "string", true, "Shared (the default): all pods of the LWS share one headless Service; UniquePerReplica: one headless Service per group."),
    ]),
    ("LeaderWorkerSetStatus", "The observed state of the groups.", &[
        ("conditions", "[]msg:apimachinery.pkg.apis.meta.v1.Condition", false, "Conditions track the state of the LeaderWorkerSet: Available, Progressing, UpdateInProgress."),
        ("readyReplicas", "int32", false, "The number of groups whose leader and workers are all ready."),
        ("updatedReplicas", "int32", false, "The number of groups updated to the latest revision."),
        ("replicas", "int32", false, "The number of leader pods (groups) that exist."),
        ("hpaPodSelector", "string", false, "The label selector of the leader pods, for the HorizontalPodAutoscaler."),
        ("observedGeneration", "int64", false, "The generation of the LWS last reconciled."),
        ("groupStatuses", "[]lws:GroupStatus", false, "minik8s: each group's state (Ready, NotReady, Restarting, Failed), restarts and backoff."),
    ]),
    ("GroupStatus", "The state of one group (minik8s).", &[
        ("index", "int32", true, "The group index."),
        ("state", "string", true, "Ready, NotReady, Restarting (backing off before the group is recreated) or Failed (minik8s.io/max-group-restarts exhausted)."),
        ("restarts", "int32", false, "How many times the group was recreated."),
        ("lastRestartTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When the group was last recreated."),
        ("nextRestartTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When a Restarting group is recreated."),
        ("message", "string", false, "A human-readable explanation of the state."),
    ]),
];

pub(super) const DS_PREFIX: &str = "io.x-k8s.disaggregatedset.v1.";

pub(super) const DS_DEFINITIONS: &[Definition] = &[
    ("DisaggregatedSet", "DisaggregatedSet deploys several LeaderWorkerSet roles (e.g. prefill and decode servers) together: one LWS per role, slice and revision, rolled across roles in lockstep.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "ds:DisaggregatedSetSpec", false, "DisaggregatedSetSpec defines the desired state of DisaggregatedSet."),
        ("status", "ds:DisaggregatedSetStatus", false, "DisaggregatedSetStatus defines the observed state of DisaggregatedSet."),
    ]),
    ("DisaggregatedSetSpec", "The roles, how many copies (slices) of the whole topology run, and where slices are placed.", &[
        ("roles", "[]ds:DisaggregatedRoleSpec", true, "Roles of the set, 2 to 10, unique by name. The names and leaderWorkerTemplates make the revision."),
        ("slices", "int32", false, "Number of copies of the whole topology, 1 to 100. Defaults to 1."),
        ("placementPolicy", "ds:PlacementPolicy", false, "PlacementPolicy places each slice within one topology domain."),
    ]),
    ("DisaggregatedRoleSpec", "One role: an embedded LeaderWorkerSet spec.", &[
        ("name", "string", true, "Name of the role, a DNS label of at most 63 characters."),
        ("scaling", "ds:RoleScaling", false, "Scaling says who sets the role's replicas."),
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Labels and annotations copied onto the role's LeaderWorkerSets."),
        ("spec", "lws:LeaderWorkerSetSpec", false, "Spec of the role's LeaderWorkerSets; replicas are groups per slice (ignored for External roles)."),
    ]),
    ("RoleScaling", "Who sets a role's replicas.", &[
        ("mode", "string", false, "Static (the default): spec.replicas; External: the role's DisaggregatedSetRoleScaler <set>-<role>."),
    ]),
    ("PlacementPolicy", "Where slices go.", &[
        ("type", "string", false, "None (the default), ExclusiveSlice (one slice per topology domain) or ExclusiveTopology (no other set's slice in the domain either)."),
        ("topology", "string", false, "The node label key of the topology domain; required unless type is None."),
    ]),
    ("DisaggregatedSetStatus", "The observed state of the roles.", &[
        ("observedGeneration", "int64", false, "The generation last reconciled."),
        ("roleStatuses", "[]ds:RoleStatus", false, "Per role, summed over its LeaderWorkerSets of every slice and revision."),
        ("conditions", "[]msg:apimachinery.pkg.apis.meta.v1.Condition", false, "Available or Progressing."),
    ]),
    ("RoleStatus", "Replica counts of one role.", &[
        ("name", "string", true, "The role."),
        ("replicas", "int32", false, "Groups that exist."),
        ("readyReplicas", "int32", false, "Groups that are ready."),
        ("updatedReplicas", "int32", false, "Groups of the current revision."),
    ]),
    ("DisaggregatedSetRoleScaler", "The scale target of one External role of a DisaggregatedSet, for an autoscaler.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "ds:DisaggregatedSetRoleScalerSpec", false, "The replicas wanted."),
        ("status", "ds:DisaggregatedSetRoleScalerStatus", false, "The replicas there are."),
    ]),
    ("DisaggregatedSetRoleScalerSpec", "The replicas wanted for the role.", &[
        ("replicas", "int32", true, "Groups per slice of the role. Defaults to 0."),
    ]),
    ("DisaggregatedSetRoleScalerStatus", "The replicas of the role.", &[
        ("replicas", "int32", false, "Groups (leader pods) of the role over every slice and revision."),
        ("selector", "string", false, "The label selector of the role's leader pods."),
        ("observedGeneration", "int64", false, "The generation last observed."),
        ("conditions", "[]msg:apimachinery.pkg.apis.meta.v1.Condition", false, "Ready when bound to a live role."),
    ]),
    ("PodGroup", "A Volcano PodGroup (scheduling.volcano.sh/v1beta1): pods annotated scheduling.k8s.io/group-name: <name> are bound only when minMember of them fit together.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "ds:PodGroupSpec", false, "The gang's size and resources."),
        ("status", "ds:PodGroupStatus", false, "The gang's phase."),
    ]),
    ("PodGroupSpec", "What the gang needs.", &[
        ("minMember", "int32", false, "How many of the group's pods must fit before any is bound."),
        ("minResources", "map:msg:apimachinery.pkg.api.resource.Quantity", false, "The resources the whole gang needs (informational in minik8s: every member is fitted)."),
        ("queue", "string", false, "The Volcano queue (informational in minik8s)."),
        ("priorityClassName", "string", false, "The gang's priority class."),
    ]),
    ("PodGroupStatus", "The gang's state.", &[
        ("phase", "string", false, "Pending, Running or Unknown."),
        ("running", "int32", false, "Members bound and running."),
        ("succeeded", "int32", false, "Members succeeded."),
        ("failed", "int32", false, "Members failed."),
    ]),
];
