"""Elastic training jobs in the scheduling cycle (docs/elastic-jobs.md).

An elastic job (``Workspace.min_workers`` and ``max_workers`` set) holds ``workers`` workers now. To the
admission engine it is its minimum, one workload with the workspace's id (admitted, preempted and queued as
any job), plus one *growth* workload per further worker, ``"<id>+<k>"`` for its k-th worker: those it holds,
and, while it runs and is below its maximum, those it asks for. The engine admits growth only into idle
capacity and takes it back first (``scheduling.engine.admission``). So each cycle:

- growth admitted: the job grows at once (``workers`` and ``gpu_equivalents`` go up, its Job is scaled);
- growth taken back: the job is told it will shrink, with the preemption notice; the workers it loses still
  hold their quota until the notice runs out (:func:`expire_shrinks`), then the Job is scaled down (the
  highest indexes go) and the room is the lender's.

Every change of size is a timeline event with ``details["event"]`` ``elastic_size`` or ``shrink_notice``: the
job page lists them as its size over time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from portal.queue import enqueue
from scheduling.demand import demand_of
from scheduling.engine.quota import Workload, to_units
from scheduling.inventory import Capacity
from scheduling.kube import names
from scheduling.kube.calls import Kube
from scheduling.loops import tasknames
from workspaces.models import ELASTIC_SIZE_EVENT as SIZE_EVENT
from workspaces.models import SHRINK_NOTICE_EVENT as NOTICE_EVENT
from workspaces.models import Workspace
from workspaces.transitions import note, note_many


def growth_id(workspace_id: int, worker: int) -> str:
    return f"{workspace_id}+{worker}"


def growth_of(workload_id: str) -> tuple[str, int] | None:
    """(workspace id, worker) of a growth workload's id; None for any other workload."""
    pk, plus, worker = workload_id.partition("+")
    return (pk, int(worker)) if plus else None


def _per_worker(workspace: Workspace) -> int:
    return to_units(float(workspace.gpu_equivalents_for(1)))


def held(workspace: Workspace, whole: Workload) -> list[Workload]:
    """What an admitted workspace holds, as the engine sees it: ``whole`` (its ``workload_of``), or for an
    elastic job its minimum and a growth workload per further worker, the highest the youngest."""
    if workspace.min_workers is None or workspace.workers <= workspace.min_workers:
        return [whole]
    minimum = replace(whole, units=to_units(float(workspace.gpu_equivalents_for(workspace.min_workers))))
    since = whole.admitted_at or whole.created_at
    shrink_to = workspace.shrink_to
    return [
        minimum,
        *(
            replace(
                whole,
                id=growth_id(workspace.pk, k),
                units=_per_worker(workspace),
                admitted_at=since + k,
                growth=True,
                preempting=whole.preempting or (shrink_to is not None and k > shrink_to),
            )
            for k in range(workspace.min_workers + 1, workspace.workers + 1)
        ),
    ]


def asks(workspace: Workspace, whole: Workload) -> list[Workload]:
    """The growth a running elastic job asks for: a workload per worker up to its maximum (none while it is
    told to shrink or to stop)."""
    if (
        workspace.max_workers is None
        or workspace.state != Workspace.State.RUNNING
        or workspace.preempt_at is not None
        or workspace.shrink_to is not None
    ):
        return []
    per = _per_worker(workspace)
    return [
        replace(whole, id=growth_id(workspace.pk, k), units=per, admitted_at=None, growth=True, borrowing=False)
        for k in range(workspace.workers + 1, workspace.max_workers + 1)
    ]


@dataclass
class ElasticDecisions:
    """What one cycle decided about elastic jobs' sizes, written with the cycle's other decisions."""

    grown: dict[int, tuple[Workspace, int]] = field(default_factory=dict)  # workers added
    shrinks: dict[int, tuple[Workspace, int, str]] = field(default_factory=dict)  # workers taken back, why

    def grow(self, workspace: Workspace, capacity: Capacity) -> bool:
        """One more worker for ``workspace`` if placement finds it a node (its room is taken at once)."""
        one = replace(demand_of(workspace), pods=1)
        if capacity.place(one) is None:
            return False
        _, added = self.grown.get(workspace.pk, (workspace, 0))
        self.grown[workspace.pk] = (workspace, added + 1)
        return True

    def shrink(self, workspace: Workspace, message: str) -> None:
        _, taken, _ = self.shrinks.get(workspace.pk, (workspace, 0, message))
        self.shrinks[workspace.pk] = (workspace, taken + 1, message)

    def write(self, now: datetime) -> None:
        """Inside the cycle's transaction: each row only if it still is as the cycle read it."""
        notes = []
        scaled = []
        for workspace, added in self.grown.values():
            size = workspace.workers + added
            moved = Workspace.objects.filter(
                pk=workspace.pk,
                state=Workspace.State.RUNNING,
                workers=workspace.workers,
                preempt_at__isnull=True,
                shrink_to__isnull=True,
            ).update(workers=size, gpu_equivalents=workspace.gpu_equivalents_for(size))
            if moved:
                scaled.append(workspace.pk)
                reason = f"Grew to {size} of at most {workspace.max_workers} workers, borrowing idle capacity."
                notes.append((workspace, reason, {"event": SIZE_EVENT, "workers": size}))
        deadline = now + timedelta(seconds=settings.PREEMPTION_NOTICE_SECONDS)
        for workspace, taken, message in self.shrinks.values():
            size = workspace.workers - taken
            moved = Workspace.objects.filter(
                pk=workspace.pk, workers=workspace.workers, shrink_to__isnull=True, preempt_at__isnull=True
            ).update(shrink_to=size, shrink_at=deadline)
            if moved:
                reason = (
                    f"Will shrink to {size} workers at {deadline:%H:%M:%S} UTC: {message} "
                    "Its other workers keep running."
                )
                notes.append((workspace, reason, {"event": NOTICE_EVENT, "workers": size, "at": deadline.isoformat()}))
        note_many(notes, source="scheduler")
        if scaled:
            _scale_on_commit(scaled)


def _scale_on_commit(workspace_ids: list[int]) -> None:
    for pk in workspace_ids:
        enqueue(tasknames.SCALE_JOB, pk)  # sent when the transaction commits


def expire_shrinks(now: datetime) -> int:
    """Shrink the elastic jobs whose notice ran out: their size and quota go down now, their Job follows."""
    # Only active rows (the state index, as expire_notices); one that stopped meanwhile is reset when it queues.
    active = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES, shrink_at__lte=now)
    due = list(active.select_related("offering"))
    done = []
    with transaction.atomic():
        for workspace in due:
            size = workspace.shrink_to
            assert size is not None  # set together with shrink_at
            moved = Workspace.objects.filter(pk=workspace.pk, shrink_at=workspace.shrink_at).update(
                workers=size, gpu_equivalents=workspace.gpu_equivalents_for(size), shrink_to=None, shrink_at=None
            )
            if moved:
                done.append(workspace.pk)
                reason = f"Shrank to {size} workers: its notice ran out; the workers it gave back are free for others."
                note(workspace, reason, source="scheduler", details={"event": SIZE_EVENT, "workers": size})
        if done:
            _scale_on_commit(done)
    return len(done)


def scale(kube: Kube, workspace_id: int) -> int | None:
    """Bring an elastic job's Job to the size its row says (level-triggered: the latest size wins). Answers
    the size set, or None when there is nothing to scale."""
    workspace = Workspace.objects.select_related("team").filter(pk=workspace_id).first()
    if workspace is None or workspace.max_workers is None or not workspace.is_active:
        return None
    namespace = names.namespace_for(workspace.team.slug)
    job = kube.scale_job(namespace, names.workspace_base_name(workspace.pk, workspace.name), workspace.workers)
    return workspace.workers if job is not None else None
