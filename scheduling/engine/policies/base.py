"""The policy interface and the candidate enumeration every milli-GPU policy shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import ClusterState

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class Policy(Protocol):
    """Chooses where one pod goes, or ``None`` if it fits nowhere. Must not modify ``state``."""

    name: str

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None: ...


@dataclass(frozen=True)
class Candidates:
    """Feasible placements of one pod: ``node[i]`` with GPU ``gpu[i]`` (-1 for CPU-only and whole-GPU
    pods, whose GPUs are the node's lowest free ones) holding ``free[i]`` milli-GPU before placing."""

    node: I64
    gpu: I64
    free: I64

    def __len__(self) -> int:
        return len(self.node)


def candidates(state: ClusterState, pod: PodShape) -> Candidates:
    """Every distinct feasible placement of a CPU-only, sharing or whole-GPU pod.

    For a sharing pod, GPUs of one node with equal free milli-GPU are interchangeable, so only the
    lowest-index one of each value is listed; that keeps the list short on a partly empty cluster.
    """
    nodes = np.flatnonzero(state.fits(pod))
    if not pod.is_sharing:
        none = np.full(len(nodes), -1, dtype=np.int64)
        return Candidates(nodes, none, none)
    free = state.gpu_free[nodes]
    order = np.argsort(free, axis=1, kind="stable")
    vals = np.take_along_axis(free, order, axis=1)
    first = np.ones_like(vals, dtype=np.bool_)
    first[:, 1:] = vals[:, 1:] != vals[:, :-1]
    r, c = np.nonzero(first & (vals >= pod.gpu_milli))
    return Candidates(nodes[r], order[r, c], vals[r, c])


def place(state: ClusterState, pod: PodShape, node: int, gpu: int) -> Placement:
    """The placement for a candidate: the named GPU for a sharing pod, else the lowest free GPUs."""
    if pod.is_sharing:
        return Placement(node, (gpu,))
    return Placement(node, state.whole_gpus(node, pod.num_gpu))


def best_fit_gpu(state: ClusterState, node: int, pod: PodShape) -> int:
    """The GPU with the least free milli-GPU that still fits a sharing pod (lowest index on ties)."""
    free = state.gpu_free[node]
    masked = np.where(free >= pod.gpu_milli, free, np.iinfo(np.int64).max)
    return int(np.argmin(masked))


def pick_random_max(scores: npt.NDArray[np.int64] | F64, rng: np.random.Generator) -> int:
    """Index of a maximum, uniformly among ties, as kube-scheduler's selectHost picks among top nodes."""
    top = np.flatnonzero(scores == scores.max())
    return int(top[0]) if len(top) == 1 else int(top[rng.integers(len(top))])
