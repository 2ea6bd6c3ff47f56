"""One configured Kubernetes API client for the whole process.

The portal cannot tell a real cluster from the simulated one: both are reached through a kubeconfig
(``KUBECONFIG``) or, inside a cluster, the pod's service account (``KUBE_IN_CLUSTER=true``).
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kubernetes import client, config

from scheduling.kube.calls import Kube


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


def server_version() -> str:
    """Ask the API server for its version; raises on any failure. Used by the readiness check."""
    info = client.VersionApi(api_client()).get_code(_request_timeout=_timeout())
    return str(info.git_version)


def kube() -> Kube:
    """The idempotent, time-limited wrapper the control loops use."""
    return Kube(api_client(), timeout=settings.KUBE_REQUEST_TIMEOUT)
