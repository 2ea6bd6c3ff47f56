"""One configured Kubernetes API client for the whole process.

The portal cannot tell a real cluster from the simulated one: both are reached through a kubeconfig
(``KUBECONFIG``) or, inside a cluster, the pod's service account (``KUBE_IN_CLUSTER=true``).
"""

from __future__ import annotations

from functools import lru_cache

import urllib3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from scheduling.kube.calls import Kube, classify
from scheduling.kube.keys import MANAGED_BY, MANAGER


class KubeNotConfigured(ImproperlyConfigured):
    """Neither a kubeconfig nor in-cluster configuration was given."""


@lru_cache(maxsize=1)
def api_client() -> client.ApiClient:
    configuration = client.Configuration()
    if settings.KUBE_IN_CLUSTER:
        config.load_incluster_config(client_configuration=configuration)
    elif settings.KUBECONFIG:
        config.load_kube_config(config_file=settings.KUBECONFIG, client_configuration=configuration)
    else:
        raise KubeNotConfigured("No Kubernetes cluster configured: set KUBECONFIG or KUBE_IN_CLUSTER=true.")
    # urllib3 would otherwise retry reads on its own (and hide 429/503 behind Retry-After); retrying is
    # the Celery tasks' job, with backoff, so that a slow API server is seen as slow.
    configuration.retries = False
    return client.ApiClient(configuration)


def reset_client() -> None:
    """Forget the cached client (after the kubeconfig changed, e.g. in tests)."""
    api_client.cache_clear()


def _timeout() -> tuple[float, float]:
    # The client honours only an int or a (connect, read) tuple; a bare float is silently ignored.
    return (settings.KUBE_REQUEST_TIMEOUT, settings.KUBE_REQUEST_TIMEOUT)


def check_api() -> str:
    """The readiness check: the server's version, then a read the control loops depend on (their own
    pods), since /version can answer while storage is down. Raises KubeError, with the API's message."""
    try:
        info = client.VersionApi(api_client()).get_code(_request_timeout=_timeout())
        client.CoreV1Api(api_client()).list_pod_for_all_namespaces(
            label_selector=f"{MANAGED_BY}={MANAGER}", limit=1, _request_timeout=_timeout(), _preload_content=False
        )
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise classify(exc) from exc
    return str(info.git_version)


def kube() -> Kube:
    """The idempotent, time-limited wrapper the control loops use."""
    return Kube(api_client(), timeout=settings.KUBE_REQUEST_TIMEOUT)
