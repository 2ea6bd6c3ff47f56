"""One configured Kubernetes API client for the whole process.

The portal cannot tell a real cluster from the simulated one: both are reached through a kubeconfig
(``KUBECONFIG``) or, inside a cluster, the pod's service account (``KUBE_IN_CLUSTER=true``).
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kubernetes import client, config


class KubeNotConfigured(ImproperlyConfigured):
    """Neither a kubeconfig nor in-cluster configuration was given."""


@lru_cache(maxsize=1)
def api_client() -> client.ApiClient:
    if settings.KUBE_IN_CLUSTER:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    if not settings.KUBECONFIG:
        raise KubeNotConfigured("No Kubernetes cluster configured: set KUBECONFIG or KUBE_IN_CLUSTER=true.")
    return config.new_client_from_config(config_file=settings.KUBECONFIG)


def reset_client() -> None:
    """Forget the cached client (after the kubeconfig changed, e.g. in tests)."""
    api_client.cache_clear()


def server_version() -> str:
    """Ask the API server for its version; raises on any failure. Used by the readiness check."""
    info = client.VersionApi(api_client()).get_code(_request_timeout=settings.KUBE_REQUEST_TIMEOUT)
    return str(info.git_version)
