"""Admission against team quota and free capacity, first come first served."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection, connections

from scheduling.engine.admission import Wait, WaitReason
from scheduling.inventory import Capacity
from scheduling.loops.cycle import _wait_message, admit_one
from scheduling.quota.snapshot import QuotaSnapshot
from tests.catalogue import demo_nodes, install_offerings, set_quota
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace
from workspaces.transitions import set_reason


def make_workspace(org: Org, offering: GpuOffering, count: int = 1, **fields: object) -> Workspace:
    defaults: dict[str, object] = {
        "name": "ws",
        "kind": "notebook",
        "team": org.alpha,
        "owner": org.member,
        "offering": offering,
        "gpu_count": count,
        "image": "quay.io/jupyter/scipy-notebook:x",
        "cpu_millis": 1000,
        "memory_mib": 1024,
        "max_runtime_seconds": 3600,
        "gpu_equivalents": offering.gpu_equivalents * count,
    }
    return Workspace.objects.create(**(defaults | fields))


@pytest.fixture
def offerings(org: Org) -> dict[str, GpuOffering]:
    return install_offerings()


def test_it_admits_within_quota_and_explains_the_rest(org: Org, offerings: dict[str, GpuOffering]) -> None:
    set_quota(org.alpha, "H100-80GB-HBM3", 3)
    h100 = offerings["h100-80gb-hbm3"]
    capacity = Capacity.from_objects(demo_nodes(), [])
    first, second, third = (make_workspace(org, h100, n) for n in (2, 2, 1))
    assert admit_one(first, capacity) is True
    assert admit_one(second, capacity) is False
    assert admit_one(third, capacity) is True  # a later, smaller request is not blocked by a bigger one
    second.refresh_from_db()
    assert second.state == "queued"
    assert second.reason == (
        "Waiting for team quota: Alpha uses 2 of its 3 guaranteed H100-80GB-HBM3 GPU-equivalents and this needs 2."
    )
    first.refresh_from_db()
    assert first.state == "admitted"
    assert list(first.events.values_list("to_state", flat=True)) == ["admitted"]


def test_it_waits_for_capacity_with_a_scheduler_like_reason(org: Org, offerings: dict[str, GpuOffering]) -> None:
    set_quota(org.alpha, "H100-80GB-HBM3", 32)
    h100 = offerings["h100-80gb-hbm3"]
    capacity = Capacity.from_objects(demo_nodes(), [])
    admitted = [admit_one(make_workspace(org, h100, 8, name=f"big{i}"), capacity) for i in range(2)]
    ninth = make_workspace(org, h100, 1, name="ninth")
    assert admitted == [True, True]
    assert admit_one(ninth, capacity) is False
    ninth.refresh_from_db()
    assert ninth.state == "queued"
    assert ninth.reason == (
        "Waiting for a free NVIDIA H100 80GB HBM3 (whole GPU): 0/7 nodes are available: "
        "2 Insufficient nvidia.com/gpu, 5 node(s) didn't match the offering's node selector."
    )


def test_a_full_department_and_full_nodes_read_as_one_gist(org: Org, offerings: dict[str, GpuOffering]) -> None:
    """The engine may say the department is full while the nodes have room, or the nodes say 0/N: both
    are "no free GPU", and a reason that alternates between them must not add a timeline event each cycle."""
    set_quota(org.alpha, "H100-80GB-HBM3", 32)
    h100 = offerings["h100-80gb-hbm3"]
    waiting = make_workspace(org, h100, 1, name="waiting")
    quotas = QuotaSnapshot.read([org.alpha.pk])
    wait = Wait(str(waiting.pk), WaitReason.NO_CAPACITY, 1, "no free H100-80GB-HBM3: department d holds 16 of 16")
    room = Capacity.from_objects(demo_nodes(), [])
    by_quota = _wait_message(waiting, wait, room, quotas)
    assert by_quota == (
        "Waiting for a free NVIDIA H100 80GB HBM3 (whole GPU): no free H100-80GB-HBM3: department d holds 16 of 16."
    )
    full = Capacity.from_objects(demo_nodes(), [])
    for i in range(2):
        assert admit_one(make_workspace(org, h100, 8, name=f"big{i}"), full, borrowing=True)
    by_nodes = _wait_message(waiting, wait, full, quotas)
    assert by_nodes.startswith("Waiting for a free NVIDIA H100 80GB HBM3 (whole GPU): 0/7 nodes are available")
    for reason in (by_quota, by_nodes, by_quota):
        set_reason(waiting, reason, source="scheduler")
    assert waiting.events.count() == 1  # the first reason only


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_session_worker")  # its cycle would admit some of the 50 before their threads do
def test_it_holds_quota_under_concurrent_admissions(org: Org, offerings: dict[str, GpuOffering]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the race needs PostgreSQL row locks (set DATABASE_URL, as .ci/run does)")
    set_quota(org.alpha, "H100-80GB-HBM3", 8)
    h100 = offerings["h100-80gb-hbm3"]
    workspaces = [make_workspace(org, h100, 1, name=f"race{i}") for i in range(50)]
    capacity = Capacity.from_objects(demo_nodes(), [])  # 16 free H100s: quota, not capacity, is the limit
    start = threading.Barrier(len(workspaces))
    results: list[bool] = []

    def request(workspace: Workspace) -> None:
        try:
            start.wait()
            results.append(admit_one(workspace, capacity))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request, args=(w,)) for w in workspaces]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 42 + [True] * 8
    admitted = Workspace.objects.filter(state="admitted")
    assert admitted.count() == 8
    assert sum(w.gpu_equivalents for w in admitted) == Decimal(8)


def test_it_places_all_workers_or_none(org: Org, offerings: dict[str, GpuOffering]) -> None:
    set_quota(org.alpha, "H100-80GB-HBM3", 64)
    h100 = offerings["h100-80gb-hbm3"]
    capacity = Capacity.from_objects(demo_nodes(), [])
    job = make_workspace(org, h100, 8, kind="job", workers=3, gpu_equivalents=Decimal(24))
    assert admit_one(job, capacity) is False  # two 8-GPU nodes cannot host three 8-GPU workers
    pair = make_workspace(org, h100, 8, kind="job", workers=2, gpu_equivalents=Decimal(16), name="pair")
    assert admit_one(pair, capacity) is True  # nothing was held back by the failed attempt


def test_cpu_only_requests_need_no_quota(org: Org, offerings: dict[str, GpuOffering]) -> None:
    capacity = Capacity.from_objects(demo_nodes(), [])
    workspace = make_workspace(org, offerings["cpu"], 0)
    assert admit_one(workspace, capacity) is True
