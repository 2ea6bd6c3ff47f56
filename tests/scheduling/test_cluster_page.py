"""The operators' cluster page: nodes, GPU modes and capacity against the sum of guarantees."""

from __future__ import annotations

from django.test import Client

from scheduling.kube.client import reset_client
from scheduling.simcluster.testing import SimCluster
from tests.catalogue import set_quota
from tests.conftest import Org


def test_operators_see_capacity_against_guarantees(org: Org, stack_cluster: SimCluster, settings) -> None:
    settings.KUBECONFIG = str(stack_cluster.kubeconfig_path)
    reset_client()
    set_quota(org.alpha, "H100-80GB-HBM3", 12)
    set_quota(org.beta, "H100-80GB-HBM3", 12)
    client = Client()
    client.force_login(org.operator)
    page = client.get("/cluster/").content.decode()
    assert "gpu-a100-0" in page and "MIG all-balanced (success)" in page
    assert "time-sliced x4" in page
    assert "<td>H100-80GB-HBM3</td><td>16</td><td>24</td>" in page  # 16 GPUs, 24 guaranteed
    assert "1.50" in page  # a 1.5:1 oversubscription
    reset_client()


def test_others_may_not_see_it(org: Org) -> None:
    client = Client()
    client.force_login(org.lead)
    assert client.get("/cluster/").status_code == 403
