"""Packing baselines: first-fit and best-fit (the FGD paper's BestFit)."""

from __future__ import annotations

import numpy as np

from scheduling.engine.policies.base import F64, I64, best_fit_gpu, pick_random_max
from scheduling.engine.shapes import MILLI, Placement, PodShape
from scheduling.engine.state import ClusterState

# Best-fit normalises by the largest node of the reference cluster (PLACEMENT.md): 128 cores, 8 GPUs.
MAX_CPU_MILLI = 128_000
MAX_GPU_MILLI = 8 * MILLI


def best_fit_left(state: ClusterState, pod: PodShape, nodes: I64) -> F64:
    """What best-fit minimises: CPU and GPU left on each node after placing, equal weights, 0-1."""
    cpu = (state.cpu_free[nodes] - pod.cpu_milli) / MAX_CPU_MILLI
    gpu = (state.gpu_free[nodes].sum(axis=1) - pod.total_milli) / MAX_GPU_MILLI
    return np.asarray(0.5 * cpu + 0.5 * gpu, dtype=np.float64)


class FirstFit:
    """The lowest-index node that fits; on it the lowest-index GPU(s) that fit."""

    name = "firstfit"

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        nodes = np.flatnonzero(state.fits(pod))
        if not len(nodes):
            return None
        node = int(nodes[0])
        if pod.is_sharing:
            return Placement(node, (int(np.argmax(state.gpu_free[node] >= pod.gpu_milli)),))
        return Placement(node, state.whole_gpus(node, pod.num_gpu))


class BestFit:
    """The node with the least CPU and GPU left after placing, equal weights (the paper's BestFit).

    As in the reference simulator the score is an integer 0-100 and ties go to a random node, unless
    ``exact`` is set; a sharing pod takes the fitting GPU with the least free share.
    """

    name = "bestfit"

    def __init__(self, rng: np.random.Generator, exact: bool = False) -> None:
        self.rng = rng
        self.exact = exact

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        nodes = np.flatnonzero(state.fits(pod))
        if not len(nodes):
            return None
        score = (1.0 - best_fit_left(state, pod, nodes)) * 100.0
        if not self.exact:
            score = np.floor(score)
        node = int(nodes[pick_random_max(score, self.rng)])
        if pod.is_sharing:
            return Placement(node, (best_fit_gpu(state, node, pod),))
        return Placement(node, state.whole_gpus(node, pod.num_gpu))
