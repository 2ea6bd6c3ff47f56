"""The workspace rows the scheduling cycle reads, kept between cycles in the worker process.

With 14,000 requests queued, building a model instance per row and cycle, and the admission engine's
``Workload`` from each, cost about a second a cycle (measured with ``bench_cycle --queued 10000``), though
few rows change from one cycle to the next. So each cycle reads the rows as plain tuples (one query, the
columns it uses) and builds an instance, and a workload, only for a row that is new or whose values differ
from those of the instance kept for it. The comparison is with the kept instance's own attributes, not
with the last read, so an instance the cycle changed in memory without the change being committed (a
cycle that failed) is never reused. Offerings and teams are read each cycle too; while none of them
changed, the kept instances keep pointing to the same offering and team objects, and when any did, every
instance is built afresh.

Of the queue, only the oldest ``per_shape`` requests of each shape are read (a shape: the same team, owner
and request; :data:`SHAPE`). Requests of one shape are interchangeable to the engine, to placement and to
member caps, and the engine takes a shape's requests oldest first: one behind the first ``per_shape`` could
be admitted in a cycle only if all of those were, and then the cycle asks for another at once. So a cycle's
cost follows the number of shapes waiting, not the length of the queue. Requests further back are read only
while they still carry their first reason (no cycle has looked at them), so they get one that says why.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from django.db import connection
from django.db.models import Count, F, Model, Q, Window
from django.db.models.functions import RowNumber

from portal.models import Team
from scheduling.demand import workload_of
from scheduling.engine.quota import Workload
from workspaces.models import GpuOffering, Workspace

# What the cycle reads of a workspace. Reading any other field of a kept instance would cost a query.
_READ = {
    "id", "team_id", "owner_id", "offering_id", "kind", "gpu_count", "workers", "cpu_millis", "memory_mib",
    "gpu_equivalents", "priority", "borrowing", "preempt_at", "state", "reason", "pinned_node", "created_at",
    "admitted_at", "min_workers", "max_workers", "shrink_to",
}  # fmt: skip
# In the model's column order, which Model.from_db expects of a partial row.
FIELDS = tuple(f.attname for f in Workspace._meta.concrete_fields if f.attname in _READ)
assert len(FIELDS) == len(_READ), f"not columns of Workspace: {_READ - set(FIELDS)}"
_values_of = attrgetter(*FIELDS)
# What makes two waiting requests interchangeable to the cycle: the engine's workload (team, GPU flavour,
# units, priority, kind), what placement places (the offering's resources, pods, CPU, memory, a pinned node)
# and whose member cap counts it.
SHAPE = (
    "team_id", "owner_id", "offering_id", "kind", "priority", "gpu_count", "workers", "gpu_equivalents",
    "cpu_millis", "memory_mib", "pinned_node",
)  # fmt: skip
shape_of = attrgetter(*SHAPE)


@dataclass
class Loaded:
    """One cycle's rows: the active ones, the queue's heads and its unseen rows (see the module docstring)."""

    active: list[Workspace] = field(default_factory=list)
    queued: list[Workspace] = field(default_factory=list)  # the oldest ``per_shape`` of each shape, oldest first
    unseen: list[Workspace] = field(default_factory=list)  # further back, with the reason they were made with
    cut: set[tuple[Any, ...]] = field(default_factory=set)  # shapes with more requests waiting than were read


class CycleRows:
    """Kept instances and workloads by workspace id; see the module docstring."""

    def __init__(self) -> None:
        self._kept: dict[int, Workspace] = {}
        self._workloads: dict[int, tuple[tuple[Any, ...], Workload]] = {}
        self._catalogue: tuple[Any, dict[int, GpuOffering], dict[int, Team]] | None = None
        self.built = 0  # instances built (a measure of how much changed)

    def _offerings_and_teams(self) -> tuple[dict[int, GpuOffering], dict[int, Team]]:
        offerings, teams = GpuOffering.objects.in_bulk(), Team.objects.in_bulk()
        fingerprint = (_columns(offerings.values()), _columns(teams.values()))
        if self._catalogue is None or self._catalogue[0] != fingerprint:
            self._catalogue = (fingerprint, offerings, teams)
            self._kept, self._workloads = {}, {}
        return self._catalogue[1], self._catalogue[2]

    def load(self, active_states: Iterable[str], per_shape: int) -> Loaded:
        """The workspaces in ``active_states`` and the queue's heads and unseen rows, each oldest first: kept
        instances where their row is unchanged."""
        offerings, teams = self._offerings_and_teams()
        kept: dict[int, Workspace] = {}

        def instance(row: tuple[Any, ...]) -> Workspace:
            workspace = self._kept.get(row[0])
            if workspace is None or _values_of(workspace) != row:
                workspace = Workspace.from_db(connection.alias, FIELDS, row)
                # One shared offering and team object per id, instead of a copy per row.
                workspace.offering = offerings[workspace.offering_id]
                workspace.team = teams[workspace.team_id]
                self.built += 1
            kept[row[0]] = workspace
            return workspace

        loaded = Loaded()
        active = Workspace.objects.filter(state__in=list(active_states)).order_by("created_at", "id")
        loaded.active = [instance(row) for row in active.values_list(*FIELDS)]
        for *row, place, size in _queue_rows(per_shape):
            workspace = instance(tuple(row))
            (loaded.queued if place <= per_shape else loaded.unseen).append(workspace)
            if size > per_shape:
                loaded.cut.add(shape_of(workspace))
        self._kept = kept
        self._workloads = {pk: entry for pk, entry in self._workloads.items() if pk in kept}
        return loaded

    def workload(self, workspace: Workspace) -> Workload:
        """``workload_of(workspace)``, computed again only when its values changed."""
        values = _values_of(workspace)
        entry = self._workloads.get(workspace.pk)
        if entry is None or entry[0] != values:
            entry = self._workloads[workspace.pk] = (values, workload_of(workspace))
        return entry[1]


def _queue_rows(per_shape: int) -> Iterable[tuple[Any, ...]]:
    """Queued rows (oldest first) with their place in their shape and the shape's size: the first ``per_shape``
    of each shape, and those further back that no cycle has given a reason yet."""
    shape = [F(name) for name in SHAPE]
    return (
        Workspace.objects.filter(state=Workspace.State.QUEUED)
        .annotate(
            place=Window(RowNumber(), partition_by=shape, order_by=[F("created_at").asc(), F("id").asc()]),
            size=Window(Count("id"), partition_by=shape),
        )
        .filter(Q(place__lte=per_shape) | Q(reason=Workspace.FIRST_REASON))
        .order_by("created_at", "id")
        .values_list(*FIELDS, "place", "size")
    )


def _columns(objects: Iterable[Model]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(getattr(o, f.attname) for f in o._meta.concrete_fields) for o in objects)


@functools.cache
def cycle_rows() -> CycleRows:
    """This process's kept rows (one scheduling cycle runs at a time in the whole deployment)."""
    return CycleRows()
