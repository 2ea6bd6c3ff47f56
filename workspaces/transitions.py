"""Race-safe state changes of a workspace, each recorded as an event with a readable reason.

Web requests, the scheduling cycle and the reconcile loop all move workspaces; a compare-and-set update
(``filter(state=old).update(state=new)``) means that of two racing writers exactly one wins, and the
loser learns it from the return value instead of overwriting.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications.dispatch import notify_after_commit

State = Workspace.State


# The state change and its event commit together; inside a caller's transaction (the scheduling cycle
# admits hundreds at once) no savepoint per change is needed: a failure rolls the caller back anyway.
@transaction.atomic(savepoint=False)
def transition(
    workspace: Workspace,
    to_state: str,
    reason: str,
    *,
    expected: Iterable[str] | None = None,
    source: str = "portal",
    details: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move ``workspace`` to ``to_state`` if it is still in one of ``expected`` (default: its current state).

    Returns False, changing nothing, when another writer moved it first. ``fields`` are saved in the same
    update (e.g. ``node_name``); timestamps for admission, start and finish are filled in here.
    """
    from_states = tuple(expected) if expected is not None else (workspace.state,)
    now = timezone.now()
    updates: dict[str, Any] = {"state": to_state, "reason": reason[:500], **fields}
    if to_state == State.ADMITTED:
        updates.setdefault("admitted_at", now)
    if to_state == State.RUNNING:
        updates.setdefault("started_at", now)
        updates.setdefault("finished_at", None)
    if to_state in Workspace.FINAL_STATES:
        updates.setdefault("finished_at", now)
    changed = Workspace.objects.filter(pk=workspace.pk, state__in=from_states).update(**updates)
    if changed != 1:
        return False
    event = WorkspaceEvent.objects.create(
        workspace=workspace,
        from_state=workspace.state,
        to_state=to_state,
        reason=reason[:500],
        source=source,
        details=details or {},
    )
    notify_after_commit(event)  # only notifiable events; delivery runs in a task after commit
    for name, value in updates.items():
        setattr(workspace, name, value)
    return True


def note(workspace: Workspace, reason: str, *, source: str = "portal", details: dict[str, Any] | None = None) -> None:
    """Record something notable that is not a state change (a new scheduler message, an extension)."""
    event = WorkspaceEvent.objects.create(
        workspace=workspace,
        from_state=workspace.state,
        to_state=workspace.state,
        reason=reason[:500],
        source=source,
        details=details or {},
    )
    notify_after_commit(event)


def _gist(reason: str) -> str:
    """What a reason says, without its live details: "Waiting for team quota: alpha uses 3 of 4 ..." ->
    "Waiting for team quota"."""
    return reason.split(": ", 1)[0]


def set_reason(workspace: Workspace, reason: str, *, source: str) -> None:
    """Update the waiting reason. The timeline gets an event only when the gist changes, not when only its
    numbers do (a queued workspace's counts change with every admission), so it stays readable and the
    event table does not grow by one row per waiting workspace per scheduling cycle."""
    reason = reason[:500]
    if workspace.reason == reason:
        return
    if Workspace.objects.filter(pk=workspace.pk, state=workspace.state).update(reason=reason) == 1:
        before, workspace.reason = workspace.reason, reason
        if _gist(before) != _gist(reason):
            note(workspace, reason, source=source)
