"""The MIG repartition pass against a stand-in for the Kubernetes API (nodes as the simulated cluster renders
them): what counts as demand, a change that stays pending too long, and success only once the device plugin
advertises the new layout. The whole flow on a live cluster: tests/integration/test_mig_repartition.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from django.utils import timezone

from portal.models import AuditEvent
from scheduling import tasks
from scheduling.kube import keys
from scheduling.kube.calls import Kube
from scheduling.loops import mig_repartition
from scheduling.loops.mig_repartition import FAILED, STARTED, SUCCEEDED
from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import parse_cluster
from tests import factories
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"
NODE = "gpu-h100-0"


class StandInKube:
    """Lists the nodes and pods it holds; patches nodes as the API server would."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]] | None = None) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = pods or []
        self.patches: list[tuple[str, dict[str, str | None], bool]] = []

    def list(self, kind: str, namespace: str | None, label_selector: str = "") -> list[dict[str, Any]]:
        return list(self.nodes.values()) if kind == "Node" else list(self.pods)

    def patch_node(self, name: str, labels: dict[str, str | None], unschedulable: bool) -> dict[str, Any]:
        self.patches.append((name, dict(labels), unschedulable))
        node = self.nodes[name]
        own = node["metadata"].setdefault("labels", {})
        for key, value in labels.items():
            if value is None:
                own.pop(key, None)
            else:
                own[key] = value
        node["spec"]["unschedulable"] = unschedulable
        return node


def h100_nodes(layout: str = "all-disabled") -> list[dict[str, Any]]:
    gpu = {"cpu": 224, "memory": "2Ti", "gpu": {"model": H100, "count": 8}, "migConfig": layout}
    doc = {"seed": 3, "nodes": [{"name": NODE, **gpu}]}
    return build_cluster_nodes(parse_cluster(doc), created="2026-01-01T00:00:00Z")


def applying(node: dict[str, Any], state: str) -> dict[str, Any]:
    """``node`` mid-change from all-disabled to all-1g.10gb, its MIG manager at ``state``."""
    node["metadata"]["labels"] |= {
        keys.MIG_REPARTITION: "applying",
        keys.MIG_REPARTITION_FROM: "all-disabled",
        keys.MIG_REPARTITION_TO: "all-1g.10gb",
        keys.MIG_CONFIG: "all-1g.10gb",
        keys.MIG_CONFIG_STATE: state,
    }
    node["spec"]["unschedulable"] = True
    return node


def offering(kind: str, resource: str, slug: str) -> GpuOffering:
    return GpuOffering.objects.create(
        slug=slug, display_name=slug, kind=kind, gpu_model=H100, resource_name=resource,
        gpu_equivalents="0.1429" if kind == "mig" else 1, allowed_counts=[1, 2, 4, 8],
    )  # fmt: skip


def run(kube: StandInKube, *, later_s: float = 0.0) -> mig_repartition.PassResult:
    return mig_repartition.run_pass(cast(Kube, kube), timezone.now() + timedelta(seconds=later_s))


def test_demand_is_what_waits_for_the_cluster_long_enough(org: Org, settings: Any) -> None:
    settings.MIG_REPARTITION_MIN_WAIT_SECONDS = 60
    mig = offering("mig", "nvidia.com/mig-1g.10gb", "h100-1g")
    whole = offering("whole", "nvidia.com/gpu", "h100")
    make = factories.make_workspace
    make(org.alpha, org.member, mig)
    make(org.alpha, org.member, mig, reason="Waiting for a free H100 1g.10gb: 0/1 nodes are available.")
    make(org.alpha, org.member, whole, kind=Workspace.Kind.JOB, gpu_count=4, workers=2, command=["train"])
    make(org.alpha, org.member, mig, reason="Waiting for team quota: Alpha uses 8 of its 8 guaranteed ...")
    make(org.alpha, org.member, mig, state=Workspace.State.RUNNING)
    dra = GpuOffering.objects.create(
        slug="h100-1g-dra", display_name="H100 1g.10gb (DRA)", kind="mig", gpu_model=H100, mig_profile="1g.10gb",
        gpu_equivalents="0.1429", allowed_counts=[1], device_class="mig.nvidia.com",
        device_selector="device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    )  # fmt: skip
    make(org.alpha, org.member, dra)  # a DRA node serves it; splitting a device-plugin node would not
    Workspace.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    make(org.alpha, org.member, mig)  # queued a moment ago: the next cycle may well start it
    assert mig_repartition.queued_demand(timezone.now()) == {
        (H100, "nvidia.com/mig-1g.10gb"): 2,
        (H100, "nvidia.com/gpu"): 8,
    }


@pytest.mark.django_db
def test_a_change_still_pending_after_the_timeout_is_asked_back() -> None:
    kube = StandInKube([applying(h100_nodes()[0], "pending")])
    AuditEvent.objects.create(action=STARTED, target_type="node", target_id=NODE, before={}, after={})
    assert run(kube) == mig_repartition.PassResult()  # pending within the timeout: look again later
    assert kube.patches == []

    assert run(kube, later_s=901).failed == (NODE,)
    [(name, labels, unschedulable)] = kube.patches
    assert (name, unschedulable) == (NODE, False)
    assert labels == {
        keys.MIG_REPARTITION: None,
        keys.MIG_REPARTITION_FROM: None,
        keys.MIG_REPARTITION_TO: None,
        keys.MIG_CONFIG: "all-disabled",
    }
    failed = AuditEvent.objects.get(action=FAILED)
    assert failed.after == {
        "config": "all-disabled",
        "wanted": "all-1g.10gb",
        "reason": "nvidia.com/mig.config.state still pending after 900 s; asked for all-disabled back",
    }


@pytest.mark.django_db
def test_success_waits_for_the_device_plugin_then_uncordons_and_proposes_the_new_offering() -> None:
    node = applying(h100_nodes()[0], "success")  # the state label reads success, allocatable is still old
    kube = StandInKube([node])
    AuditEvent.objects.create(action=STARTED, target_type="node", target_id=NODE, before={}, after={})
    assert run(kube) == mig_repartition.PassResult() and kube.patches == []

    node["status"] = h100_nodes("all-1g.10gb")[0]["status"]
    assert run(kube).succeeded == (NODE,)
    assert kube.patches[-1][2] is False and keys.MIG_REPARTITION not in node["metadata"]["labels"]
    succeeded = AuditEvent.objects.get(action=SUCCEEDED)
    created = GpuOffering.objects.get(resource_name="nvidia.com/mig-1g.10gb")
    assert (created.kind, created.gpu_model, created.mig_profile) == ("mig", H100, "1g.10gb")
    assert succeeded.after == {
        "config": "all-1g.10gb",
        "devices": {"nvidia.com/mig-1g.10gb": 56},  # whole GPUs gone: kept at zero in allocatable, left out here
        "offerings_created": [created.slug],
    }
    assert run(kube) == mig_repartition.PassResult()  # done: the queue is empty


@pytest.mark.django_db
def test_nothing_queued_nothing_changed() -> None:
    kube = StandInKube(h100_nodes())
    assert run(kube) == mig_repartition.PassResult() and kube.patches == []


def test_the_task_does_nothing_while_switched_off(settings: Any) -> None:
    settings.MIG_REPARTITION_ENABLED = False
    settings.KUBECONFIG = ""  # it would fail loudly had it tried the cluster
    assert tasks.repartition_mig() == {}


def test_beat_runs_a_pass_every_interval(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["mig-repartition"]
    assert entry["task"] == "scheduling.repartition_mig"
    assert entry["schedule"] == settings.MIG_REPARTITION_INTERVAL_SECONDS == 15.0
    assert entry["options"] == {"expires": 15.0}
