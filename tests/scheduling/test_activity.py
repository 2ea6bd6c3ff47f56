"""What pages and the API show of telemetry: the latest figures and whether they are fresh, the idle state,
GPU time held idle per member, allocated against active per GPU model; a fixed number of queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling import activity
from scheduling.models import ActivitySample, TeamPolicy
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import GpuOffering, Workspace

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GAP = timedelta(seconds=90)


def sample(workspace: Workspace, at: datetime, gpu: float | None = 0.5, **fields: object) -> ActivitySample:
    figures: dict[str, object] = {"kernels": 1, "busy_kernels": 0, "connections": 1, "last_activity": at} | fields
    return ActivitySample.objects.create(
        workspace=workspace, at=at, seconds=30, gpu_seconds=30 if gpu is not None else 0,
        idle_gpu_seconds=30 if gpu is not None and gpu < 0.05 else 0, source="scrape" if gpu is not None else "none",
        gpu_active=gpu, gpu_observed_at=at if gpu is not None else None, fb_used_mib=2048.0, fb_total_mib=10240.0,
        **figures,
    )  # fmt: skip


@pytest.fixture
def offerings() -> dict[str, GpuOffering]:
    return install_offerings()


def running(
    org: Org, offerings: dict[str, GpuOffering], slug: str = "a100-sxm4-80gb-1g-10gb", **fields: object
) -> Workspace:
    return make_workspace(org.alpha, org.member, offerings[slug], state="running", started_at=NOW - timedelta(hours=1),
                          **fields)  # fmt: skip


def test_staleness_names_what_is_missing(org: Org, offerings: dict[str, GpuOffering]) -> None:
    ws = running(org, offerings)
    fresh = sample(ws, NOW - timedelta(seconds=20))
    assert activity.staleness(fresh, now=NOW, max_gap=GAP, has_gpu=True, notebook=True) == ""
    assert "No telemetry yet" in activity.staleness(None, now=NOW, max_gap=GAP, has_gpu=True, notebook=True)
    old = sample(ws, NOW - timedelta(minutes=5))
    assert "stale: last collected 300 s ago" in activity.staleness(
        old, now=NOW, max_gap=GAP, has_gpu=True, notebook=True
    )
    no_gpu = sample(ws, NOW - timedelta(seconds=10), gpu=None)
    assert "GPU telemetry" in activity.staleness(no_gpu, now=NOW, max_gap=GAP, has_gpu=True, notebook=True)
    assert activity.staleness(no_gpu, now=NOW, max_gap=GAP, has_gpu=False, notebook=True) == ""  # a CPU notebook
    no_kernel = sample(ws, NOW - timedelta(seconds=10), kernels=None)
    assert "notebook's activity" in activity.staleness(no_kernel, now=NOW, max_gap=GAP, has_gpu=True, notebook=True)


def test_latest_is_the_newest_sample_and_the_idle_state(org: Org, offerings: dict[str, GpuOffering]) -> None:
    warned = NOW - timedelta(minutes=5)
    ws = running(org, offerings, idle_warned_at=warned, keep_alives_used=1)
    sample(ws, NOW - timedelta(seconds=60), gpu=0.9)
    sample(ws, NOW - timedelta(seconds=30), gpu=0.01)
    stopped = make_workspace(org.alpha, org.member, offerings["a100-sxm4-80gb-1g-10gb"], state="stopped")
    TeamPolicy.objects.create(team=org.alpha, idle_grace_minutes=20, keep_alives_per_run=3)
    found = activity.latest([ws, stopped], NOW)
    assert set(found) == {ws.pk}  # only running workspaces have activity
    a = found[ws.pk]
    assert a.gpu_active == 0.01 and a.stale == "" and a.fb_total_mib == 10240.0
    assert a.reclaim_at == warned + timedelta(minutes=20)
    assert a.keep_alives_left == 2
    assert a.as_dict()["idle_warned_at"] == warned.isoformat()


def test_latest_costs_the_same_queries_for_many_workspaces(org: Org, offerings: dict[str, GpuOffering]) -> None:
    def count(n: int) -> int:
        made = [running(org, offerings) for _ in range(n)]
        for ws in made:
            sample(ws, NOW - timedelta(seconds=10))
        with CaptureQueriesContext(connection) as queries:
            activity.latest(made, NOW)
        return len(queries)

    assert count(2) == count(12)


def test_idle_offenders_weigh_idle_gpu_time_by_gpu_equivalents(org: Org, offerings: dict[str, GpuOffering]) -> None:
    whole = running(org, offerings, slug="h100-80gb-hbm3")
    slice_ = make_workspace(org.alpha, org.lead, offerings["a100-sxm4-80gb-1g-10gb"], state="running")
    for i in range(120):  # an hour of idle samples, 20 days ago, on the whole GPU
        sample(whole, NOW - timedelta(days=20, seconds=30 * i), gpu=0.0)
    for i in range(120):  # an hour yesterday, idle half of it, on the 1/7 slice
        sample(slice_, NOW - timedelta(days=1, seconds=30 * i), gpu=0.0 if i % 2 else 0.8)
    rows = {r["user"]: r for r in activity.idle_offenders(org.alpha.pk, NOW)}
    member, lead = rows[org.member.username], rows[org.lead.username]
    assert member["idle_gpu_hours_7d"] == 0 and member["idle_gpu_hours_30d"] == pytest.approx(1.0 * whole_weight(whole))
    assert lead["idle_gpu_hours_7d"] == pytest.approx(0.5 * float(slice_.gpu_equivalents), abs=1e-3)
    assert lead["observed_gpu_hours_7d"] == pytest.approx(float(slice_.gpu_equivalents), abs=1e-3)
    assert activity.idle_offenders(org.beta.pk, NOW) == []


def whole_weight(workspace: Workspace) -> float:
    return float(workspace.gpu_equivalents)


def test_active_by_model_counts_fresh_figures_only(org: Org, offerings: dict[str, GpuOffering]) -> None:
    busy = running(org, offerings, slug="h100-80gb-hbm3")
    idle = running(org, offerings, slug="h100-80gb-hbm3")
    silent = running(org, offerings, slug="h100-80gb-hbm3")
    sample(busy, NOW - timedelta(seconds=10), gpu=0.8)
    sample(idle, NOW - timedelta(seconds=10), gpu=0.0)
    sample(silent, NOW - timedelta(minutes=10), gpu=0.9)  # stale
    flavour = busy.offering.flavour
    figures = activity.active_by_model(NOW)[flavour]
    weight = float(busy.gpu_equivalents)
    assert float(figures.allocated) == pytest.approx(3 * weight)
    assert figures.active == pytest.approx(0.8 * weight)
    assert float(figures.idle) == pytest.approx(weight) and float(figures.unknown) == pytest.approx(weight)
