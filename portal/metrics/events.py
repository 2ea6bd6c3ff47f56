"""Counters from the workspaces' event log: transitions into each state (admissions, preemptions, idle
reclaims, failures...) and the admission-wait histogram, per GPU model, kind and priority.

The log is the durable record every process writes, so the totals do not depend on which process counts
them. Each scrape counts only the events since the last one (a watermark kept in the cache with the totals)
and only those older than ``METRICS_EVENT_SETTLE_SECONDS``: an event's id is taken when it is inserted but
it is visible only once its transaction commits, and a scheduling cycle commits its admissions together at
its end. A transaction longer than that margin would have its events skipped. When the cache is lost the
totals are counted again from the whole log: the same numbers, not a reset.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, DateTimeField, F, Max, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from workspaces.models import Workspace, WorkspaceEvent

CACHE_KEY = "metrics:event-totals:v1"
# Upper bounds (seconds) of the admission-wait histogram: from an instant MIG slice to a day behind a queue.
WAIT_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0)

Labels = tuple[str, ...]  # (gpu_model, kind) for transitions after the state; (gpu_model, kind, priority)


@dataclass
class Histogram:
    buckets: list[int]  # cumulative, per WAIT_BUCKETS bound
    total: float = 0.0  # seconds
    count: int = 0


@dataclass
class Totals:
    upto: int = 0  # the highest event id counted
    transitions: dict[Labels, int] = field(default_factory=dict)  # (state, gpu_model, kind)
    waits: dict[Labels, Histogram] = field(default_factory=dict)  # (gpu_model, kind, priority)

    def to_json(self) -> dict[str, Any]:
        return {
            "upto": self.upto,
            "transitions": [[list(k), v] for k, v in self.transitions.items()],
            "waits": [[list(k), h.buckets, h.total, h.count] for k, h in self.waits.items()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Totals:
        return cls(
            upto=int(data["upto"]),
            transitions={tuple(k): int(v) for k, v in data["transitions"]},
            waits={tuple(k): Histogram(list(b), float(t), int(c)) for k, b, t, c in data["waits"]},
        )


def model_label(gpu_model: str | None) -> str:
    return gpu_model or "cpu"


def _window(upto: int, cutoff: datetime) -> Q:
    """Events after ``upto`` up to (not including) the first one newer than ``cutoff``: ids are not
    strictly in time order across processes, so an id past a too-new event waits for the next scrape."""
    too_new = WorkspaceEvent.objects.filter(id__gt=upto, at__gt=cutoff).aggregate(first=Min("id"))["first"]
    return Q(id__gt=upto) if too_new is None else Q(id__gt=upto, id__lt=too_new)


def queued_since(*, of_event: bool) -> Coalesce:
    """When a workspace last entered the queue: its latest move into ``queued`` (a resume, a preemption),
    else its request. Annotates workspace rows, or with ``of_event`` event rows: then the move before it."""
    workspace, created = ("workspace_id", "workspace__created_at") if of_event else ("pk", "created_at")
    entered = WorkspaceEvent.objects.filter(workspace=OuterRef(workspace), to_state=Workspace.State.QUEUED)
    if of_event:
        entered = entered.filter(id__lt=OuterRef("id"))
    entered = entered.exclude(from_state=Workspace.State.QUEUED)
    latest = Subquery(entered.order_by("-id").values("at")[:1], output_field=DateTimeField())
    return Coalesce(latest, F(created), output_field=DateTimeField())


def count_since(totals: Totals, cutoff: datetime) -> Totals:
    """``totals`` with the events after its watermark and not newer than ``cutoff`` added (a new object)."""
    window = WorkspaceEvent.objects.filter(_window(totals.upto, cutoff))
    upto = window.aggregate(last=Max("id"))["last"]
    if upto is None:
        return totals
    window = window.filter(id__lte=upto)
    transitions = dict(totals.transitions)
    moves = window.exclude(from_state=F("to_state")).exclude(from_state="")
    grouped = moves.values_list("to_state", "workspace__offering__gpu_model", "workspace__kind").annotate(n=Count("id"))
    for state, gpu_model, kind, n in grouped:
        key = (state, model_label(gpu_model), kind)
        transitions[key] = transitions.get(key, 0) + n
    # One row per admission, bucketed here: in SQL the correlated subquery would run once per bucket.
    admissions = (
        moves.filter(to_state=Workspace.State.ADMITTED)
        .annotate(since=queued_since(of_event=True))
        .values_list("workspace__offering__gpu_model", "workspace__kind", "workspace__priority", "at", "since")
    )
    found: dict[Labels, tuple[list[int], list[float]]] = {}
    for gpu_model, kind, priority, at, since in admissions.iterator(chunk_size=5000):
        seconds = max(0.0, (at - since).total_seconds())
        counts, total = found.setdefault(
            (model_label(gpu_model), kind, priority), ([0] * (len(WAIT_BUCKETS) + 1), [0.0])
        )
        counts[bisect.bisect_left(WAIT_BUCKETS, seconds)] += 1  # the first bound it is within; the end is +Inf
        total[0] += seconds
    waits = {k: Histogram(list(h.buckets), h.total, h.count) for k, h in totals.waits.items()}
    for labels, (counts, total) in found.items():
        hist = waits.setdefault(labels, Histogram([0] * len(WAIT_BUCKETS)))
        hist.buckets = [have + new for have, new in zip(hist.buckets, itertools.accumulate(counts), strict=False)]
        hist.total += total[0]
        hist.count += sum(counts)
    return Totals(upto, transitions, waits)


def current(now: datetime) -> Totals:
    """The totals up to ``now`` less the settling margin, from the cache's last count onwards."""
    cached = cache.get(CACHE_KEY)
    totals = Totals.from_json(cached) if cached else Totals()
    counted = count_since(totals, now - timedelta(seconds=settings.METRICS_EVENT_SETTLE_SECONDS))
    if counted is not totals:
        cache.set(CACHE_KEY, counted.to_json(), timeout=None)
    return counted
