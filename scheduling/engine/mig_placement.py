"""Placing MIG-instance requests: which node, which GPU, which start slice.

Only placements NVIDIA allows are ever considered (the slot tables of :mod:`scheduling.engine.mig`).
Among them the placer keeps the one that increases MIG fragmentation least: the free memory slices a
typical profile could no longer use (FGD's idea on MIG's geometry). Typical profiles are learned from
the requests offered (or given). Ties go to GPUs that already hold instances (packing keeps empty GPUs
whole for big profiles), then to the node with the fewest free slices, then to the lowest indices.

A request for ``num_gpu`` instances takes one instance on each of that many GPUs of one node (how a pod
asks for several ``nvidia.com/mig-7g.80gb``, say); only profiles with a single allowed start (4g, 7g)
may be asked for more than once, so every GPU gets the same slots.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from scheduling.engine import mig
from scheduling.engine.mig import F64, I64, MigGeometry
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import MIG, ClusterState

Mask = npt.NDArray[np.bool_]


class MigPlacer:
    name = "mig"

    def __init__(self, weights: Mapping[str, float] | None = None, refresh: int = 256) -> None:
        """``weights``: typical profiles and their frequencies; ``None`` learns them from requests."""
        self._fixed = dict(weights) if weights is not None else None
        self._seen: Counter[str] = Counter()
        self._refresh = refresh
        self._tables: dict[tuple[str, int], F64] = {}
        self._version = 0

    def weights(self) -> dict[str, float]:
        if self._fixed is not None:
            return self._fixed
        total = sum(self._seen.values())
        return {p: c / total for p, c in self._seen.items()} if total else {}

    def _observe(self, profile: str) -> None:
        if self._fixed is not None:
            return
        self._seen[profile] += 1
        n = sum(self._seen.values())
        if n % self._refresh == 0 or (n < self._refresh and n & (n - 1) == 0):
            self._version += 1

    def _frag(self, geo: MigGeometry) -> F64:
        key = (geo.model, self._version)
        if key not in self._tables:
            self._tables = {k: v for k, v in self._tables.items() if k[1] == self._version}
            self._tables[key] = mig.unusable_slices(geo, self.weights())
        return self._tables[key]

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        profile = pod.mig_profile
        if profile is None:
            return None
        self._observe(profile)
        host = state.host_ok(pod) & (state.mode == MIG)
        best: tuple[tuple[float, int, int], Placement] | None = None
        for model_idx in np.unique(state.model_idx[host]):
            geo = mig.geometry_for(state.models[int(model_idx)])
            if profile not in geo.by_profile:
                continue
            nodes = np.flatnonzero(host & (state.model_idx == model_idx))
            found = self._best_on(state, geo, nodes, profile, pod.num_gpu)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return best[1] if best is not None else None

    def _best_on(
        self, state: ClusterState, geo: MigGeometry, nodes: I64, profile: str, k: int
    ) -> tuple[tuple[float, int, int], Placement] | None:
        opts = np.asarray(geo.by_profile[profile], dtype=np.int64)
        if k > 1 and len(opts) > 1:
            raise ValueError(f"{profile} has several start slices; ask for one instance per request")
        codes = state.mig_state[nodes]  # (n, g), -1 where no MIG GPU
        new = geo.next_code[np.maximum(codes, 0)][:, :, opts]  # (n, g, starts)
        ok = (new >= 0) & (codes >= 0)[:, :, None]
        frag = self._frag(geo)
        delta = np.where(ok, frag[np.maximum(new, 0)] - frag[np.maximum(codes, 0)][:, :, None], np.inf)
        start_i = np.argmin(delta, axis=2)  # lowest start among equals
        gpu_delta = np.round(np.take_along_axis(delta, start_i[:, :, None], axis=2)[:, :, 0], 9)
        used = mig.popcount(np.maximum(codes, 0))
        gpu_idx = np.broadcast_to(np.arange(codes.shape[1]), codes.shape)
        # Per node, its k best GPUs: least fragmentation, then the fullest, then the lowest index.
        order = np.lexsort((gpu_idx, -used, gpu_delta), axis=-1)[:, :k]
        chosen_delta = np.take_along_axis(gpu_delta, order, axis=1)
        if order.shape[1] < k:
            return None
        feasible = np.isfinite(chosen_delta).all(axis=1)
        if not feasible.any():
            return None
        starts = np.take_along_axis(start_i, order, axis=1)
        cost = np.where(feasible, chosen_delta.sum(axis=1), np.inf)
        free_slices = np.where(codes >= 0, mig.MEMORY_SLOTS - used, 0).sum(axis=1)
        packed = -np.take_along_axis(used, order, axis=1).sum(axis=1)
        r = int(np.lexsort((nodes, free_slices, packed, cost))[0])
        start = int(geo.options[int(opts[starts[r, 0]])].start)
        gpus = tuple(sorted(int(g) for g in order[r]))
        return (float(cost[r]), int(packed[r]), int(free_slices[r])), Placement(int(nodes[r]), gpus, start)


def mig_fragmentation(state: ClusterState, profiles: Mapping[str, float] | None = None) -> float:
    """Share (%) of free MIG memory slices that none of ``profiles`` (default: every plain profile of
    the GPU's model) could be placed on as the GPUs stand."""
    stranded = free = 0.0
    for model_idx in np.unique(state.model_idx[state.mode == MIG]):
        geo = mig.geometry_for(state.models[int(model_idx)])
        names = profiles or {p: 1.0 for p in geo.by_profile if "+me" not in p}
        union = {p: 1.0 for p in names if p in geo.by_profile}
        codes = state.mig_state[(state.mode == MIG) & (state.model_idx == model_idx)]
        codes = codes[codes >= 0]
        stranded += float(mig.stranded_by_any(geo, union)[codes].sum())
        free += float((mig.MEMORY_SLOTS - mig.popcount(codes)).sum())
    return 100.0 * stranded / free if free else 0.0
