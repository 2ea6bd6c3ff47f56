"""The placement engine in the live cycle, on the full stack: workspaces are pinned to the node the
engine chose and land there; when the cluster then disagrees (a GPU fails between the decision and the
pod), the cluster wins, the portal says why and the workspace starts elsewhere."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.kube.client import kube
from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import wait_for
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)
MANAGED = "app.kubernetes.io/managed-by=gpu-portal"
H100_NODES = {"gpu-h100-0", "gpu-h100-1"}


def portal_pods() -> dict[int, dict[str, Any]]:
    pods = kube().list("Pod", None, MANAGED)
    return {int(p["metadata"]["labels"]["gpuportal.io/workspace-id"]): p for p in pods}


def pinned_to(pod: dict[str, Any]) -> list[str]:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [v for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"] for v in e["values"]]


@pytest.fixture
def requester(org: Org, stack: SimCluster) -> Any:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 16)
    # Pods of earlier tests go once the reconcile loop sees their workspaces gone.
    wait_for(lambda: not portal_pods(), timeout=30, what="an empty cluster")
    client = api_client_for(org.member)

    def request(name: str, count: int) -> int:
        payload = {"kind": "notebook", "name": name, "team": "alpha", "offering": "h100-80gb-hbm3",
                   "gpu_count": count, "image": "scipy"}  # fmt: skip
        response = client.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        return int(response.json()["id"])

    return request


def running(workspace_id: int) -> Workspace | None:
    workspace = Workspace.objects.get(pk=workspace_id)
    return workspace if workspace.state == "running" else None


def test_workspaces_land_on_the_node_the_engine_chose(requester: Any) -> None:
    first = requester("four-gpus", 4)
    wait_for(lambda: running(first), what="the first 4-GPU notebook to run")
    second = requester("four-more", 4)
    wait_for(lambda: running(second), what="the second 4-GPU notebook to run")
    big = requester("eight-gpus", 8)
    wait_for(lambda: running(big), what="the 8-GPU notebook to run")

    rows = Workspace.objects.in_bulk([first, second, big])
    pods = portal_pods()
    for workspace_id, workspace in rows.items():
        pod = pods[workspace_id]
        assert workspace.pinned_node in H100_NODES
        assert pinned_to(pod) == [workspace.pinned_node]  # required node affinity on the hostname
        assert pod["spec"]["nodeName"] == workspace.pinned_node == workspace.node_name
        admitted = workspace.events.filter(to_state="admitted").values_list("reason", flat=True)
        assert any(f"placed on {workspace.pinned_node}" in reason for reason in admitted)
    # The engine filled the partly used node, which kept a whole node free for the 8-GPU notebook.
    assert rows[second].pinned_node == rows[first].pinned_node
    assert rows[big].pinned_node != rows[first].pinned_node


def test_when_the_cluster_disagrees_it_wins_and_the_portal_says_why(requester: Any, stack: SimCluster) -> None:
    first = requester("first", 4)
    node = wait_for(lambda: running(first), what="the first notebook to run").pinned_node
    other = (H100_NODES - {node}).pop()
    # Hold back the next pod's creation, so that a GPU can fail between the engine's decision and the pod.
    stack.inject_fault(verb="create", resource="pods", delay_s=3.0)
    second = requester("second", 4)
    decided = wait_for(lambda: Workspace.objects.get(pk=second).pinned_node or None, what="the engine's choice")
    assert decided == node  # four free GPUs left there: the exact fit
    stack.lose_gpu(node, 7)
    try:
        moved = wait_for(lambda: running(second), timeout=40, what="the second notebook to start elsewhere")
        assert moved.node_name == other and moved.pinned_node == ""
        assert portal_pods()[second]["spec"]["nodeName"] == other
        disagreed = moved.events.filter(reason__startswith=f"The cluster disagreed with the placement on {node}")
        assert disagreed.count() == 1
        assert "Insufficient nvidia.com/gpu" in disagreed.get().reason
        assert running(first) is not None and Workspace.objects.get(pk=first).node_name == node
    finally:
        stack.clear_faults()
        stack.restore_gpu(node, 7)
