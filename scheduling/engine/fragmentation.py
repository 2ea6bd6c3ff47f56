"""GPU fragmentation as FGD measures it (Weng et al., USENIX ATC'23), vectorised over nodes.

A node's fragmentation for one typical pod shape is the free GPU that shape could not use there: all
free GPU if the shape cannot be placed at all (too little CPU, too few fitting GPUs, wrong GPU model, or
a CPU-only shape, which uses no GPU), otherwise the free GPU on cards each too small for it. A node's
fragmentation is the frequency-weighted sum over the typical shapes. The paper leaves memory out; with
``with_memory`` the shapes carry their memory request too and a shape only fits where its memory does.

Everything a shape needs from a node reduces to two numbers per (node, shape): how many GPUs have at
least the shape's share free (``cnt``) and how much milli-GPU those GPUs hold (``use``). The node is
then fragmented by ``total_free - use`` if the shape fits, else ``total_free``. :class:`FragIndex`
keeps those per-node aggregates and refreshes only nodes whose stamp changed, so scoring a placement is
a few array operations over the candidate nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduling.engine.shapes import PodShape
from scheduling.engine.state import ClusterState

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

ShapeKey = tuple[int, int, int, int, frozenset[str] | None]


@dataclass(frozen=True)
class TypicalShapes:
    """Typical pod shapes and their weights (which sum to 1)."""

    cpu: I64  # (T,) milli-CPU
    memory: I64  # (T,) MiB; all 0 when the shapes leave memory out
    milli: I64  # (T,) share of each GPU; 0 for CPU-only shapes
    count: I64  # (T,) GPUs needed
    models: tuple[frozenset[str] | None, ...]
    weight: F64  # (T,)

    def __len__(self) -> int:
        return len(self.cpu)


def shape_key(p: PodShape, with_memory: bool = False) -> ShapeKey:
    return (p.cpu_milli, p.memory_mib if with_memory else 0, p.gpu_milli, p.num_gpu, p.gpu_models)


def typical_shapes(pods: Iterable[PodShape], coverage: float = 0.95, with_memory: bool = False) -> TypicalShapes:
    """The most frequent shapes that together make up ``coverage`` of the pods, re-weighted to sum to 1.

    A shape is (CPU, share per GPU, GPU count, allowed models), as in the paper's simulator, plus memory
    if ``with_memory``. Ties in frequency are broken by the shape itself so the result is deterministic.
    """
    counts = Counter(shape_key(p, with_memory) for p in pods if p.mig_profile is None and not p.replica)
    return shapes_from_counts(counts, coverage)


def shapes_from_counts(counts: Counter[ShapeKey] | dict[ShapeKey, float], coverage: float) -> TypicalShapes:
    """Typical shapes from (possibly weighted) shape counts; no counts give no shapes (knows nothing)."""
    total = float(sum(counts.values()))

    def order(kv: tuple[ShapeKey, float]) -> tuple[float, int, int, int, int, str]:
        (cpu, mem, milli, num, models), c = kv
        return (-c, -cpu, -milli, -num, -mem, ",".join(sorted(models or ())))

    chosen: list[tuple[ShapeKey, float]] = []
    cum = 0.0
    for key, c in sorted(counts.items(), key=order):
        if cum >= coverage * total:
            break
        chosen.append((key, c))
        cum += c
    w = np.array([c for _, c in chosen], dtype=np.float64)
    if len(w):
        w /= w.sum()
    return TypicalShapes(
        cpu=np.array([k[0] for k, _ in chosen], dtype=np.int64),
        memory=np.array([k[1] for k, _ in chosen], dtype=np.int64),
        milli=np.array([k[2] for k, _ in chosen], dtype=np.int64),
        count=np.array([k[3] for k, _ in chosen], dtype=np.int64),
        models=tuple(k[4] for k, _ in chosen),
        weight=w,
    )


class FragIndex:
    """Per-node fragmentation aggregates of one typical-shape set, kept in step with a state.

    Call :meth:`sync` with the state before reading; it recomputes only rows whose stamp changed, so
    following one state (or its copies) through many placements costs one row per placement.
    """

    def __init__(self, typical: TypicalShapes) -> None:
        self.typical = typical
        t = typical
        self._gpu_shape = t.milli > 0  # (T,)
        self._uses_memory = bool(t.memory.any())
        self._names: tuple[str, ...] | None = None
        self.model_ok: Mask = np.zeros((0, len(t)), dtype=np.bool_)
        self.stamp: I64 = np.zeros(0, dtype=np.int64)
        self.cnt: I64 = np.zeros((0, len(t)), dtype=np.int64)
        self.use: I64 = np.zeros((0, len(t)), dtype=np.int64)
        self.tot: I64 = np.zeros(0, dtype=np.int64)
        self.frag: F64 = np.zeros(0, dtype=np.float64)

    def _bind(self, state: ClusterState) -> None:
        t = self.typical
        ok = np.ones((state.n_nodes, len(t)), dtype=np.bool_)
        for j, models in enumerate(t.models):
            if models is not None:
                allowed = [i for i, m in enumerate(state.models) if m in models]
                ok[:, j] = np.isin(state.model_idx, allowed)
        self.model_ok = ok & self._gpu_shape[None, :]
        self._names = state.names
        self.stamp = np.full(state.n_nodes, -1, dtype=np.int64)
        self.cnt = np.zeros((state.n_nodes, len(t)), dtype=np.int64)
        self.use = np.zeros_like(self.cnt)
        self.tot = np.zeros(state.n_nodes, dtype=np.int64)
        self.frag = np.zeros(state.n_nodes, dtype=np.float64)

    def sync(self, state: ClusterState) -> None:
        if self._names is not state.names or len(self.stamp) != state.n_nodes:
            self._bind(state)
        stale = np.flatnonzero(self.stamp != state.stamp)
        if not len(stale):
            return
        free = state.gpu_free[stale]  # (s, g)
        ge = free[:, None, :] >= self.typical.milli[None, :, None]  # (s, T, g)
        self.cnt[stale] = ge.sum(axis=2)
        self.use[stale] = (ge * free[:, None, :]).sum(axis=2)
        self.tot[stale] = free.sum(axis=1)
        self.frag[stale] = self.evaluate(
            stale, state.cpu_free[stale], state.mem_free[stale], self.cnt[stale], self.use[stale], self.tot[stale]
        )
        self.stamp[stale] = state.stamp[stale]

    def evaluate(self, nodes: I64, cpu: I64, mem: I64, cnt: I64, use: I64, tot: I64) -> F64:
        """Fragmentation (milli-GPU) of ``nodes`` if they had these CPU, memory and GPU aggregates."""
        t = self.typical
        # In place, and the usable GPU as floats times the mask: the (candidates x shapes) arrays are the cost
        # of every placement decision (a constrained workload has ~190 typical shapes), so no temporaries.
        fits = np.take(self.model_ok, nodes, axis=0)
        fits &= cpu[:, None] >= t.cpu
        fits &= cnt >= t.count
        if self._uses_memory:
            fits &= mem[:, None] >= t.memory
        usable = use.astype(np.float64)
        usable *= fits
        return np.asarray(tot * t.weight.sum() - usable @ t.weight, dtype=np.float64)

    def after_share(self, state: ClusterState, nodes: I64, gpu_free: I64, pod: PodShape) -> F64:
        """Fragmentation of each node after a sharing pod takes ``pod.gpu_milli`` from a GPU with
        ``gpu_free`` free (one candidate per entry; ``nodes`` may repeat)."""
        m = self.typical.milli
        f = gpu_free[:, None]
        f2 = f - pod.gpu_milli
        before, after = f >= m, f2 >= m
        cnt = np.take(self.cnt, nodes, axis=0)
        cnt += after
        cnt -= before
        use = np.take(self.use, nodes, axis=0)
        use += after * f2
        use -= before * f
        cpu = state.cpu_free[nodes] - pod.cpu_milli
        mem = state.mem_free[nodes] - pod.memory_mib
        return self.evaluate(nodes, cpu, mem, cnt, use, self.tot[nodes] - pod.gpu_milli)

    def after_whole(self, state: ClusterState, nodes: I64, pod: PodShape) -> F64:
        """Fragmentation after a whole-GPU or CPU-only pod (whole GPUs hold 1000, which every shape's
        share fits, so each taken GPU lowers every ``cnt`` by one and every ``use`` by 1000)."""
        taken = pod.num_gpu * 1000
        cnt = np.take(self.cnt, nodes, axis=0)
        cnt -= pod.num_gpu
        use = np.take(self.use, nodes, axis=0)
        use -= taken
        cpu = state.cpu_free[nodes] - pod.cpu_milli
        mem = state.mem_free[nodes] - pod.memory_mib
        return self.evaluate(nodes, cpu, mem, cnt, use, self.tot[nodes] - taken)


def fragmentation_ratio(state: ClusterState, index: FragIndex) -> float:
    """Share (%) of the idle milli-GPU that is fragmented, over the whole cluster (the paper's ratio)."""
    index.sync(state)
    idle = float(index.tot.sum())
    return 100.0 * float(index.frag.sum()) / idle if idle else 0.0
