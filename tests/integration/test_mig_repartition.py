"""MIG layouts that follow the queue, on a simulated cluster of two 8 x H100 nodes with MIG off.

- On the full stack: 1g.10gb requests fill the queue while a whole-GPU notebook runs on one node; the
  worker's repartition loop splits the other node, the requests run there, and the notebook is untouched.
- Pass by pass in this process: a GPU pod bound to the node past the cordon calls the change off, and a
  layout the MIG manager fails to apply is asked back; either way the old layout stays, the node is
  uncordoned and the audit log says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone

from portal.models import AuditEvent
from scheduling.discovery import propose_offerings
from scheduling.kube import keys
from scheduling.kube.client import kube, reset_client
from scheduling.loops import mig_repartition
from scheduling.loops.mig_repartition import FAILED, STARTED, SUCCEEDED
from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import parse_cluster
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests import factories
from tests.catalogue import install_images, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import SPEED, Worker, wait_for
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"
MIG_1G = "h100-80gb-hbm3-1g-10gb"
WHOLE = "h100-80gb-hbm3"
NODES = ("gpu-h100-0", "gpu-h100-1")
MANAGED = f"{keys.MANAGED_BY}={keys.MANAGER}"
# The operator's ConfigMap with a broken all-1g.10gb (eight 1g instances do not fit one GPU): mig-parted fails.
BROKEN_1G = {"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 8}}]}


def cluster_doc(*, layout: str = "all-disabled", mig_configs: dict[str, Any] | None = None) -> dict[str, Any]:
    gpu_node = {"cpu": 224, "memory": "2Ti", "gpu": {"model": H100, "count": 8}, "migConfig": layout}
    doc: dict[str, Any] = {
        "seed": 3,
        "nodes": [{"name": name, **gpu_node} for name in NODES] + [{"name": "cpu-0", "cpu": 64, "memory": "256Gi"}],
    }
    if mig_configs:
        doc["migConfigs"] = mig_configs
    return doc


def install_h100_offerings() -> None:
    """The whole-GPU offering discovery proposes today, and the 1g.10gb one it would propose from a split node
    (an operator creates it ahead: no node offers it yet)."""
    for layout in ("all-disabled", "all-1g.10gb"):
        nodes = build_cluster_nodes(parse_cluster(cluster_doc(layout=layout)), created="2026-01-01T00:00:00Z")
        for proposal in propose_offerings(nodes):
            fields = asdict(proposal)
            fields.pop("nodes")
            GpuOffering.objects.get_or_create(slug=fields.pop("slug"), defaults=fields)


@contextmanager
def own_cluster(tmp_path: Path, settings: Any, doc: dict[str, Any]) -> Iterator[SimCluster]:
    path = tmp_path / "two-h100.yaml"
    path.write_text(yaml.safe_dump(doc))
    with running_simcluster(path, seed=3, speed=SPEED, tmp_dir=tmp_path) as cluster:
        settings.KUBECONFIG = str(cluster.kubeconfig_path)
        settings.NOTEBOOK_PROXY_URL = cluster.plain_url
        reset_client()
        try:
            yield cluster
        finally:
            reset_client()


def nodes() -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in kube().list("Node", None, "")}


def labels(node: str) -> dict[str, str]:
    return dict(nodes()[node]["metadata"].get("labels") or {})


def cordoned(node: str) -> bool:
    return bool(nodes()[node].get("spec", {}).get("unschedulable"))


def audit(node: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(target_type="node", target_id=node).order_by("at", "id"))


def settled_as(node: str, layout: str) -> bool:
    """The node is back to ``layout``: applied, uncordoned, and no mark of a change left on it."""
    seen = labels(node)
    return (
        seen.get(keys.MIG_CONFIG) == layout
        and seen.get(keys.MIG_CONFIG_STATE) == "success"
        and not any(k.startswith(keys.MIG_REPARTITION) for k in seen)
        and not cordoned(node)
    )


# -- the full stack: the queue splits the idle node ----------------------------------------------------------


@pytest.fixture
def two_h100(tmp_path: Path, settings: Any) -> Iterator[SimCluster]:
    with own_cluster(tmp_path, settings, cluster_doc()) as cluster:
        yield cluster


@pytest.fixture
def mig_stack(
    two_h100: SimCluster, stack: SimCluster, dedicated_worker: Callable[..., Worker], settings: Any
) -> SimCluster:
    """A worker of the test's own on the two-node cluster, with the repartition loop on and quick."""
    dedicated_worker(
        KUBECONFIG=str(two_h100.kubeconfig_path),
        MIG_REPARTITION_ENABLED="true",
        MIG_REPARTITION_INTERVAL_SECONDS="1",
        MIG_REPARTITION_MIN_WAIT_SECONDS="0",
    )
    settings.KUBECONFIG = str(two_h100.kubeconfig_path)  # `stack` pointed the web side at the session's cluster
    settings.NOTEBOOK_PROXY_URL = two_h100.plain_url
    reset_client()
    return two_h100


def request(org: Org, name: str, offering: str, count: int) -> int:
    payload = {"kind": "notebook", "name": name, "team": "alpha", "offering": offering, "gpu_count": count,
               "image": "scipy"}  # fmt: skip
    response = api_client_for(org.member).post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    return int(response.json()["id"])


def running(workspace_id: int) -> Workspace | None:
    workspace = Workspace.objects.get(pk=workspace_id)
    return workspace if workspace.state == Workspace.State.RUNNING else None


def pod_of(workspace_id: int) -> dict[str, Any]:
    [pod] = [
        p for p in kube().list("Pod", None, MANAGED) if p["metadata"]["labels"][keys.WORKSPACE_ID] == str(workspace_id)
    ]
    return pod


@pytest.mark.django_db(transaction=True)
def test_queued_1g_requests_split_the_idle_node_and_nothing_running_is_disturbed(
    org: Org, mig_stack: SimCluster
) -> None:
    install_h100_offerings()
    install_images()
    set_quota(org.alpha, H100, 16)
    busy = request(org, "whole-node", WHOLE, 8)
    busy_node = wait_for(lambda: running(busy), timeout=20, what="the 8-GPU notebook to run").node_name
    busy_pod = pod_of(busy)
    [idle_node] = set(NODES) - {busy_node}

    slices = [request(org, f"slice-{i}", MIG_1G, 1) for i in range(10)]
    wait_for(lambda: all(running(s) for s in slices), timeout=30, what="the 1g.10gb notebooks to run")

    assert set(Workspace.objects.filter(pk__in=slices).values_list("node_name", flat=True)) == {idle_node}
    assert settled_as(idle_node, "all-1g.10gb")
    assert nodes()[idle_node]["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    # The busy node kept its layout, its notebook and the very same pod.
    assert settled_as(busy_node, "all-disabled")
    assert running(busy) is not None and Workspace.objects.get(pk=busy).node_name == busy_node
    still = pod_of(busy)
    assert still["metadata"]["uid"] == busy_pod["metadata"]["uid"] and still["status"]["phase"] == "Running"
    assert audit(busy_node) == []
    started, succeeded = audit(idle_node)
    assert (started.action, succeeded.action) == (STARTED, SUCCEEDED)
    assert started.before == {"config": "all-disabled"}
    reason = str((started.after or {}).get("reason"))
    assert (started.after or {}).get("config") == "all-1g.10gb"
    # The pass may run while the ten requests are still arriving (one API call each): it names those queued.
    unserved = re.match(r"queued and unserved: (\d+) x mig-1g\.10gb;", reason)
    assert unserved and 1 <= int(unserved.group(1)) <= 10, reason
    assert (succeeded.after or {}).get("devices", {}).get("nvidia.com/mig-1g.10gb") == 56


# -- pass by pass: how a repartition fails -------------------------------------------------------------------


@pytest.fixture
def queued_slices(org: Org, settings: Any) -> list[Workspace]:
    settings.MIG_REPARTITION_MIN_WAIT_SECONDS = 0
    install_h100_offerings()
    offering = GpuOffering.objects.get(slug=MIG_1G)
    return [factories.make_workspace(org.alpha, org.member, offering) for _ in range(10)]


def gpu_pod_on(node: str) -> dict[str, Any]:
    """A pod bound straight to ``node`` (``nodeName``: no scheduler, so a cordon does not stop it)."""
    kube().ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "intruders"}})
    container = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}  # fmt: skip
    spec = {"nodeName": node, "containers": [container], "restartPolicy": "Never",
            "tolerations": [{"key": keys.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder", "namespace": "intruders"}, "spec": spec}
    return kube().ensure(pod)


@pytest.mark.django_db
def test_a_gpu_pod_that_lands_while_draining_calls_the_change_off(
    tmp_path: Path, settings: Any, queued_slices: list[Workspace]
) -> None:
    with own_cluster(tmp_path, settings, cluster_doc()):
        first = mig_repartition.run_pass(kube(), timezone.now())
        assert first.started == ("gpu-h100-0",)  # both idle: the first by name
        assert cordoned("gpu-h100-0") and labels("gpu-h100-0")[keys.MIG_REPARTITION] == "draining"
        gpu_pod_on("gpu-h100-0")

        second = mig_repartition.run_pass(kube(), timezone.now())
        assert second.failed == ("gpu-h100-0",)
        assert settled_as("gpu-h100-0", "all-disabled")
        started, failed = audit("gpu-h100-0")
        assert (started.action, failed.action) == (STARTED, FAILED)
        assert failed.after == {
            "config": "all-disabled",
            "wanted": "all-1g.10gb",
            "reason": "GPU pods reached the node while it was cordoned (intruders/intruder); the portal does not "
            "evict running work, so all-disabled stays",
        }
        # The node is left alone for a while; the other idle one is tried instead.
        assert mig_repartition.run_pass(kube(), timezone.now()).started == ("gpu-h100-1",)


@pytest.mark.django_db
def test_a_layout_the_mig_manager_fails_to_apply_is_asked_back_and_audited(
    tmp_path: Path, settings: Any, queued_slices: list[Workspace]
) -> None:
    with own_cluster(tmp_path, settings, cluster_doc(mig_configs=BROKEN_1G)):
        assert mig_repartition.run_pass(kube(), timezone.now()).started == ("gpu-h100-0",)
        assert mig_repartition.run_pass(kube(), timezone.now()).applying == ("gpu-h100-0",)
        wait_for(lambda: labels("gpu-h100-0").get(keys.MIG_CONFIG_STATE) == "failed", what="the MIG manager to fail")

        assert mig_repartition.run_pass(kube(), timezone.now()).failed == ("gpu-h100-0",)
        wait_for(lambda: settled_as("gpu-h100-0", "all-disabled"), what="the old layout back")
        assert nodes()["gpu-h100-0"]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        failed = audit("gpu-h100-0")[-1]
        assert failed.action == FAILED
        assert (failed.after or {}).get("reason") == (
            "the MIG manager reported nvidia.com/mig.config.state=failed for all-1g.10gb (its log on the node says "
            "why); asked for all-disabled back"
        )
        assert Workspace.objects.filter(state=Workspace.State.QUEUED).count() == 10  # still waiting, untouched
