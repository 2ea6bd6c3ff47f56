"""What one scheduling cycle decided, kept in memory while it decides and written when it ends, in a number
of statements that does not grow with the queue: admissions (rows locked, moved in one update, their events
in one insert), waiting reasons, and preemption notices.

The cycle's quota snapshot and capacity take each decision at once, so the decisions after it see it; these
writes only make them durable, inside the cycle's transaction, which holds the queued teams' quota rows.
A workspace that another writer moved meanwhile (its owner cancelled it) is left out of the writes: the
room the cycle planned for it stays free until the next cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.queue import enqueue
from scheduling.loops import tasknames
from workspaces.models import Workspace
from workspaces.transitions import Move, State, lock_rows, note_many, set_reasons, transition_many


@dataclass
class Decisions:
    admissions: dict[int, Move] = field(default_factory=dict)
    reasons: dict[int, tuple[Workspace, str]] = field(default_factory=dict)
    notices: dict[int, tuple[Workspace, str]] = field(default_factory=dict)
    _last_at: datetime = field(default=datetime.min.replace(tzinfo=UTC), repr=False)

    def admit(self, workspace: Workspace, reason: str, *, borrowing: bool, pinned_node: str) -> None:
        # Each admission keeps its own decision time, strictly in the order decided: preemption takes the
        # most recently admitted borrowers first, so one cycle's admissions must not tie.
        at = max(timezone.now(), self._last_at + timedelta(microseconds=1))
        self._last_at = at
        fields = {"borrowing": borrowing, "preempt_at": None, "pinned_node": pinned_node, "admitted_at": at}
        self.admissions[workspace.pk] = Move(workspace, reason, fields)
        self.reasons.pop(workspace.pk, None)

    def wait(self, workspace: Workspace, reason: str) -> None:
        """The latest reason ``workspace`` waits for (a later pass of the cycle may give another)."""
        if workspace.pk not in self.admissions:
            self.reasons[workspace.pk] = (workspace, reason)

    def notice(self, workspace: Workspace, message: str, now: datetime) -> None:
        """Tell a borrower it must make room; it is stopped when the notice runs out (``expire_notices``)."""
        if workspace.preempt_at is None:
            workspace.preempt_at = now + timedelta(seconds=settings.PREEMPTION_NOTICE_SECONDS)
            self.notices[workspace.pk] = (workspace, message)

    def write(self) -> int:
        """Write everything decided (inside the caller's transaction); answers how many were admitted.
        Their provisioning is enqueued in batches, to go out when the transaction commits."""
        admitted = transition_many(
            list(self.admissions.values()), State.ADMITTED, expected=[State.QUEUED], source="scheduler"
        )
        ids = [workspace.pk for workspace in admitted]
        size = settings.PROVISION_BATCH_SIZE
        for start in range(0, len(ids), size):  # batches, so that several worker processes share the work
            enqueue(tasknames.PROVISION_MANY, ids[start : start + size])
        set_reasons(list(self.reasons.values()), source="scheduler")
        self._write_notices()
        return len(admitted)

    def _write_notices(self) -> None:
        if not self.notices:
            return
        # One deadline for the cycle's notices: they were all given at its start time.
        deadline = next(iter(self.notices.values()))[0].preempt_at
        assert deadline is not None  # set by notice()
        ids = list(lock_rows(self.notices, preempt_at__isnull=True))  # not noticed by another writer meanwhile
        Workspace.objects.filter(pk__in=ids).update(preempt_at=deadline)
        note_many(
            [
                (
                    workspace,
                    f"Will be preempted at {deadline:%H:%M:%S} UTC: {message} It is then stopped, keeps its home "
                    "volume and queues again.",
                    {"event": "preemption_notice", "at": deadline.isoformat()},
                )
                for workspace, message in (self.notices[pk] for pk in ids)
            ],
            source="scheduler",
        )
