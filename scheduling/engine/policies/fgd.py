"""FGD: place where the node's fragmentation grows least (Weng et al., USENIX ATC'23).

For each feasible node (and, for a sharing pod, each GPU on it that fits) the policy computes the
node's fragmentation before and after placing and keeps the smallest increase. A whole-GPU pod takes
the lowest-index free GPUs.

Scores follow the paper's simulator: ``floor(100 * sigmoid(-increase / 1000))`` as an integer, the best
GPU per node with the lowest index on ties. Ties between nodes go to the lowest node index (the node
list's order). Measured against the published means (seeds 42-51, unallocated % at 100% arrived), that
rule lands within 0.25 points on the unconstrained lists (default 4.93 against 4.77, cpu050 5.22
against 5.00, cpu100 5.00 against 4.79, gpushare40 6.17 against 6.04, gpushare60 8.91 against 8.75,
gpushare80 11.12 against 10.92, gpushare100 13.52 against 13.36) and within 7% on the GPU-model constrained
ones (gpuspec10 5.41 against 5.34, 20: 5.56 against 5.34, 25: 6.44 against 6.09, 33: 11.32 against 12.16).
Ties to the best-fit node, used before, matched default more closely (4.80) but sent pods free to go
anywhere to the small nodes of the models constrained pods need, and missed the constrained figures by up to
20% (gpuspec25: 7.24 on seeds 42-44); random ties, as kube-scheduler would break them, leave 9.35 on default.
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


def pick_first(state: ClusterState, pod: PodShape, cand: Candidates, cost: F64) -> Placement:
    """The lowest-cost candidate; ties go to the lowest node index, then the lowest GPU index."""
    k = int(np.lexsort((cand.gpu, cand.node, cost))[0])
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
        return pick_first(state, pod, cand, -simulator_score(frag_increase(self.index, state, pod, cand)))
