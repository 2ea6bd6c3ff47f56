"""One policy for mixed requests: MIG and replica requests to their placers, the rest to a milli-GPU
policy (CPU-only, sharing and whole-GPU pods)."""

from __future__ import annotations

from scheduling.engine.mig_placement import MigPlacer
from scheduling.engine.policies.base import Policy
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import ClusterState
from scheduling.engine.timeslice import TimeSlicePlacer


class Router:
    def __init__(self, milli: Policy, mig: MigPlacer | None = None, replica: TimeSlicePlacer | None = None) -> None:
        self.milli = milli
        self.mig = mig or MigPlacer()
        self.replica = replica or TimeSlicePlacer()
        self.name = milli.name

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        if pod.mig_profile is not None:
            return self.mig.choose(state, pod)
        if pod.replica:
            return self.replica.choose(state, pod)
        return self.milli.choose(state, pod)
