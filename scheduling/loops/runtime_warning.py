"""Warn the owner once per run when a running workspace nears its runtime limit.

The reconcile loop stops a workspace at its deadline (``workspaces/deadlines.py``); this pass, a minute
apart on beat, notes ``{"event": "runtime_warning"}`` in the timeline when the deadline is within
``NOTIFY_RUNTIME_WARNING_MINUTES``, which the notifications pick up. ``runtime_warned_at`` marks the run as
warned: a resume or an extension clears it (``workspaces/actions.py``), and a mark older than
``started_at`` (the pods were re-created, so the run started again) counts as none.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from workspaces.deadlines import workspace_deadline
from workspaces.models import Workspace
from workspaces.transitions import State, note


def due(
    *, deadline: datetime | None, now: datetime, window: timedelta, started_at: datetime | None,
    warned_at: datetime | None,
) -> bool:  # fmt: skip
    """Whether to warn now: the deadline is ahead but within the window, and this run was not warned. A
    deadline already passed gets no warning: the reconcile loop is stopping it."""
    if deadline is None or started_at is None:
        return False
    if warned_at is not None and warned_at >= started_at:
        return False
    return now < deadline <= now + window


def warn_near_deadline(now: datetime) -> int:
    """One pass over the running workspaces; answers how many were warned."""
    window = timedelta(minutes=settings.NOTIFY_RUNTIME_WARNING_MINUTES)
    running = Workspace.objects.filter(state=State.RUNNING, started_at__isnull=False).only(
        "id", "name", "state", "started_at", "max_runtime_seconds", "runtime_warned_at"
    )
    warned = 0
    for workspace in running.iterator():
        deadline = workspace_deadline(workspace)
        if deadline is None:
            continue
        if due(
            deadline=deadline,
            now=now,
            window=window,
            started_at=workspace.started_at,
            warned_at=workspace.runtime_warned_at,
        ) and _warn(workspace, deadline, now):
            warned += 1
    return warned


@transaction.atomic
def _warn(workspace: Workspace, deadline: datetime, now: datetime) -> bool:
    # Compare-and-set on what the decision read: a stop, an extension or another pass at the same moment wins.
    unwarned = Q(runtime_warned_at__isnull=True) | Q(runtime_warned_at__lt=F("started_at"))
    marked = (
        Workspace.objects.filter(
            unwarned,
            pk=workspace.pk,
            state=State.RUNNING,
            started_at=workspace.started_at,
            max_runtime_seconds=workspace.max_runtime_seconds,
        ).update(runtime_warned_at=now)
        == 1
    )
    if marked:
        minutes = max(1, round((deadline - now).total_seconds() / 60))
        note(
            workspace,
            f"Near its runtime limit: it will be stopped at {deadline:%H:%M} UTC (in {minutes} min); its home "
            "volume is kept. Extend it, within the team's policy, to keep it running.",
            source="runtime",
            details={"event": "runtime_warning", "deadline": deadline.isoformat()},
        )
    return marked
