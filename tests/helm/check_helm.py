"""Helm against a minik8s cluster, as a student uses it.

Helm v4 itself (its Go library, through helm-sdkpy) installs, tests,
upgrades, rolls back and uninstalls the chart `helm create` makes, and a
class's chart with a CRD, hooks, a StatefulSet with per-pod storage and a
LeaderWorkerSet; a chart that renders an invalid object fails with the
server's message and leaves nothing behind. Every check reads the cluster
back with the real kubectl.

    check_helm.py CREATED_CHART CLASSROOM_CHART
    (KUBECONFIG, KUBECTL and HELM, Helm's v3 CLI, in the environment)

The rollback goes through Helm's CLI: helm-sdkpy 0.1.32's rollback fails
before it reaches any cluster ("unable to get waiter: wait strategy not
set"). It also shows Helm 3 reading the releases Helm 4 wrote.

Prints one `ok` line per step (with its wall time) and `helm install with
wait: N s` for the benchmark; exits non-zero with the reason at the first
step that does not hold.
"""

import asyncio
import json
import os
import subprocess
import sys
import time

import helm_sdkpy as helm

KUBECONFIG = os.environ["KUBECONFIG"]
KUBECTL = os.environ["KUBECTL"]
HELM = os.environ["HELM"]
NS = "helm-check"


def kubectl(*args, check=True):
    out = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args],
                         capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {out.stdout}{out.stderr}")
    return out.stdout


def get(kind, name=None, *flags):
    args = ["get", kind] + ([name] if name else []) + ["-n", NS, "-o", "json", *flags]
    return json.loads(kubectl(*args))


def exists(kind, name):
    out = kubectl("get", kind, name, "-n", NS, "--ignore-not-found", "-o", "name")
    return out.strip() != ""


def until(what, seconds, probe):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except AssertionError as e:
            last = e
        time.sleep(1)
    raise AssertionError(f"timed out after {seconds} s waiting for {what} (last: {last})")


def release_secrets(release):
    items = get("secrets", None, "-l", f"owner=helm,name={release}")["items"]
    return sorted((int(s["metadata"]["labels"]["version"]), s["metadata"]["labels"]["status"], s["type"])
                  for s in items)


class Steps:
    def __init__(self):
        self.started = time.monotonic()

    def ok(self, what):
        now = time.monotonic()
        print(f"ok {what} ({now - self.started:.1f} s)", flush=True)
        self.started = now


async def default_chart(config, chart, steps):
    """`helm create`'s chart: install with wait, test, upgrade with autoscaling
    and an ingress, history, rollback, uninstall."""
    t = time.monotonic()
    rel = await helm.Install(config).run("web", chart, wait=True, timeout=180)
    print(f"helm install with wait: {time.monotonic() - t:.1f} s", flush=True)
    assert rel["info"]["status"] == "deployed", rel["info"]
    deploy = get("deployment", "web-mychart")
    assert deploy["status"].get("readyReplicas") == 1, deploy["status"]
    image = deploy["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "nginx:1.16.0", image
    assert exists("serviceaccount", "web-mychart") and exists("service", "web-mychart")
    assert release_secrets("web") == [(1, "deployed", "helm.sh/release.v1")], release_secrets("web")
    steps.ok("install of helm create's chart, with wait (Deployment ready, release Secret v1 deployed)")

    tested = await helm.ReleaseTest(config).run("web")
    phases = [h.get("last_run", {}).get("phase") for h in tested.get("hooks", [])
              if "test" in h.get("events", [])]
    assert phases == ["Succeeded"], tested.get("hooks")
    pod = get("pod", "web-mychart-test-connection")
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    steps.ok("helm test: the test-connection pod reached the Service and succeeded")

    values = {"autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
              "ingress": {"enabled": True}}
    rel = await helm.Upgrade(config).run("web", chart, values=values, wait=True, timeout=180)
    assert rel["version"] == 2 and rel["info"]["status"] == "deployed", rel["info"]
    hpa = get("hpa", "web-mychart")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3), hpa["spec"]
    ing = get("ingress", "web-mychart")
    assert ing["spec"]["rules"][0]["host"] == "chart-example.local", ing["spec"]
    steps.ok("upgrade enabling autoscaling and ingress (HPA 1-3, Ingress chart-example.local)")

    history = await helm.History(config).run("web")
    assert [(h["version"], h["info"]["status"]) for h in history] == [(1, "superseded"), (2, "deployed")], \
        [(h["version"], h["info"]["status"]) for h in history]
    out = subprocess.run([HELM, "--kubeconfig", KUBECONFIG, "-n", NS, "rollback", "web", "1", "--wait",
                          "--timeout", "120s"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    status = await helm.Status(config).run("web")
    assert (status["version"], status["info"]["status"]) == (3, "deployed"), status["info"]
    until("the HPA and Ingress of revision 2 to go", 30,
          lambda: not exists("hpa", "web-mychart") and not exists("ingress", "web-mychart"))
    assert release_secrets("web") == [(1, "superseded", "helm.sh/release.v1"),
                                      (2, "superseded", "helm.sh/release.v1"),
                                      (3, "deployed", "helm.sh/release.v1")], release_secrets("web")
    steps.ok("history, rollback to revision 1 (revision 3; HPA and Ingress removed)")

    await helm.Uninstall(config).run("web", wait=True, timeout=120)
    for kind in ["deployment", "service", "serviceaccount"]:
        assert not exists(kind, "web-mychart"), kind
    assert release_secrets("web") == [], release_secrets("web")
    steps.ok("uninstall (objects and release Secrets gone)")


async def classroom_chart(config, chart, steps):
    """A CRD from crds/, a pre-install and a post-upgrade hook, a StatefulSet
    with volumeClaimTemplates, a LeaderWorkerSet."""
    rel = await helm.Install(config).run("lab", chart, wait=True, timeout=240)
    assert rel["info"]["status"] == "deployed", rel["info"]
    kubectl("get", "crd", "assignments.classroom.minik8s.io")
    assignment = get("assignments", "lab-welcome")
    assert assignment["spec"]["title"] == "Read the kubelet's sync loop", assignment
    prepare = get("job", "lab-prepare")
    assert prepare["status"].get("succeeded") == 1, prepare["status"]
    sts = get("statefulset", "lab-notebook")
    assert sts["status"].get("readyReplicas") == 1, sts["status"]
    # The pre-install hook finished before the release's objects were made.
    assert prepare["status"]["completionTime"] <= sts["metadata"]["creationTimestamp"], \
        (prepare["status"]["completionTime"], sts["metadata"]["creationTimestamp"])
    pvc = get("pvc", "data-lab-notebook-0")
    assert pvc["status"]["phase"] == "Bound", pvc["status"]
    lws = get("leaderworkerset", "lab-trainer")
    assert lws["status"].get("readyReplicas") == 1, lws["status"]
    pods = get("pods", None, "-l", "leaderworkerset.sigs.k8s.io/name=lab-trainer")["items"]
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    steps.ok("install of a chart with a CRD, a pre-install Job, a StatefulSet with a claim, an LWS")

    rel = await helm.Upgrade(config).run("lab", chart, values={"notebook": {"replicas": 2}},
                                         wait=True, timeout=240)
    assert rel["version"] == 2, rel["info"]
    announce = get("job", "lab-announce")
    assert announce["status"].get("succeeded") == 1, announce["status"]
    log = kubectl("logs", "-n", NS, "job/lab-announce")
    assert log.strip() == "upgraded to revision 2", log
    sts = get("statefulset", "lab-notebook")
    assert sts["status"].get("readyReplicas") == 2, sts["status"]
    steps.ok("upgrade: the post-upgrade Job ran after the StatefulSet had 2 ready pods")

    await helm.Uninstall(config).run("lab", wait=True, timeout=120)
    assert not exists("statefulset", "lab-notebook") and not exists("leaderworkerset", "lab-trainer")
    # Helm keeps what crds/ installed (it never deletes CRDs), and
    # Kubernetes keeps a StatefulSet's claims (retention Retain).
    kubectl("get", "crd", "assignments.classroom.minik8s.io")
    assert exists("pvc", "data-lab-notebook-0")
    steps.ok("uninstall (the CRD and the claims stay, as Kubernetes and Helm keep them)")


async def broken_chart(config, chart, steps):
    """An invalid object: the server's 422 reaches the user through Helm."""
    try:
        await helm.Install(config).run("bad", chart, values={"broken": True}, wait=True, timeout=120)
        raise AssertionError("an install with an out-of-range port succeeded")
    except helm.HelmError as e:
        message = str(e)
    want = "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
    assert want in message, message
    status = await helm.Status(config).run("bad")
    assert status["info"]["status"] == "failed", status["info"]
    assert release_secrets("bad")[-1][1] == "failed", release_secrets("bad")
    steps.ok("an invalid object: Helm shows the server's 422 message; the release is failed")

    # With rollback on failure (helm install --rollback-on-failure, once
    # --atomic), nothing of the failed install remains.
    await helm.Uninstall(config).run("bad", wait=True, timeout=120)
    try:
        await helm.Install(config).run("bad", chart, values={"broken": True}, wait=True, timeout=120,
                                       rollback_on_failure=True)
        raise AssertionError("the second broken install succeeded")
    except helm.HelmError as e:
        assert want in str(e), str(e)
    # The release's objects go (a StatefulSet's pods and an LWS's
    # StatefulSets after their owners, through graceful deletion and the
    # garbage collector). Its pre-install hook Job stays, as on Kubernetes:
    # Helm never counts hooks among a release's objects.
    def nothing_left():
        left = kubectl("get", "statefulsets,deployments,services,pods,configmaps,leaderworkersets,assignments",
                       "-n", NS, "-l", "app.kubernetes.io/instance=bad", "-o", "name")
        assert left.strip() == "", left
        return True
    until("the failed install's objects to go", 60, nothing_left)
    assert release_secrets("bad") == [], release_secrets("bad")
    hook = get("job", "bad-prepare")
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "pre-install", hook["metadata"]
    kubectl("delete", "job", "bad-prepare", "-n", NS)
    steps.ok("with rollback on failure, nothing half-applied remains and no release is kept")


async def main(created_chart, classroom):
    kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=120s")
    kubectl("create", "namespace", NS)
    config = helm.Configuration(namespace=NS, kubeconfig=KUBECONFIG)
    steps = Steps()
    try:
        await default_chart(config, created_chart, steps)
        await classroom_chart(config, classroom, steps)
        await broken_chart(config, classroom, steps)
    finally:
        kubectl("delete", "namespace", NS, "--wait=false", check=False)
        kubectl("delete", "crd", "assignments.classroom.minik8s.io", "--ignore-not-found", check=False)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
