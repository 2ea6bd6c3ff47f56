"""What-if from the portal's own request history, on the cluster's nodes."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduling.planning import history
from tests.catalogue import demo_nodes, install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace


@pytest.fixture
def requests_made(org: Org) -> list[Workspace]:
    offerings = install_offerings()
    now = timezone.now()
    # Four 8-GPU H100 notebooks an hour apart, each running three hours: only two at once fit 16 GPUs.
    for i in range(4):
        w = make_workspace(org, offerings["h100-80gb-hbm3"], 8, name=f"big-{i}", state="succeeded")
        start = now - timedelta(hours=10 - i)
        Workspace.objects.filter(pk=w.pk).update(
            created_at=start, started_at=start, finished_at=start + timedelta(hours=3)
        )
    mig = make_workspace(org, offerings["a100-sxm4-80gb-3g-40gb"], 2, name="mig", state="running")
    Workspace.objects.filter(pk=mig.pk).update(created_at=now - timedelta(hours=1), started_at=now - timedelta(hours=1))
    make_workspace(org, offerings["h100-80gb-hbm3"], 1, name="cancelled", state="cancelled")
    return list(Workspace.objects.select_related("offering").order_by("pk"))


def test_history_becomes_pod_rows_and_nodes_become_node_rows(requests_made: list[Workspace]) -> None:
    rows = history.pod_rows(requests_made, timezone.now())
    assert len(rows) == 4 + 2  # the cancelled request is no demand; the MIG request is two slices
    big = [r for r in rows if r.shape.num_gpu == 8]
    assert [r.created for r in big] == [0, 3600, 7200, 10800]
    assert all(r.lifetime == 3 * 3600 for r in big)
    slices = [r for r in rows if r.shape.num_gpu == 1]
    assert all(r.shape.gpu_milli == 428 and r.shape.gpu_models == frozenset({"A100-SXM4-80GB"}) for r in slices)
    nodes, mig = history.node_rows(demo_nodes())
    assert {n.name: n.gpus for n in nodes}["gpu-h100-0"] == 8
    assert mig == {"gpu-a100-0": "all-balanced", "gpu-h200-0": "all-1g.18gb"}


def test_the_command_replays_history_on_the_cluster_and_a_bigger_one(
    requests_made: list[Workspace], cluster_client: None
) -> None:
    out = StringIO()
    call_command("whatif_history", "--days", "2", stdout=out)
    text = out.getvalue()
    assert "6 pods from 6 requests of the last 2 days" in text
    assert "6/6 started" in text
    # The third and fourth notebooks each wait an hour for a node to free up.
    assert "max 3600" in text and "33.3% of started pods waited" in text
    bigger = StringIO()
    call_command("whatif_history", "--days", "2", "--add", "2x8xH100-80GB-HBM3", stdout=bigger)
    assert "max 0" in bigger.getvalue()  # room for all four at once: nobody waits
    with pytest.raises(CommandError, match="Cannot build that cluster"):
        call_command("whatif_history", "--mig", "node=gpu-h100-0,config=no-such-layout")
    with pytest.raises(CommandError, match="No workspace requests"):
        Workspace.objects.all().delete()
        call_command("whatif_history")


def test_an_mps_share_replays_as_a_replica_of_its_gpu(org: Org) -> None:
    share = GpuOffering.objects.create(
        slug="a100-mps-4", display_name="A100, 1/4 MPS share", kind="mps", gpu_model="A100-SXM4-40GB",
        resource_name="nvidia.com/gpu", replicas=4, memory_cap_mib=10240, active_thread_percentage=25,
        gpu_equivalents="0.25", allowed_counts=[1],
    )  # fmt: skip
    shape, pods = history.shape_of(make_workspace(org, share, 1, name="mps"))
    assert (shape.num_gpu, shape.gpu_milli, pods) == (1, 250, 1)
