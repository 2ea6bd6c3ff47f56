"""Does the full stack get what the engines promise? The full-stack week's figures beside the simulated-time
arm's on the same arrivals, each with whether it is within the issue's 10%.

Shares (GPUs held, activity), counts (jobs done) and idle GPU-hours compare relatively. Waits compare
relatively too, but never closer than ``resolution_min``: the live portal acts in real time, so a model
minute is ``60 / speed`` real seconds and the worker's half-second cycle and reconcile intervals alone are
``speed / 120`` model minutes; a wait that short is below what the full stack can resolve. Notebooks lost in
use must be equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.benchmarks.lab.figures import Figures

TOLERANCE = 0.10


@dataclass(frozen=True)
class Check:
    figure: str
    stack: float | None
    engine: float | None
    ok: bool


def _close(a: float | None, b: float | None, floor: float = 0.0) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= max(TOLERANCE * abs(b), floor)


def agreement(stack: Figures, engine: Figures, resolution_min: float) -> list[Check]:
    pct = 100.0
    checks = [
        Check("GPUs held, % of capacity", stack.allocated * pct, engine.allocated * pct, False),
        Check("activity of held GPUs, %", stack.activity_of_allocated * pct, engine.activity_of_allocated * pct, False),
        Check("fleet activity, %", stack.fleet_activity * pct, engine.fleet_activity * pct, False),
        Check("jobs done", stack.jobs_done, engine.jobs_done, False),
        Check("GPU-hours held idle", stack.idle_gpu_hours, engine.idle_gpu_hours, False),
    ]
    checks = [Check(c.figure, c.stack, c.engine, _close(c.stack, c.engine)) for c in checks]
    for kind in stack.waits_in_quota:
        s, e = stack.waits_in_quota[kind].median_min, engine.waits_in_quota[kind].median_min
        checks.append(Check(f"median wait in quota, {kind} (min)", s, e, _close(s, e, resolution_min)))
    same = stack.lost_in_use == engine.lost_in_use
    lost = Check("notebooks lost in use", stack.lost_in_use, engine.lost_in_use, same)
    return [*checks, lost]


def lines(checks: list[Check]) -> list[str]:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    out = [f"  {'figure':<38} {'full stack':>10} {'engine':>10}  within 10%"]
    out += [f"  {c.figure:<38} {fmt(c.stack):>10} {fmt(c.engine):>10}  {'yes' if c.ok else 'NO'}" for c in checks]
    return out
