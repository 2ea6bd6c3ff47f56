"""Offer pods one at a time to a policy and record allocation (PLACEMENT.md, procedure steps 4-6).

A pod that fits nowhere is dropped: no queue, no retry, no preemption; pods never leave.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduling.engine.policies.base import Policy
from scheduling.engine.shapes import MILLI, PodShape
from scheduling.engine.state import ClusterState

F64 = npt.NDArray[np.float64]


@dataclass
class RunResult:
    """Per offered pod: arrived % and allocation % after it, and the time the decision took."""

    arrived: F64
    allocated: F64
    served: F64  # % of capacity: GPU demand of the pods placed so far
    decision_s: F64
    placed: int
    offered: int
    snapshots: dict[int, ClusterState] = field(default_factory=dict)

    def unallocated_at(self, pct: int = 100) -> float:
        """100 - mean allocation % over the events whose arrived % rounds to ``pct``.

        If no event rounds there (a coarse trace), the first event past ``pct`` is used.
        """
        near = np.floor(self.arrived + 0.5) == pct
        if near.any():
            return float(100.0 - self.allocated[near].mean())
        past = np.flatnonzero(self.arrived >= pct)
        i = int(past[0]) if len(past) else len(self.arrived) - 1
        return float(100.0 - self.allocated[i])

    def accepted_at(self, pct: int = 100) -> float:
        """GPU demand placed as % of demand offered, over the events whose arrived % rounds to ``pct``."""
        near = np.flatnonzero(np.floor(self.arrived + 0.5) == pct)
        if not len(near):
            past = np.flatnonzero(self.arrived >= pct)
            near = past[:1] if len(past) else np.array([len(self.arrived) - 1])
        ratio = self.served[near] / np.maximum(self.arrived[near], 1e-12)
        return float(100.0 * ratio.mean())

    def curve(self, lo: int = 75, hi: int = 130) -> dict[int, float]:
        """Unallocated % at each whole arrived % from ``lo`` to ``hi`` (where the run reaches it)."""
        top = float(self.arrived[-1]) if len(self.arrived) else 0.0
        return {p: round(self.unallocated_at(p), 4) for p in range(lo, hi + 1) if p <= top + 0.5}


def replay(
    state: ClusterState,
    pods: Sequence[PodShape],
    policy: Policy,
    demand: Sequence[int] | None = None,
    granted: Callable[[PodShape], float] | None = None,
    snapshot_at: Sequence[int] = (),
) -> RunResult:
    """Replay ``pods`` on ``state`` (modified in place).

    ``demand[i]`` is pod i's GPU demand in milli-GPU for the arrived % (default: its own request);
    ``granted(pod)`` the milli-GPU a placed pod holds (default: its request; MIG instances hold more).
    ``snapshot_at`` lists arrived percentages at which to keep a copy of the state.
    """
    capacity = float(state.total_gpus * MILLI)
    n = len(pods)
    arrived = np.empty(n)
    allocated = np.empty(n)
    served = np.empty(n)
    decision = np.empty(n)
    offered_milli = 0.0
    held = 0.0
    served_milli = 0.0
    placed = 0
    pending = sorted(snapshot_at)
    snaps: dict[int, ClusterState] = {}
    clock = time.perf_counter
    for i, pod in enumerate(pods):
        t0 = clock()
        where = policy.choose(state, pod)
        decision[i] = clock() - t0
        wanted = demand[i] if demand is not None else pod.total_milli
        offered_milli += wanted
        if where is not None:
            state.apply(pod, where)
            held += granted(pod) if granted is not None else pod.total_milli
            served_milli += wanted
            placed += 1
        arrived[i] = 100.0 * offered_milli / capacity
        allocated[i] = 100.0 * held / capacity
        served[i] = 100.0 * served_milli / capacity
        while pending and arrived[i] >= pending[0]:
            snaps[pending.pop(0)] = state.copy()
    return RunResult(arrived, allocated, served, decision, placed, n, snaps)
