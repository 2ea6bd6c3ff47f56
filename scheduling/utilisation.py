"""The operators' utilisation figures: GPUs allocated against GPUs active per model over time, and how long
requests waited in the queue. A few set-based queries; the step functions are integrated with numpy.

Allocated is what the usage ledger saw pods hold (GPU-equivalents, ``portal.billing``); active is the same
GPU-equivalents weighted by each workspace's GPU activity from the telemetry samples. Both are means over
each bucket. A bucket without any sample of a model has no active figure (a gap, never a zero).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.db.models import F, FloatField, OuterRef, Subquery, Sum
from django.db.models.functions import Cast, Coalesce

from portal.billing.charts import WaitRow
from portal.billing.models import UsageInterval
from scheduling.models import ActivitySample
from workspaces.models import WorkspaceEvent


@dataclass(frozen=True)
class Series:
    times: list[datetime]  # bucket starts
    allocated: dict[str, list[float]]
    active: dict[str, list[float | None]]


def buckets(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    count = max(1, int((end - start) / step))
    return [start + n * step for n in range(count)]


def mean_held(intervals: Sequence[tuple[float, float, float]], edges: np.ndarray) -> np.ndarray:
    """The mean of a sum of step functions over each [edges[i], edges[i+1]): ``intervals`` are (start, end,
    height) in the same units as ``edges`` (seconds). Pure."""
    if not intervals:
        return np.zeros(len(edges) - 1)
    data = np.asarray(intervals, dtype=float)
    times = np.concatenate([data[:, 0], data[:, 1]])
    deltas = np.concatenate([data[:, 2], -data[:, 2]])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    held = np.cumsum(deltas)  # the height right after each event
    area = np.concatenate([[0.0], np.cumsum(held[:-1] * np.diff(times))])  # integral up to each event
    at_edges = np.interp(edges, times, area, left=0.0, right=area[-1])
    # interp is exact between events only up to the last one; after it the held height is 0 (all ended).
    means: np.ndarray = np.diff(at_edges) / np.diff(edges)
    return means


def series(start: datetime, end: datetime, step: timedelta) -> Series:
    times = buckets(start, end, step)
    edges = np.array([(t - start).total_seconds() for t in [*times, times[-1] + step]])
    rows = UsageInterval.objects.filter(started_at__lt=end, last_seen_at__gt=start).values_list(
        "gpu_model", "started_at", "last_seen_at", "gpu_equivalents"
    )
    per_model: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for model, began, seen, equivalents in rows:
        per_model[model].append(((began - start).total_seconds(), (seen - start).total_seconds(), float(equivalents)))
    allocated = {model: [round(float(v), 4) for v in mean_held(spans, edges)] for model, spans in per_model.items()}
    active: dict[str, list[float | None]] = {model: [None] * len(times) for model in allocated}
    weighted = Cast(F("seconds"), FloatField()) * F("gpu_active") * Cast(F("workspace__gpu_equivalents"), FloatField())
    samples = (
        ActivitySample.objects.filter(at__gte=start, at__lt=end, gpu_active__isnull=False)
        .values_list("workspace__offering__gpu_model", "at")
        .annotate(busy=Sum(weighted))
    )
    bucket_seconds = step.total_seconds()
    for model, at, busy in samples.iterator():
        index = min(int((at - start) / step), len(times) - 1)
        row = active.setdefault(model, [None] * len(times))
        row[index] = (row[index] or 0.0) + float(busy or 0.0) / bucket_seconds
    return Series(times, allocated, {m: [None if v is None else round(v, 4) for v in vs] for m, vs in active.items()})


def queue_waits(start: datetime, end: datetime) -> list[WaitRow]:
    """p50, p95 and p99 of the time from queued to admitted, per GPU model and kind, for admissions in
    [start, end): each admission is timed from the queuing it ended (a resume waits from its resume). One
    query."""
    # Queued by a transition (a resume, a preemption, a reclaim of the pin) or, the first time, by the request.
    requeued = (
        WorkspaceEvent.objects.filter(workspace=OuterRef("workspace"), to_state="queued", at__lte=OuterRef("at"))
        .exclude(from_state="queued")
        .order_by("-at", "-id")
        .values("at")[:1]
    )
    admissions = (
        WorkspaceEvent.objects.filter(to_state="admitted", from_state="queued", at__gte=start, at__lt=end)
        .annotate(queued=Coalesce(Subquery(requeued), F("workspace__created_at")))
        .values_list("workspace__offering__gpu_model", "workspace__kind", "at", "queued")
    )
    waits: dict[str, list[float]] = defaultdict(list)
    for model, kind, at, queued in admissions.iterator():
        if queued is not None:
            waits[f"{model or 'CPU'} {kind}"].append(max(0.0, (at - queued).total_seconds()))
    rows: list[WaitRow] = []
    for label in sorted(waits):
        p50, p95, p99 = np.percentile(np.asarray(waits[label]), [50, 95, 99])
        rows.append((label, float(p50), float(p95), float(p99)))
    return rows
