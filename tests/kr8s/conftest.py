"""kr8s' own test suite against a minik8s cluster.

kr8s' top-level conftest.py creates a kind cluster (pytest-kind) for its
tests; this file takes its place (crates/master/tests/ecosystem.rs copies the
release's `kr8s/` package and tests next to it) and points the same fixtures
at the cluster the test started: `k8s_cluster` answers what kr8s' fixtures ask
of a `KindCluster` (its kubeconfig, its kubectl, `kubectl(...)`).
"""

import gc
import os
import socket
import subprocess
from pathlib import Path

import pytest
from kr8s._portforward import PortForward


class Cluster:
    """The running minik8s cluster, in the shape of pytest-kind's KindCluster."""

    def __init__(self, kubeconfig: str, kubectl: str):
        self.kubeconfig_path = Path(kubeconfig)
        self.kubectl_path = Path(kubectl)

    def kubectl(self, *args: str) -> str:
        # kubectl's own error goes into the exception, so a failed fixture
        # shows in our report why the server refused (one `E` line).
        done = subprocess.run(
            [str(self.kubectl_path), *args],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig_path)},
            encoding="utf-8",
            capture_output=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
            )
        return done.stdout


@pytest.fixture
def ensure_gc():
    gc.collect()
    yield
    gc.collect()


@pytest.fixture(scope="session", autouse=True)
def k8s_cluster():
    cluster = Cluster(os.environ["KR8S_KUBECONFIG"], os.environ["KR8S_KUBECTL"])
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig_path)
    yield cluster
    del os.environ["KUBECONFIG"]


# Tests that need what a kind cluster has and minik8s does not, by name,
# with the reason; every other test of the suite must pass.
KIND_ONLY = {
    # kind runs its control plane and CoreDNS as pods in kube-system;
    # minik8s runs them as processes, so kube-system has no pods to list.
    "test_get_pods[kube-system]": "lists kind's kube-system pods",
    "test_get_pods_as_table": "lists kind's kube-system pods",
    "test_get_raw_basic": "lists kind's kube-system pods",
    "test_get_raw_false_default": "lists kind's kube-system pods",
    "test_get_raw_with_field_selector": "lists kind's kube-system pods",
    "test_get_raw_sync": "lists kind's kube-system pods",
    "test_list_raw": "lists kind's kube-system pods",
    "test_url": "lists kind's kube-system pods through kubectl proxy",
    # minik8s serves metrics.k8s.io (metrics-server's API) out of the box, so
    # `pods` is there twice (core and metrics); a kind cluster has no metrics.
    "test_api_resources": "expects one `pods` resource (kind has no metrics.k8s.io)",
    # Asks /version with a 10 µs read timeout and expects it to expire: minik8s
    # on loopback answers (about 1 ms round trip) before httpx starts reading.
    "test_api_timeout": "expects the server to take longer than 10 µs to answer",
    # Lists every pod of the cluster twice and expects the same count: races
    # with the pods of earlier tests' namespaces still being deleted (seen
    # once: 21 then 20); not a kind-only need, a race in the test itself.
    "test_pod_list_sync": "two cluster-wide lists race with earlier tests' pods going away",
    # Lists every pod of the cluster, then reads each one back: a pod of an
    # earlier test's namespace, deleted in between, is a NotFoundError (seen
    # once: test-wait-replicas-1). The same race as above.
    "test_list_and_ensure": "a cluster-wide list, then each pod read back, races with earlier tests' pods going away",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = KIND_ONLY.get(item.name)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"kind-specific: {reason}"))


# kr8s picks a port-forward's local port at random (10000-60000) and checks
# only that nothing listens there. A loopback client socket on that port (the
# kernel's ephemeral range is 32768-60999, and the cluster's components talk
# over loopback) makes its server's bind fail with EADDRINUSE inside a
# background task, while `start()` returns the port nobody listens on: the
# test then fails with "All connection attempts failed" before any request
# reaches the cluster (seen once in CI, test_pod_port_forward_start_stop).
# The check also tries the bind its server will do (asyncio's, with
# SO_REUSEADDR), so the pick skips such a port; forwarding is unchanged.
_listened_on = PortForward._is_port_in_use


def _is_port_in_use(self, port: int, host: str = "127.0.0.1") -> bool:
    if _listened_on(self, port, host):
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


PortForward._is_port_in_use = _is_port_in_use
