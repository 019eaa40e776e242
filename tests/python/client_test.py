"""The official Python kubernetes client against a minik8s apiserver.

Usage: client_test.py URL. Exits non-zero with a message on the first failure.
"""
import os
import sys
import tempfile
import threading
import time

from kubernetes import client, utils, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient


def pod(name):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "py"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )


def main(url):
    cfg = client.Configuration()
    cfg.host = url
    api_client = client.ApiClient(cfg)
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)

    assert core.list_namespaced_pod("default").items == []

    created = core.create_namespaced_pod("default", pod("py1"))
    assert created.metadata.name == "py1" and created.metadata.uid
    assert created.status.phase == "Pending"

    try:
        core.create_namespaced_pod("default", pod("py1"))
        raise AssertionError("duplicate create succeeded")
    except ApiException as e:
        assert e.status == 409 and "AlreadyExists" in e.body, e.body

    listed = core.list_namespaced_pod("default", label_selector="app=py")
    assert [p.metadata.name for p in listed.items] == ["py1"]

    # watch: events for changes made while it runs
    events = []

    def watcher():
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, "default", timeout_seconds=5):
            events.append((ev["type"], ev["object"].metadata.name))
            if ev["type"] == "DELETED" and ev["object"].metadata.name == "py2":
                w.stop()

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    core.create_namespaced_pod("default", pod("py2"))
    core.patch_namespaced_pod("py2", "default", {"metadata": {"labels": {"x": "y"}}})
    core.delete_namespaced_pod("py2", "default")
    t.join(10)
    assert ("ADDED", "py1") in events, events
    assert [e for e in events if e[1] == "py2"] == [("ADDED", "py2"), ("MODIFIED", "py2"), ("DELETED", "py2")], events

    # replica sets and the scale subresource (strategic merge patch)
    rs = client.V1ReplicaSet(
        metadata=client.V1ObjectMeta(name="pyrs"),
        spec=client.V1ReplicaSetSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "pyrs"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "pyrs"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
            ),
        ),
    )
    apps.create_namespaced_replica_set("default", rs)
    apps.patch_namespaced_replica_set_scale("pyrs", "default", {"spec": {"replicas": 3}})
    assert apps.read_namespaced_replica_set_scale("pyrs", "default").spec.replicas == 3

    # deployments: typed create/read/list/patch/scale/delete (no controller
    # runs here: the server side alone, defaults included)
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="pydep"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "pydep"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "pydep"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment("default", dep)
    assert created.spec.strategy.type == "RollingUpdate", created.spec.strategy
    assert created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.revision_history_limit == 10
    assert created.spec.progress_deadline_seconds == 600
    names = [d.metadata.name for d in apps.list_namespaced_deployment("default").items]
    assert "pydep" in names, names
    apps.patch_namespaced_deployment("pydep", "default", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})
    assert apps.read_namespaced_deployment("pydep", "default").spec.template.spec.containers[0].image == "nginx:2"
    apps.patch_namespaced_deployment_scale("pydep", "default", {"spec": {"replicas": 5}})
    assert apps.read_namespaced_deployment_scale("pydep", "default").spec.replicas == 5
    apps.delete_namespaced_deployment("pydep", "default")

    # config maps and secrets (stringData comes back as base64 data)
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="pycm"), data={"mode": "test"}))
    core.patch_namespaced_config_map("pycm", "default", {"data": {"mode": "prod"}})
    assert core.read_namespaced_config_map("pycm", "default").data == {"mode": "prod"}
    assert "pycm" in [c.metadata.name for c in core.list_namespaced_config_map("default").items]
    core.create_namespaced_secret("default", client.V1Secret(
        metadata=client.V1ObjectMeta(name="pysecret"), string_data={"token": "abc"}))
    got = core.read_namespaced_secret("pysecret", "default")
    assert got.type == "Opaque" and got.data == {"token": "YWJj"}, got
    core.delete_namespaced_secret("pysecret", "default")
    core.delete_namespaced_config_map("pycm", "default")

    # jobs, cron jobs and replication controllers through their typed APIs
    batch = client.BatchV1Api(api_client)
    pod_template = client.V1PodTemplateSpec(spec=client.V1PodSpec(
        restart_policy="Never", containers=[client.V1Container(name="c", image="busybox")]))
    job = batch.create_namespaced_job("default", client.V1Job(
        metadata=client.V1ObjectMeta(name="pyjob"), spec=client.V1JobSpec(template=pod_template)))
    assert job.spec.backoff_limit == 6 and job.spec.completions == 1, job.spec
    uid_label = job.spec.template.metadata.labels["batch.kubernetes.io/controller-uid"]
    assert uid_label == job.metadata.uid, job.spec.template.metadata.labels
    assert "pyjob" in [j.metadata.name for j in batch.list_namespaced_job("default").items]
    batch.delete_namespaced_job("pyjob", "default")
    cj = batch.create_namespaced_cron_job("default", client.V1CronJob(
        metadata=client.V1ObjectMeta(name="pycron"),
        spec=client.V1CronJobSpec(schedule="@hourly", job_template=client.V1JobTemplateSpec(
            spec=client.V1JobSpec(template=pod_template)))))
    assert cj.spec.concurrency_policy == "Allow" and cj.spec.successful_jobs_history_limit == 3
    batch.patch_namespaced_cron_job("pycron", "default", {"spec": {"suspend": True}})
    assert batch.read_namespaced_cron_job("pycron", "default").spec.suspend is True
    batch.delete_namespaced_cron_job("pycron", "default")
    rc = core.create_namespaced_replication_controller("default", client.V1ReplicationController(
        metadata=client.V1ObjectMeta(name="pyrc"),
        spec=client.V1ReplicationControllerSpec(replicas=1, template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels={"app": "pyrc"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))))
    assert rc.spec.selector == {"app": "pyrc"}, rc.spec.selector
    core.patch_namespaced_replication_controller_scale("pyrc", "default", {"spec": {"replicas": 2}})
    assert core.read_namespaced_replication_controller_scale("pyrc", "default").spec.replicas == 2
    core.delete_namespaced_replication_controller("pyrc", "default")

    # budgets and evictions (policy/v1), HPAs through autoscaling/v1 stored as v2
    policy = client.PolicyV1Api(api_client)
    policy.create_namespaced_pod_disruption_budget("default", client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="pypdb"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=client.V1LabelSelector(match_labels={"app": "pyevict"}))))
    assert policy.read_namespaced_pod_disruption_budget("pypdb", "default").spec.min_available == 1
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="pyevict", labels={"app": "pyevict"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
    # A pod that is not running may always be evicted.
    core.create_namespaced_pod_eviction("pyevict", "default", client.V1Eviction(
        metadata=client.V1ObjectMeta(name="pyevict", namespace="default")))
    assert "pyevict" not in [p.metadata.name for p in core.list_namespaced_pod("default").items]
    policy.delete_namespaced_pod_disruption_budget("pypdb", "default")
    hpa_v1 = client.AutoscalingV1Api(api_client)
    hpa_v1.create_namespaced_horizontal_pod_autoscaler("default", client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="pyhpa"),
        spec=client.V1HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="x"),
            min_replicas=1, max_replicas=4, target_cpu_utilization_percentage=60)))
    assert hpa_v1.read_namespaced_horizontal_pod_autoscaler("pyhpa", "default").spec.target_cpu_utilization_percentage == 60
    v2 = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler("pyhpa", "default")
    assert v2.spec.metrics[0].resource.target.average_utilization == 60, v2.spec
    hpa_v1.delete_namespaced_horizontal_pod_autoscaler("pyhpa", "default")

    # storage: classes, volumes and claims (no controllers here: the claim stays Pending)
    storage = client.StorageV1Api(api_client)
    storage.create_storage_class(client.V1StorageClass(
        metadata=client.V1ObjectMeta(name="pyclass", annotations={"storageclass.kubernetes.io/is-default-class": "true"}),
        provisioner="minik8s.io/local-path", volume_binding_mode="WaitForFirstConsumer"))
    assert storage.read_storage_class("pyclass").reclaim_policy == "Delete"
    core.create_persistent_volume(client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name="pypv"),
        spec=client.V1PersistentVolumeSpec(capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"],
                                           host_path=client.V1HostPathVolumeSource(path="/srv/pypv"))))
    pv = core.read_persistent_volume("pypv")
    assert pv.status.phase == "Pending" and pv.spec.persistent_volume_reclaim_policy == "Retain", pv
    assert "kubernetes.io/pv-protection" in pv.metadata.finalizers
    pvc = core.create_namespaced_persistent_volume_claim("default", client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="pyclaim"),
        spec=client.V1PersistentVolumeClaimSpec(access_modes=["ReadWriteOnce"],
                                                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    assert pvc.spec.storage_class_name == "pyclass", "the default class"
    assert pvc.status.phase == "Pending"
    try:
        core.create_namespaced_persistent_volume_claim("default", client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="pybad"),
            spec=client.V1PersistentVolumeClaimSpec(access_modes=[],
                                                    resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
        raise AssertionError("a claim without access modes must be refused")
    except ApiException as e:
        assert e.status == 422 and "spec.accessModes" in str(e.body), e.body
    core.delete_namespaced_persistent_volume_claim("pyclaim", "default")
    core.delete_persistent_volume("pypv")
    storage.delete_storage_class("pyclass")

    # create_from_yaml on one multi-document file mixing the workload kinds
    docs = """
apiVersion: v1
kind: ConfigMap
metadata: {name: pyyaml-config}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: pyyaml-secret}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: pyyaml-robot}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pyyaml-web}
spec:
  replicas: 2
  selector: {matchLabels: {app: pyyaml-web}}
  template:
    metadata: {labels: {app: pyyaml-web}}
    spec:
      containers:
      - name: web
        image: nginx
        envFrom: [{configMapRef: {name: pyyaml-config}}]
---
apiVersion: v1
kind: Service
metadata: {name: pyyaml-web}
spec:
  selector: {app: pyyaml-web}
  ports: [{port: 80}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: pyyaml-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: ["true"]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: pyyaml-cron}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pyyaml-pdb}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: pyyaml-web}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(docs)
    made = utils.create_from_yaml(api_client, f.name, namespace="default")
    os.unlink(f.name)
    kinds = sorted(o.kind for group in made for o in group)
    assert kinds == ["ConfigMap", "CronJob", "Deployment", "Job", "PodDisruptionBudget", "Secret",
                     "Service", "ServiceAccount"], kinds
    assert apps.read_namespaced_deployment("pyyaml-web", "default").spec.replicas == 2
    secret = core.read_namespaced_secret("pyyaml-secret", "default")
    assert secret.data == {"password": "czNjcmV0"}, secret.data
    assert client.BatchV1Api(api_client).read_namespaced_cron_job("pyyaml-cron", "default").spec.concurrency_policy == "Allow"

    # server-side apply (the dynamic client's server_side_apply): creates, records
    # its manager, conflicts with another writer, and force takes the field
    cms = DynamicClient(api_client).resources.get(api_version="v1", kind="ConfigMap")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pyssa"}, "data": {"a": "1"}}
    applied = cms.server_side_apply(body=cm, namespace="default", field_manager="py-apply")
    entry = applied.metadata.managedFields[0]
    assert (entry.manager, entry.operation) == ("py-apply", "Apply"), entry
    core.patch_namespaced_config_map("pyssa", "default", {"data": {"a": "2"}}, field_manager="py-other")
    try:
        cms.server_side_apply(body=cm, namespace="default", field_manager="py-apply")
        raise AssertionError("the apply should conflict")
    except ApiException as e:
        body = e.body.decode() if isinstance(e.body, bytes) else e.body
        assert e.status == 409 and 'conflict with \\"py-other\\" using v1: .data.a' in body, body
    forced = cms.server_side_apply(body=cm, namespace="default", field_manager="py-apply", force_conflicts=True)
    assert forced.data.a == "1", forced.data

    # the dynamic client uses discovery
    dyn = DynamicClient(api_client)
    lws_api = dyn.resources.get(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet")
    lws_api.create(namespace="default", body={
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "pylws"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
    })
    got = lws_api.get(namespace="default", name="pylws")
    assert got.spec.leaderWorkerTemplate.size == 2

    print("python client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])
