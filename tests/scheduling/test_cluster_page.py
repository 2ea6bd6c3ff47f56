"""The operators' cluster page: nodes, GPU modes and capacity against the sum of guarantees."""

from __future__ import annotations

from django.test import Client

from portal.models import AuditEvent
from scheduling.kube.client import reset_client
from scheduling.loops import mig_repartition
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


def test_operators_see_recent_mig_repartitions_with_the_reason(org: Org, settings) -> None:
    settings.KUBECONFIG = ""  # the page still renders without a cluster; the table comes from the audit log
    settings.MIG_REPARTITION_ENABLED = True
    reset_client()
    AuditEvent.objects.create(
        action=mig_repartition.STARTED, target_type="node", target_id="gpu-h100-1", before={"config": "all-disabled"},
        after={"config": "all-1g.10gb", "reason": "queued and unserved: 10 x mig-1g.10gb"},
    )  # fmt: skip
    AuditEvent.objects.create(
        action=mig_repartition.SUCCEEDED, target_type="node", target_id="gpu-h100-1",
        before={"config": "all-disabled"}, after={"config": "all-1g.10gb", "devices": {"nvidia.com/mig-1g.10gb": 56}},
    )  # fmt: skip
    AuditEvent.objects.create(
        action=mig_repartition.FAILED, target_type="node", target_id="gpu-h100-0", before={"config": "all-disabled"},
        after={"config": "all-disabled", "wanted": "all-1g.10gb", "reason": "GPU pods reached the node"},
    )  # fmt: skip
    AuditEvent.objects.create(action="quota.set", target_type="team", target_id="1")  # not a repartition
    client = Client()
    client.force_login(org.operator)
    page = client.get("/cluster/").content.decode()
    table = page.split('id="repartitions"')[1].split("</table>")[0]
    assert table.count("<tr") == 4  # the header and three events, newest first
    assert table.index("GPU pods reached the node") < table.index("mig-1g.10gb: 56") < table.index("10 x mig")
    assert "<td>gpu-h100-0</td><td>failed</td><td>all-disabled → all-1g.10gb</td>" in table
    assert "<td>gpu-h100-1</td><td>succeeded</td><td>all-disabled → all-1g.10gb</td>" in table
    assert "quota.set" not in table
    reset_client()
