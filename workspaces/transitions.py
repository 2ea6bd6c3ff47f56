"""Race-safe state changes of a workspace, each recorded as an event with a readable reason.

Web requests, the scheduling cycle and the reconcile loop all move workspaces; a compare-and-set update
(``filter(state=old).update(state=new)``) means that of two racing writers exactly one wins, and the
loser learns it from the return value instead of overwriting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.bulk import update_rows
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications.dispatch import notify_after_commit, notify_many_after_commit

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
    updates: dict[str, Any] = {"state": to_state, "reason": reason[:500], **_timestamps(to_state, timezone.now())}
    updates.update(fields)
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


@dataclass
class Move:
    """One workspace's part in :func:`transition_many`: its reason and the fields saved with the move."""

    workspace: Workspace
    reason: str
    fields: dict[str, Any] = field(default_factory=dict)


def _timestamps(to_state: str, now: Any) -> dict[str, Any]:
    stamps: dict[str, Any] = {}
    if to_state == State.ADMITTED:
        stamps["admitted_at"] = now
    if to_state == State.RUNNING:
        stamps.update(started_at=now, finished_at=None)
    if to_state in Workspace.FINAL_STATES:
        stamps["finished_at"] = now
    return stamps


def lock_rows(ids: Iterable[int], **still: Any) -> dict[int, str]:
    """Row-lock the workspaces of ``ids`` that still match ``still`` (in id order: no deadlocks between
    batches); answers their states by id. Until the caller's transaction ends, no other writer can move them,
    so a set-based update of them cannot lose a race."""
    rows = Workspace.objects.select_for_update().filter(pk__in=list(ids), **still).order_by("pk")
    return dict(rows.values_list("pk", "state"))


@transaction.atomic(savepoint=False)
def transition_many(
    moves: Sequence[Move], to_state: str, *, expected: Iterable[str], source: str = "portal"
) -> list[Workspace]:
    """:func:`transition` for many workspaces in a constant number of statements (the scheduling cycle
    admits hundreds at once): the rows still in one of ``expected`` are locked, moved in one update and
    given their events in one insert. Answers the workspaces moved; the others were moved by another
    writer first and are left as they are. Every move must name the same ``fields``, which win over the
    timestamps filled in here (say, each admission's own decision time)."""
    if not moves:
        return []
    names = set(moves[0].fields)
    if any(set(move.fields) != names for move in moves):
        raise ValueError("every move of one transition_many names the same fields")
    still = lock_rows((move.workspace.pk for move in moves), state__in=list(expected))
    stamps = _timestamps(to_state, timezone.now())
    moved: list[Workspace] = []
    events: list[WorkspaceEvent] = []
    for move in moves:
        workspace = move.workspace
        if workspace.pk not in still:
            continue
        events.append(
            WorkspaceEvent(
                workspace=workspace,
                from_state=workspace.state,
                to_state=to_state,
                reason=move.reason[:500],
                source=source,
            )
        )
        for name, value in {"state": to_state, "reason": move.reason[:500], **stamps, **move.fields}.items():
            setattr(workspace, name, value)
        moved.append(workspace)
    update_rows(moved, list(dict.fromkeys(["state", "reason", *stamps, *names])))
    notify_many_after_commit(WorkspaceEvent.objects.bulk_create(events, batch_size=500))
    return moved


@transaction.atomic(savepoint=False)
def note_many(notes: Sequence[tuple[Workspace, str, dict[str, Any]]], *, source: str = "portal") -> None:
    """:func:`note` for many workspaces, in one insert: (workspace, reason, details) each."""
    events = [
        WorkspaceEvent(
            workspace=workspace,
            from_state=workspace.state,
            to_state=workspace.state,
            reason=reason[:500],
            source=source,
            details=details,
        )
        for workspace, reason, details in notes
    ]
    notify_many_after_commit(WorkspaceEvent.objects.bulk_create(events, batch_size=500))


def note(workspace: Workspace, reason: str, *, source: str = "portal", details: dict[str, Any] | None = None) -> None:
    """Record something notable that is not a state change (a new scheduler message, an extension)."""
    note_many([(workspace, reason, details or {})], source=source)


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


@transaction.atomic(savepoint=False)
def set_reasons(reasons: Sequence[tuple[Workspace, str]], *, source: str) -> None:
    """:func:`set_reason` for many workspaces in a constant number of statements: only rows whose reason
    changed are written, only those still in the state they were read in, and an event is logged for those
    whose gist changed."""
    changed = [(workspace, reason[:500]) for workspace, reason in reasons if workspace.reason != reason[:500]]
    if not changed:
        return
    locked = lock_rows(workspace.pk for workspace, _ in changed)
    still = {workspace.pk for workspace, _ in changed if locked.get(workspace.pk) == workspace.state}
    written: list[Workspace] = []
    notes: list[tuple[Workspace, str, dict[str, Any]]] = []
    for workspace, reason in changed:
        if workspace.pk not in still:
            continue
        before, workspace.reason = workspace.reason, reason
        written.append(workspace)
        if _gist(before) != _gist(reason):
            notes.append((workspace, reason, {}))
    update_rows(written, ["reason"])
    note_many(notes, source=source)
