"""The official Python kubernetes client on the secure port: TLS checked
against the cluster CA, with the admin's client certificate (a kubeconfig),
a static token, a ServiceAccount token from the TokenRequest API, and no
credentials at all.

Usage: security_test.py HTTPS_URL ADMIN_KUBECONFIG CA_FILE STATIC_TOKEN.
Exits non-zero with a message on the first failure.
"""
import json
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def api_with_token(url, ca, token):
    cfg = client.Configuration()
    cfg.host = url
    cfg.ssl_ca_cert = ca
    if token:
        cfg.api_key = {"authorization": "Bearer " + token}
    return client.ApiClient(cfg)


def forbidden(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        return e
    raise AssertionError("expected an error from %s" % fn.__name__)


def eventually(what, check, seconds=10):
    deadline = time.time() + seconds
    while True:
        try:
            return check()
        except (ApiException, AssertionError):
            if time.time() > deadline:
                raise AssertionError("timed out: " + what)
            time.sleep(0.2)


def main(url, kubeconfig, ca, static_token):
    # The admin's kubeconfig: a client certificate.
    admin = config.new_client_from_config(config_file=kubeconfig)
    who = client.AuthenticationV1Api(admin).create_self_subject_review(
        client.V1SelfSubjectReview()).status.user_info
    assert who.username == "kubernetes-admin", who
    assert "system:masters" in who.groups, who
    core = client.CoreV1Api(admin)
    rbac = client.RbacAuthorizationV1Api(admin)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py-sec")))
    core.create_namespaced_service_account("py-sec", client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="reader")))
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view")
    rbac.create_namespaced_role_binding("py-sec", client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="reader-view"), role_ref=ref,
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace="py-sec"),
                  client.RbacV1Subject(kind="User", name="alice", api_group="rbac.authorization.k8s.io")]))

    # No credentials: 401.
    e = forbidden(client.CoreV1Api(api_with_token(url, ca, None)).list_namespaced_pod, "py-sec")
    assert e.status == 401, e

    # A static token (alice): what view grants in py-sec, 403 elsewhere.
    alice = api_with_token(url, ca, static_token)
    eventually("alice may list pods in py-sec", lambda: client.CoreV1Api(alice).list_namespaced_pod("py-sec"))
    e = forbidden(client.CoreV1Api(alice).list_node)
    assert e.status == 403, e
    message = json.loads(e.body)["message"]
    assert message == 'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope', message
    review = client.AuthorizationV1Api(alice).create_self_subject_access_review(client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
            namespace="py-sec", verb="delete", resource="pods"))))
    assert review.status.allowed is False, review.status

    # A ServiceAccount token from the TokenRequest API.
    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    token = core.create_namespaced_service_account_token("reader", "py-sec", req).status.token
    sa = api_with_token(url, ca, token)
    who = client.AuthenticationV1Api(sa).create_self_subject_review(client.V1SelfSubjectReview()).status.user_info
    assert who.username == "system:serviceaccount:py-sec:reader", who
    assert "system:serviceaccounts:py-sec" in who.groups, who
    eventually("the account may list pods", lambda: client.CoreV1Api(sa).list_namespaced_pod("py-sec"))
    e = forbidden(client.CoreV1Api(sa).list_namespaced_secret, "py-sec")
    assert e.status == 403, e
    # A token that never existed.
    e = forbidden(client.CoreV1Api(api_with_token(url, ca, token[:-4] + "AAAA")).list_namespaced_pod, "py-sec")
    assert e.status == 401, e
    print("python security: all checks passed")


if __name__ == "__main__":
    main(*sys.argv[1:5])
