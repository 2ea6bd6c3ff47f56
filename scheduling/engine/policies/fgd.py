"""FGD: place where the node's fragmentation grows least (Weng et al., USENIX ATC'23).

For each feasible node (and, for a sharing pod, each GPU on it that fits) the policy computes the
node's fragmentation before and after placing and keeps the smallest increase. A whole-GPU pod takes
the lowest-index free GPUs.

Scores follow the paper's simulator: ``floor(100 * sigmoid(-increase / 1000))`` as an integer, the best
GPU per node with the lowest index on ties. The simulator leaves ties between nodes to chance; here they
go to the best-fit node (least CPU and GPU left, as :class:`BestFit` scores it), then the lowest index.
With that rule this re-implementation lands on the published means (random ties spread whole-GPU pods
over every node and leave several points more GPU unallocated).
"""

from __future__ import annotations

import numpy as np

from scheduling.engine.fragmentation import F64, FragIndex, TypicalShapes
from scheduling.engine.policies.base import Candidates, candidates, place
from scheduling.engine.policies.simple import best_fit_left
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import ClusterState


def frag_increase(index: FragIndex, state: ClusterState, pod: PodShape, cand: Candidates) -> F64:
    """Fragmentation increase (milli-GPU) of each candidate; ``index`` must be synced to ``state``."""
    if pod.is_sharing:
        after = index.after_share(state, cand.node, cand.free, pod)
    else:
        after = index.after_whole(state, cand.node, pod)
    return after - index.frag[cand.node]


def simulator_score(increase: F64) -> F64:
    """The reference simulator's integer node score: higher is better, 0-100."""
    return np.floor(100.0 / (1.0 + np.exp(increase / 1000.0)))


def pick(state: ClusterState, pod: PodShape, cand: Candidates, cost: F64) -> Placement:
    """The lowest-cost candidate; ties go to the best-fit node, then the lowest node and GPU index."""
    left = best_fit_left(state, pod, cand.node)
    k = int(np.lexsort((cand.gpu, cand.node, left, cost))[0])
    return place(state, pod, int(cand.node[k]), int(cand.gpu[k]))


class FGD:
    name = "fgd"

    def __init__(self, typical: TypicalShapes) -> None:
        self.index = FragIndex(typical)

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        cand = candidates(state, pod)
        if not len(cand):
            return None
        self.index.sync(state)
        return pick(state, pod, cand, -simulator_score(frag_increase(self.index, state, pod, cand)))
