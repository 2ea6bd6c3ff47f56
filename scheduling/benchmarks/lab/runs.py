"""What one request does once it holds GPUs, and the record every arm keeps of it.

A request plays one of the simulated cluster's workload profiles (``scheduling/simcluster/telemetry.py``),
so the activity integrated here is what its dcgm-exporter would report:

- an attended notebook is a ``bursty-notebook``: its owner works in it for ``session_s``, in bursts, and
  closes it then;
- a forgotten notebook is an ``idle-notebook`` busy for ``session_s``, then idle until its owner closes it
  on the next working morning;
- a job is ``steady-training`` for its run time.

An owner is *using* a notebook until the work is done (``session_s`` after it started): a notebook
reclaimed or preempted before that is lost while in use. Its owner comes back at their next burst, finds
it stopped and asks again for the rest of the session.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.benchmarks.lab.arrivals import Calendar, Request
from scheduling.benchmarks.lab.model import Idle
from scheduling.simcluster.telemetry import MEAN_ACTIVITY, WorkloadProfile, busy_spans

Span = tuple[float, float]


@dataclass(frozen=True)
class Plan:
    """A request's run from the moment it starts, in seconds after that moment."""

    profile: WorkloadProfile
    length: float  # until it ends by itself: the job is done, the owner closes the notebook
    in_use: float  # the owner works in it until then (0 for jobs)
    busy: tuple[Span, ...]  # GPU active

    def reclaim_after(self, idle: Idle) -> float | None:
        """When the idle rule reclaims it: idle by every signal for the window, then the grace (None: not
        before it ends). Only notebooks: their kernel and browser are busy exactly while the GPU is."""
        if self.profile not in ("bursty-notebook", "idle-notebook"):
            return None
        quiet_from = 0.0
        for a, b in (*self.busy, (self.length, self.length)):
            if a - quiet_from >= idle.window_s + idle.grace_s:
                return quiet_from + idle.window_s + idle.grace_s
            quiet_from = max(quiet_from, b)
        return None

    def back_after(self, t: float) -> float | None:
        """When the owner next turns to it after ``t`` (start of the next burst while in use), if ever."""
        for a, b in self.busy:
            if b > t and a < self.in_use:
                return max(a, t)
        return None


def plan(
    req: Request,
    start: float,
    cal: Calendar,
    seed: int,
    *,
    attempt: int = 0,
    slowdown: float = 1.0,
    pod_uid: str | None = None,
) -> Plan:
    """``slowdown``: a job runs that many times longer (the static arm runs a k-GPU job on one card).
    ``pod_uid``: the live pod's (with the cluster's ``seed``, what its profile plays); else one per attempt."""
    uid = pod_uid or f"{req.id}/{attempt}"
    if req.kind == "job":
        length = req.run_s * slowdown
        return Plan(
            "steady-training", length, 0.0, tuple(busy_spans("steady-training", seed=seed, pod_uid=uid, until=length))
        )
    if req.forgotten:
        length = cal.next_morning(start + req.session_s, req.close_draw) - start
        spans = busy_spans("idle-notebook", seed=seed, pod_uid=uid, until=length, busy_seconds=req.session_s)
        return Plan("idle-notebook", length, req.session_s, tuple(spans))
    spans = busy_spans("bursty-notebook", seed=seed, pod_uid=uid, until=req.session_s)
    return Plan("bursty-notebook", req.session_s, req.session_s, tuple(spans))


@dataclass(frozen=True)
class Run:
    """One request holding GPUs from ``start`` to ``end`` (seconds after the month's start)."""

    request: Request
    offering: str
    gpu_eq: float  # GPU-equivalents held, all pods together
    start: float
    end: float
    outcome: str  # done | closed | reclaimed | preempted | month-ended
    plan: Plan

    @property
    def lost_in_use(self) -> bool:
        """A notebook stopped by the system while its owner was still working in it."""
        return (
            self.request.kind == "notebook"
            and self.outcome in ("reclaimed", "preempted")
            and (self.end - self.start < self.plan.in_use)
        )

    def busy(self) -> list[Span]:
        """GPU-active stretches, in the month's seconds."""
        return [(self.start + a, min(self.start + b, self.end)) for a, b in self.plan.busy if self.start + a < self.end]

    @property
    def means(self) -> tuple[float, float]:
        return MEAN_ACTIVITY[self.plan.profile]


@dataclass(frozen=True)
class Wait:
    request: Request
    in_quota: bool  # within its team's guarantee when it arrived (static: always, the card is its owner's)
    started: float | None  # first start; None if it never started within the month
