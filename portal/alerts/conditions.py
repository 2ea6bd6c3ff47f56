"""What is wrong right now, from figures already read: one observation per alert key, each saying whether
its rule's condition holds and in words why. Pure: the figures (``Readings``), the thresholds and the time
in; no database.

The conditions are those of ``portal.metrics.rules`` (docs/alerts.md has the table); the API failures and
control loops are recognised by the rules' own label matchers, so a change there changes both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from portal.alerts import kinds
from portal.metrics.figures import Waiting
from portal.metrics.rules import API_FAILURES, CONTROL_LOOPS, Thresholds

# PromQL regex matchers are anchored at both ends.
_FAILURE = re.compile(re.search(r'"(.*)"', API_FAILURES).group(1))  # type: ignore[union-attr]
CONTROL_LOOP_NAMES: tuple[str, ...] = tuple(re.search(r'"(.*)"', CONTROL_LOOPS).group(1).split("|"))  # type: ignore[union-attr]
API_KEY = kinds.KUBE_API_ERRORS


@dataclass(frozen=True)
class Readings:
    """The figures one check reads (``portal.alerts.readings``). Teams by id; GPU models as the gauges
    label them."""

    within_quota: Mapping[tuple[str, int], Waiting] = field(default_factory=dict)  # (gpu_model, team)
    demand: Mapping[str, float] = field(default_factory=dict)  # held plus queued GPU-equivalents
    capacity: Mapping[str, int] = field(default_factory=dict)
    measured: Mapping[tuple[str, int], float] = field(default_factory=dict)
    active: Mapping[tuple[str, int], float] = field(default_factory=dict)
    # Admission waits of the last hour per GPU model: cumulative counts per bound, and the total count.
    waits: Mapping[str, tuple[Sequence[int], int]] = field(default_factory=dict)
    wait_bounds: Sequence[float] = ()
    loops: Mapping[str, datetime | None] = field(default_factory=dict)  # last successful pass
    api_errors: Mapping[str, int] = field(default_factory=dict)  # cumulative, by status
    team_names: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    key: str  # stable across checks: the kind and what it is about
    kind: str
    team_id: int | None
    breached: bool
    value: float | None
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)  # kept with the state (the API counter)


def duration(seconds: float) -> str:
    """Seconds as people read them: 45 s, 17 min, 2 h 05 min."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _number(value: float) -> str:
    return f"{value:g}"


def quantile(q: float, bounds: Sequence[float], cumulative: Sequence[int], count: int) -> float | None:
    """``histogram_quantile`` as Prometheus computes it: linear within the bucket the rank falls in; in the
    +Inf bucket, the highest finite bound. None for an empty histogram."""
    if count <= 0:
        return None
    rank = q * count
    for i, (bound, have) in enumerate(zip(bounds, cumulative, strict=False)):
        if have >= rank:
            start, below = (bounds[i - 1], cumulative[i - 1]) if i else (0.0, 0)
            inside = have - below
            return bound if inside == 0 else start + (bound - start) * (rank - below) / inside
    return float(bounds[-1]) if bounds else math.nan


def api_failures(counts: Mapping[str, int]) -> int:
    return sum(n for status, n in counts.items() if _FAILURE.fullmatch(status))


def _idle(measured: float, active: float) -> float:
    return (measured - active) / measured if measured > 0 else 0.0


def observe(
    r: Readings, t: Thresholds, now: datetime, previous_api: Mapping[str, Any] | None = None
) -> list[Observation]:
    """Every alert key there is something to say about. A key left out is not breached (it resolves).
    ``previous_api`` is the data the API alert kept at the last check (its counter and when it was read)."""
    found: list[Observation] = []
    limit = t.within_quota_wait_minutes * 60
    for (gpu_model, team_id), waiting in sorted(r.within_quota.items()):
        team = r.team_names.get(team_id, str(team_id))
        found.append(
            Observation(
                f"{kinds.WITHIN_QUOTA}:{gpu_model}:{team_id}",
                kinds.WITHIN_QUOTA,
                team_id,
                waiting.oldest_seconds > limit,
                waiting.oldest_seconds,
                f"{waiting.requests} request(s) of {team} for {gpu_model} within the team's guarantee waiting, the "
                f"oldest for {duration(waiting.oldest_seconds)} (threshold {_number(t.within_quota_wait_minutes)} "
                "min): the cluster lacks the capacity the guarantees promise.",
            )
        )
    for gpu_model, gpus in sorted(r.capacity.items()):
        demand = r.demand.get(gpu_model, 0.0)
        found.append(
            Observation(
                f"{kinds.CONTENTION}:{gpu_model}",
                kinds.CONTENTION,
                None,
                demand > gpus,
                demand,
                f"Demand for {gpu_model} is {demand:.4g} GPU-equivalents (held plus queued) against {gpus} GPUs in "
                "the cluster.",
            )
        )
    found += _idle_observations(r, t)
    for gpu_model, (cumulative, count) in sorted(r.waits.items()):
        p95 = quantile(0.95, r.wait_bounds, cumulative, count)
        if p95 is None:
            continue
        found.append(
            Observation(
                f"{kinds.QUEUE_WAIT}:{gpu_model}",
                kinds.QUEUE_WAIT,
                None,
                p95 > t.queue_wait_p95_seconds,
                p95,
                f"95 % of the {count} admission(s) for {gpu_model} in the last hour waited up to {duration(p95)} "
                f"(threshold {duration(t.queue_wait_p95_seconds)}).",
            )
        )
    for stall in stalled_loops(r.loops, t, now, everything=True):
        found.append(
            Observation(
                f"{kinds.LOOP_STALLED}:{stall.loop}",
                kinds.LOOP_STALLED,
                None,
                stall.seconds > t.loop_stall_seconds,
                stall.seconds,
                stall.message,
            )
        )
    found.append(api_observation(api_failures(r.api_errors), t, now, previous_api or {}))
    return found


def _idle_observations(r: Readings, t: Thresholds) -> list[Observation]:
    per_model: dict[str, list[float]] = {}
    per_team: dict[int, list[float]] = {}
    for key, measured in r.measured.items():
        active = r.active.get(key, 0.0)
        for totals in (per_model.setdefault(key[0], [0.0, 0.0]), per_team.setdefault(key[1], [0.0, 0.0])):
            totals[0] += measured
            totals[1] += active
    found = []
    share = _number(t.idle_share * 100)
    for gpu_model, (measured, active) in sorted(per_model.items()):
        idle = _idle(measured, active)
        found.append(
            Observation(
                f"{kinds.IDLE}:{gpu_model}",
                kinds.IDLE,
                None,
                idle > t.idle_share,
                idle,
                f"{idle:.0%} of the {measured:.4g} measured GPU-equivalents of {gpu_model} are idle (threshold "
                f"{share} %).",
            )
        )
    for team_id, (measured, active) in sorted(per_team.items()):
        idle = _idle(measured, active)
        team = r.team_names.get(team_id, str(team_id))
        found.append(
            Observation(
                f"{kinds.IDLE_TEAM}:{team_id}",
                kinds.IDLE_TEAM,
                team_id,
                idle > t.idle_share,
                idle,
                f"{idle:.0%} of the {measured:.4g} measured GPU-equivalents {team} holds are idle (threshold "
                f"{share} %): stop or let go of what is not used.",
            )
        )
    return found


def api_observation(failures: int, t: Thresholds, now: datetime, previous: Mapping[str, Any]) -> Observation:
    """Failed calls a minute since the last check, from the cumulative count and the one it kept. The first
    check (or one after the counter went back) has no rate: not breached."""
    data = {"count": failures, "at": now.isoformat()}
    rate = None
    if "count" in previous and "at" in previous:
        seconds = (now - datetime.fromisoformat(previous["at"])).total_seconds()
        delta = failures - int(previous["count"])
        if seconds > 0 and delta >= 0:
            rate = delta / seconds * 60
    breached = rate is not None and rate > t.kube_api_errors_per_minute
    words = f"{rate:.1f}" if rate is not None else "No figure yet for"
    return Observation(
        API_KEY,
        kinds.KUBE_API_ERRORS,
        None,
        breached,
        rate,
        f"{words} failed Kubernetes API calls a minute (server errors, throttling, no answer; threshold "
        f"{_number(t.kube_api_errors_per_minute)}).",
        data,
    )


@dataclass(frozen=True)
class Stall:
    loop: str
    seconds: float  # since its last successful pass ended
    message: str


def stalled_loops(
    last_success: Mapping[str, datetime | None], t: Thresholds, now: datetime, *, everything: bool = False
) -> list[Stall]:
    """The control loops whose last successful pass ended longer than the threshold ago (``everything``: each
    control loop that ever succeeded, stalled or not). A loop that never succeeded has no figure, as in
    Prometheus."""
    found = []
    for loop in CONTROL_LOOP_NAMES:
        at = last_success.get(loop)
        if at is None:
            continue
        seconds = max(0.0, (now - at).total_seconds())
        if everything or seconds > t.loop_stall_seconds:
            found.append(
                Stall(
                    loop,
                    seconds,
                    f"The {loop} loop's last successful pass ended {duration(seconds)} ago (threshold "
                    f"{duration(t.loop_stall_seconds)}): nothing is admitted or watched. Check the Celery worker, "
                    "the scheduler and beat.",
                )
            )
    return found
