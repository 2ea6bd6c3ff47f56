"""The idle loop over stored samples: an idle notebook is warned, then reclaimed after the grace period
(resumable, its teardown owed, home volume kept); use or a keep-alive lifts the warning; missing telemetry
reclaims nothing; an idle training job is flagged once, never stopped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.loops.idle import apply_idle_rules
from scheduling.models import ActivitySample
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.access import state_allows
from workspaces.models import Workspace, WorkspaceEvent

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
LONG_AGO = T0 - timedelta(hours=6)


@pytest.fixture
def notebook(org: Org) -> Workspace:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(org.alpha, org.member, offering, state="running", started_at=LONG_AGO)


def collect(workspace: Workspace, start: datetime, end: datetime, *, gpu: float | None = 0.0, busy: int = 0) -> None:
    """Samples every 30 s from start to end, as the collector writes them (GPU figure None: no source)."""
    known = gpu is not None
    figures = {"source": "prometheus" if known else "none", "gpu_active": gpu, "gpu_seconds": 30 if known else 0}
    steps = int((end - start).total_seconds() // 30) + 1
    ActivitySample.objects.bulk_create(
        ActivitySample(
            workspace=workspace,
            at=at,
            seconds=30,
            gpu_observed_at=at if known else None,
            kernels=1,
            busy_kernels=busy,
            connections=0,
            last_activity=LONG_AGO,
            **figures,
        )
        for at in (start + timedelta(seconds=30 * i) for i in range(steps))
    )


def state_of(workspace: Workspace) -> Workspace:
    workspace.refresh_from_db()
    return workspace


def events(workspace: Workspace) -> list[str]:
    return list(WorkspaceEvent.objects.filter(workspace=workspace, source="idle").values_list("reason", flat=True))


def test_idle_then_warned_then_reclaimed_after_the_grace_period(notebook: Workspace) -> None:
    collect(notebook, T0 - timedelta(minutes=61), T0)
    assert apply_idle_rules(T0) == {"warn": 1}
    assert state_of(notebook).idle_warned_at == T0
    assert "will be reclaimed at 09:15 UTC" in events(notebook)[0] and "GPU activity at most 0%" in events(notebook)[0]
    collect(notebook, T0, T0 + timedelta(minutes=10))
    assert apply_idle_rules(T0 + timedelta(minutes=10)) == {}  # still in its grace period
    collect(notebook, T0 + timedelta(minutes=10), T0 + timedelta(minutes=15))
    assert apply_idle_rules(T0 + timedelta(minutes=15)) == {"reclaim": 1}
    reclaimed = state_of(notebook)
    assert reclaimed.state == "reclaimed" and reclaimed.idle_warned_at is None
    assert reclaimed.teardown_requested_at is not None  # its pods go; the home volume is kept (no delete)
    assert state_allows(reclaimed, "resume")
    assert "Home volume kept" in reclaimed.reason


def test_a_busy_kernel_at_zero_gpu_lifts_the_warning(notebook: Workspace) -> None:
    collect(notebook, T0 - timedelta(minutes=61), T0)
    apply_idle_rules(T0)
    collect(notebook, T0, T0 + timedelta(minutes=5), busy=1)  # CPU preprocessing
    assert apply_idle_rules(T0 + timedelta(minutes=5)) == {"clear": 1}
    assert state_of(notebook).idle_warned_at is None
    assert "a kernel was busy" in events(notebook)[-1]


def test_a_keep_alive_lifts_the_warning_and_postpones_reclaim(notebook: Workspace) -> None:
    collect(notebook, T0 - timedelta(minutes=61), T0 + timedelta(minutes=20))
    apply_idle_rules(T0)
    Workspace.objects.filter(pk=notebook.pk).update(kept_alive_until=T0 + timedelta(hours=4))
    assert apply_idle_rules(T0 + timedelta(minutes=20)) == {"clear": 1}
    assert state_of(notebook).state == "running"


def test_a_resumed_notebook_is_judged_on_its_new_run_only(notebook: Workspace) -> None:
    collect(notebook, T0 - timedelta(minutes=61), T0)  # the idle hour of its previous run
    resumed_at = T0 + timedelta(minutes=1)
    Workspace.objects.filter(pk=notebook.pk).update(started_at=resumed_at)
    collect(notebook, resumed_at, resumed_at + timedelta(minutes=5))
    assert apply_idle_rules(resumed_at + timedelta(minutes=5)) == {}  # 5 min of the new run: not yet judged
    assert state_of(notebook).idle_warned_at is None
    collect(notebook, resumed_at + timedelta(minutes=5, seconds=30), resumed_at + timedelta(minutes=61))
    assert apply_idle_rules(resumed_at + timedelta(minutes=61)) == {"warn": 1}  # a full idle window of its own


def test_missing_telemetry_reclaims_nothing(notebook: Workspace) -> None:
    collect(notebook, T0 - timedelta(minutes=61), T0)
    apply_idle_rules(T0)
    collect(notebook, T0, T0 + timedelta(minutes=30), gpu=None)  # the source went away
    assert apply_idle_rules(T0 + timedelta(minutes=30)) == {}
    assert state_of(notebook).state == "running"


def test_an_idle_training_job_is_flagged_once_and_keeps_running(org: Org, notebook: Workspace) -> None:
    Workspace.objects.filter(pk=notebook.pk).update(kind="job")
    collect(notebook, T0 - timedelta(minutes=121), T0)
    assert apply_idle_rules(T0) == {"flag_stuck": 1}
    assert apply_idle_rules(T0) == {}
    job = state_of(notebook)
    assert job.state == "running" and job.flagged_stuck_at == T0
    assert events(job)[0].startswith("Possibly stuck")
