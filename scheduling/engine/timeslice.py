"""Placing time-sliced replica requests (device plugin ``sharing.timeSlicing``, facts doc 1.3).

Each GPU of a TIME_SLICED node offers ``replicas`` replicas and a request takes one, whatever share of
compute it hoped for (replicas are not isolated; asking for two does not buy twice the compute). The
placer packs: the node with the fewest free replicas that still has one, and on it the busiest GPU, so
whole GPUs stay free for pods that would rather not share. Ties go to the lowest indices.
"""

from __future__ import annotations

import numpy as np

from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import TIME_SLICED, ClusterState


class TimeSlicePlacer:
    name = "timeslice"

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        if not pod.replica:
            return None
        ok = state.host_ok(pod) & (state.mode == TIME_SLICED) & (state.ts_free > 0).any(axis=1)
        nodes = np.flatnonzero(ok)
        if not len(nodes):
            return None
        node = int(nodes[np.argmin(state.ts_free[nodes].sum(axis=1))])
        free = state.ts_free[node]
        gpu = int(np.argmin(np.where(free > 0, free, np.iinfo(np.int64).max)))
        return Placement(node, (gpu,))
