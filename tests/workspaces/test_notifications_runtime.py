"""Near the runtime limit: one warning per run, NOTIFY_RUNTIME_WARNING_MINUTES ahead, again after an
extension, a resume or a restart of the pods."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from scheduling.loops import tasknames
from scheduling.loops.runtime_warning import due, warn_near_deadline
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces import actions
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications import delivery
from workspaces.notifications.models import Notification

WINDOW = timedelta(minutes=30)


def _at(minutes: float) -> datetime:
    return datetime(2026, 3, 1, 12, 0).astimezone() + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("deadline_in", "warned", "expected"),
    [
        (20, None, True),
        (30, None, True),  # the window's edge
        (31, None, False),
        (0, None, False),  # reached: the reconcile loop stops it
        (-5, None, False),
        (20, -10, True),  # warned before this run started (pods re-created)
        (20, 5, False),  # warned during this run
    ],
)
def test_due(deadline_in: float, warned: float | None, expected: bool) -> None:
    started = _at(0)
    now = _at(60)
    assert (
        due(
            deadline=now + timedelta(minutes=deadline_in),
            now=now,
            window=WINDOW,
            started_at=started,
            warned_at=None if warned is None else started + timedelta(minutes=warned),
        )
        is expected
    )


def test_nothing_started_is_never_due() -> None:
    assert not due(deadline=None, now=_at(0), window=WINDOW, started_at=None, warned_at=None)


@pytest.fixture
def running(org: Org) -> Workspace:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(
        org.alpha,
        org.member,
        offering,
        state="running",
        started_at=timezone.now() - timedelta(minutes=40),
        max_runtime_seconds=3600,
    )


def warnings(workspace: Workspace) -> list[WorkspaceEvent]:
    return list(WorkspaceEvent.objects.filter(workspace=workspace, details__event="runtime_warning"))


def test_it_warns_once_per_run(running: Workspace, django_capture_on_commit_callbacks: Any) -> None:
    assert settings.NOTIFY_RUNTIME_WARNING_MINUTES == 30
    with django_capture_on_commit_callbacks() as callbacks:
        assert warn_near_deadline(timezone.now()) == 1
    assert len(callbacks) == 1  # its delivery is enqueued after commit
    [event] = warnings(running)
    assert event.source == "runtime"
    assert "Near its runtime limit" in event.reason and "(in 20 min)" in event.reason
    running.refresh_from_db()
    assert running.runtime_warned_at is not None
    assert warn_near_deadline(timezone.now()) == 0
    assert len(warnings(running)) == 1
    delivery.deliver(event.pk)
    assert Notification.objects.get(event=event).kind == "runtime_warning"


def test_it_does_not_warn_early_or_late(org: Org, running: Workspace) -> None:
    Workspace.objects.filter(pk=running.pk).update(started_at=timezone.now() - timedelta(minutes=10))
    assert warn_near_deadline(timezone.now()) == 0
    Workspace.objects.filter(pk=running.pk).update(started_at=timezone.now() - timedelta(minutes=61))
    assert warn_near_deadline(timezone.now()) == 0
    Workspace.objects.filter(pk=running.pk).update(started_at=timezone.now() - timedelta(minutes=40), state="stopped")
    assert warn_near_deadline(timezone.now()) == 0


def test_an_extension_owes_a_new_warning(org: Org, running: Workspace) -> None:
    assert warn_near_deadline(timezone.now()) == 1
    actions.do_extend(org.member, running, 1)
    running.refresh_from_db()
    assert running.runtime_warned_at is None
    assert warn_near_deadline(timezone.now()) == 0  # 80 min left now
    later = timezone.now() + timedelta(minutes=60)
    assert warn_near_deadline(later) == 1
    assert len(warnings(running)) == 2


def test_a_restarted_run_is_warned_again(running: Workspace) -> None:
    now = timezone.now()
    assert warn_near_deadline(now) == 1
    # Ten minutes later the pods were created again, so the run started again (transition() resets started_at).
    Workspace.objects.filter(pk=running.pk).update(started_at=now + timedelta(minutes=10))
    assert warn_near_deadline(now + timedelta(minutes=20)) == 0  # 50 min left
    assert warn_near_deadline(now + timedelta(minutes=45)) == 1


def test_beat_runs_it_every_minute() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["runtime-warning"]
    assert (entry["task"], entry["schedule"]) == (tasknames.WARN_RUNTIME, 60.0)
