"""Samples stay raw for a day, then one row per workspace and hour that keeps what the ledger weighs and the
pages show; after the retention period they go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.loops.telemetry_retention import compact, expire
from scheduling.models import ActivitySample
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import Workspace

NOW = datetime(2026, 12, 3, 12, 20, tzinfo=UTC)
OLD_HOUR = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # more than 24 h ago


@pytest.fixture
def workspace(org: Org) -> Workspace:
    return make_workspace(org.alpha, org.member, install_offerings()["h100-80gb-hbm3"], state="running")


def sample(workspace: Workspace, at: datetime, active: float | None, **figures: object) -> ActivitySample:
    return ActivitySample.objects.create(
        workspace=workspace, at=at, seconds=30, gpu_seconds=30 if active is not None else 0,
        idle_gpu_seconds=30 if active is not None and active < 0.05 else 0,
        source="prometheus" if active is not None else "none", gpu_active=active, **figures,
    )  # fmt: skip


def gpu_hours(workspace: Workspace) -> float:
    return sum((s.gpu_active or 0) * s.gpu_seconds for s in ActivitySample.objects.filter(workspace=workspace)) / 3600


def test_an_old_hour_becomes_one_row_that_weighs_the_same(workspace: Workspace) -> None:
    for i, active in enumerate([0.9, 0.01, None, 0.89]):  # one pass without telemetry
        at = OLD_HOUR + timedelta(minutes=10 * i)
        sample(workspace, at, active, fb_used_mib=1000.0 * (i + 1), kernels=1, busy_kernels=i % 2, last_activity=at)
    recent = sample(workspace, NOW - timedelta(hours=2), 0.5)
    before = gpu_hours(workspace)
    assert compact(NOW) == 4
    (hourly,) = ActivitySample.objects.filter(workspace=workspace, hourly=True)
    assert (hourly.at, hourly.seconds, hourly.gpu_seconds) == (OLD_HOUR, 120, 90)
    assert hourly.gpu_active == pytest.approx(0.6)  # the pass without a figure does not dilute it
    assert hourly.idle_gpu_seconds == 30  # the one pass below the idle test
    assert (hourly.fb_used_mib, hourly.kernels, hourly.busy_kernels) == (4000.0, 1, 1)
    assert hourly.last_activity == OLD_HOUR + timedelta(minutes=30)
    assert hourly.source == "prometheus"
    assert gpu_hours(workspace) == pytest.approx(before)  # the ledger's figure is unchanged
    assert ActivitySample.objects.filter(pk=recent.pk, hourly=False).exists()  # within 24 h: still raw
    assert compact(NOW) == 0  # once
    assert compact(NOW + timedelta(hours=1)) == 0


def test_an_hour_without_any_gpu_figure_keeps_none(workspace: Workspace) -> None:
    sample(workspace, OLD_HOUR, None)
    sample(workspace, OLD_HOUR + timedelta(minutes=1), None)
    compact(NOW)
    (hourly,) = ActivitySample.objects.filter(workspace=workspace)
    assert hourly.gpu_active is None and hourly.gpu_seconds == 0 and hourly.seconds == 60


def test_each_workspace_and_hour_is_its_own_row(org: Org, workspace: Workspace) -> None:
    other = make_workspace(org.alpha, org.member, workspace.offering, state="running")
    for ws in (workspace, other):
        for hour in (0, 1):
            sample(ws, OLD_HOUR + timedelta(hours=hour, minutes=5), 0.5)
    assert compact(NOW) == 4
    assert ActivitySample.objects.filter(hourly=True).count() == 4


def test_samples_past_retention_are_deleted(workspace: Workspace, settings) -> None:
    settings.TELEMETRY_RETENTION_DAYS = 30
    sample(workspace, NOW - timedelta(days=31), 0.5)
    kept = sample(workspace, NOW - timedelta(days=29), 0.5)
    assert expire(NOW) == 1
    assert list(ActivitySample.objects.values_list("pk", flat=True)) == [kept.pk]
