"""The figures of one arm, from what it left behind (``outcome.ArmOutcome``).

- *allocated while short*: per pool of interchangeable GPUs (a GPU model; the static arm's cards are one
  pool), GPU-equivalents held over the pool's, over the time when what is asked of the pool (held plus
  waiting, less what the admission engine says can never start) is at least the pool; pools weighted by
  capacity times that time. How much of the GPUs that work is short of live work gets. Also the month's
  plain average over the whole fleet.
- *activity*: GPU activity (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, the workload profiles' expected values)
  weighted by GPU-equivalents held, over what is held (how busy allocated GPUs are) and over the fleet.
- *waits*: from asking to the first start, median and 95th percentile by kind, for in-quota requests (a
  request within its team's guarantee when it arrived; in the static arm every request, the card being its
  owner's) and for all. A request that never started counts its wait until the month ended.
- *lost in use*: notebooks preempted or reclaimed while their owner was still working in them.
- *idle GPU-hours*: GPU-equivalent hours held while the GPU sat below the idle threshold.
- *jobs preempted*: job runs cut short by preemption (each starts again from scratch), and their GPU-hours.
- *repartitions*: MIG layout changes the arm applied (arms whose layouts follow demand; 0 for the others).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scheduling.benchmarks.lab.outcome import F64, ArmOutcome
from scheduling.benchmarks.lab.runs import Run

HOUR = 3600.0
KINDS = ("notebook", "job")


@dataclass(frozen=True)
class Waits:
    count: int
    median_min: float | None
    p95_min: float | None
    never_started: int


@dataclass(frozen=True)
class Figures:
    arm: str
    capacity: float
    allocated_while_short: float | None  # share of capacity; None when demand never reached it
    short_hours: float
    allocated: float  # share of capacity, month average
    activity_of_allocated: float
    fleet_activity: float
    waits_in_quota: Mapping[str, Waits]
    waits_all: Mapping[str, Waits]
    lost_in_use: int
    notebooks_preempted: int
    notebooks_reclaimed: int
    jobs_done: int
    jobs: int
    idle_gpu_hours: float
    jobs_preempted: int
    preempted_gpu_hours: float
    repartitions: int
    hourly_allocated: list[float] = field(repr=False)  # GPU-equivalents held, mean per hour of the month
    hourly_active: list[float] = field(repr=False)  # activity-weighted GPU-equivalents, mean per hour
    wait_percentiles: Mapping[str, list[float]] = field(repr=False)  # in-quota, per kind: minutes at 0..100%

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _add(bins: F64, a: float, b: float, value: float) -> None:
    """Add ``value`` per second over [a, b) into hour bins, as the mean per hour."""
    if b <= a:
        return
    first, last = int(a // HOUR), min(int(np.ceil(b / HOUR)), len(bins))
    edges = np.arange(first, last + 1, dtype=np.float64) * HOUR
    overlap = np.minimum(edges[1:], b) - np.maximum(edges[:-1], a)
    bins[first:last] += value * np.clip(overlap, 0.0, None) / HOUR


def _activity(run: Run, held: F64, active: F64) -> tuple[float, float]:
    """(activity-weighted GPU-eq seconds, GPU-eq seconds spent idle) of a run; fills the hourly bins."""
    busy_mean, quiet_mean = run.means
    busy = run.busy()
    busy_s = sum(b - a for a, b in busy)
    quiet_s = (run.end - run.start) - busy_s
    _add(held, run.start, run.end, run.gpu_eq)
    _add(active, run.start, run.end, run.gpu_eq * quiet_mean)
    for a, b in busy:
        _add(active, a, b, run.gpu_eq * (busy_mean - quiet_mean))
    idle = quiet_s if quiet_mean < 0.05 else 0.0
    return run.gpu_eq * (busy_s * busy_mean + quiet_s * quiet_mean), run.gpu_eq * idle


def wait_minutes(o: ArmOutcome, kind: str, *, in_quota_only: bool = True) -> tuple[list[float], int]:
    """Every wait of the kind in minutes (a request that never started waits until the month's end), and how
    many never started."""
    chosen = [w for w in o.waits if w.request.kind == kind and (w.in_quota or not in_quota_only)]
    minutes = [((w.started if w.started is not None else o.horizon) - w.request.at) / 60 for w in chosen]
    return minutes, sum(w.started is None for w in chosen)


def _waits(minutes: list[float], never_started: int) -> Waits:
    if not minutes:
        return Waits(0, None, None, 0)
    median, p95 = np.percentile(minutes, [50, 95])
    return Waits(len(minutes), round(float(median), 2), round(float(p95), 2), never_started)


def figures(o: ArmOutcome) -> Figures:
    step = o.step
    dt = np.diff(np.append(step.times, o.horizon)).clip(0)[:, None]
    short = step.asked >= step.capacity[None, :] - 1e-9
    short_cap_s = float((short * dt * step.capacity[None, :]).sum())
    held_hours = np.zeros(int(np.ceil(o.horizon / HOUR)))
    active_hours = np.zeros_like(held_hours)
    weighted = idle = held_s = 0.0
    for run in o.runs:
        w, i = _activity(run, held_hours, active_hours)
        weighted += w
        idle += i
        held_s += run.gpu_eq * (run.end - run.start)

    def percentiles(kind: str) -> list[float]:
        minutes, _ = wait_minutes(o, kind)
        return [round(float(x), 2) for x in np.percentile(minutes, np.arange(101))] if minutes else []

    notebooks = [r for r in o.runs if r.request.kind == "notebook"]
    return Figures(
        arm=o.name,
        capacity=o.capacity,
        allocated_while_short=float((step.held * dt * short).sum() / short_cap_s) if short_cap_s else None,
        short_hours=float(dt[short.any(axis=1)].sum()) / HOUR,
        allocated=held_s / (o.capacity * o.horizon),
        activity_of_allocated=weighted / held_s if held_s else 0.0,
        fleet_activity=weighted / (o.capacity * o.horizon),
        waits_in_quota={kind: _waits(*wait_minutes(o, kind)) for kind in KINDS},
        waits_all={kind: _waits(*wait_minutes(o, kind, in_quota_only=False)) for kind in KINDS},
        lost_in_use=sum(r.lost_in_use for r in o.runs),
        notebooks_preempted=sum(r.outcome == "preempted" for r in notebooks),
        notebooks_reclaimed=sum(r.outcome == "reclaimed" for r in notebooks),
        jobs_done=sum(r.outcome == "done" for r in o.runs if r.request.kind == "job"),
        jobs=sum(w.request.kind == "job" for w in o.waits),
        idle_gpu_hours=idle / HOUR,
        jobs_preempted=sum(r.outcome == "preempted" for r in o.runs if r.request.kind == "job"),
        preempted_gpu_hours=sum(r.gpu_eq * (r.end - r.start) for r in o.runs if r.outcome == "preempted") / HOUR,
        repartitions=o.repartitions,
        hourly_allocated=[round(float(x), 3) for x in held_hours],
        hourly_active=[round(float(x), 3) for x in active_hours],
        wait_percentiles={kind: percentiles(kind) for kind in KINDS},
    )
