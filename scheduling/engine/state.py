"""Cluster state as numpy arrays, one row per node: cheap to copy, updated in place per placement.

Each node runs its GPUs in one mode, as the device plugin configures a whole node (facts doc 1.3/1.4):

- ``EXCLUSIVE``: whole GPUs, and fractional shares of one GPU by milli-GPU (the trace's model);
- ``TIME_SLICED``: every GPU offers ``replicas`` replicas; only replica requests land here;
- ``MIG``: every GPU is MIG-enabled; only MIG-instance requests land here.

``gpu_free`` holds free milli-GPU of EXCLUSIVE GPUs and 0 everywhere else (other modes and the padding
past a node's GPU count), so the milli-GPU code never needs to look at the mode.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from scheduling.engine import mig
from scheduling.engine.shapes import MILLI, Placement, PodShape

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

EXCLUSIVE, TIME_SLICED, MIG = 0, 1, 2
MODE_NAMES = {EXCLUSIVE: "exclusive", TIME_SLICED: "time-sliced", MIG: "mig"}

# A stamp is unique across every state and copy, so a cache keyed by stamps can never confuse two
# snapshots that diverged after a copy.
_stamps = itertools.count(1)


def _fresh_stamps(n: int) -> I64:
    first = next(_stamps)
    for _ in range(n - 1):
        next(_stamps)
    return np.arange(first, first + n, dtype=np.int64)


@dataclass(eq=False)
class ClusterState:
    """Free resources of every node. Build it with :func:`build_state`."""

    names: tuple[str, ...]
    models: tuple[str, ...]  # catalogue: model_idx indexes into it
    model_idx: I64  # (n,)
    gpu_count: I64  # (n,)
    mode: I64  # (n,)
    cpu_cap: I64  # (n,)
    cpu_free: I64  # (n,)
    mem_cap: I64  # (n,)
    mem_free: I64  # (n,)
    gpu_free: I64  # (n, g) milli-GPU free on EXCLUSIVE GPUs, else 0
    full_free: I64  # (n,) EXCLUSIVE GPUs entirely free
    ts_replicas: I64  # (n,) replicas per GPU on TIME_SLICED nodes, else 0
    ts_free: I64  # (n, g) free replicas
    mig_state: I64  # (n, g) MIG occupancy code (see mig.py), -1 on non-MIG GPUs
    stamp: I64  # (n,) changes whenever the node's row changes
    # Nodes the next decisions may use (None: all). Not row data: the live cycle narrows it per request to
    # the nodes whose labels, taints and device-plugin counts admit the pod (see scheduling/inventory.py).
    only: Mask | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count.sum())

    def copy(self) -> ClusterState:
        """An independent snapshot (arrays copied, stamps kept: the rows are identical)."""
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        for k, v in kw.items():
            if isinstance(v, np.ndarray):
                kw[k] = v.copy()
        return ClusterState(**kw)

    @contextmanager
    def restricted(self, only: Mask) -> Iterator[ClusterState]:
        """Decisions inside the block may use only the nodes where ``only`` is true."""
        saved = self.only
        self.only = only if saved is None else only & saved
        try:
            yield self
        finally:
            self.only = saved

    def model_ok(self, pod: PodShape) -> Mask:
        if pod.gpu_models is None or pod.num_gpu == 0:
            return np.ones(self.n_nodes, dtype=np.bool_)
        allowed = np.array([m in pod.gpu_models for m in self.models], dtype=np.bool_)
        return allowed[self.model_idx]  # a lookup per node: a tenth of np.isin's cost, called per decision

    def host_ok(self, pod: PodShape) -> Mask:
        """Nodes whose CPU, memory and GPU model suit the pod, ignoring the GPUs' occupancy."""
        ok = (self.cpu_free >= pod.cpu_milli) & (self.mem_free >= pod.memory_mib)
        if self.only is not None:
            ok &= self.only
        if pod.num_gpu:
            ok &= self.model_ok(pod)
        return ok

    def fits(self, pod: PodShape) -> Mask:
        """Nodes that can take a CPU-only, sharing or whole-GPU pod now (none for MIG or replica pods)."""
        if pod.mig_profile is not None or pod.replica:
            return np.zeros(self.n_nodes, dtype=np.bool_)
        ok = self.host_ok(pod)
        if pod.num_gpu == 0:
            return ok
        if pod.is_sharing:
            return ok & (self.gpu_free >= pod.gpu_milli).any(axis=1)
        return ok & (self.full_free >= pod.num_gpu)

    def whole_gpus(self, node: int, k: int) -> tuple[int, ...]:
        """The ``k`` lowest-index entirely free GPUs of a node (the reference simulator's choice)."""
        idx = np.flatnonzero(self.gpu_free[node] == MILLI)[:k]
        return tuple(int(i) for i in idx)

    def _touch(self, node: int) -> None:
        self.stamp[node] = next(_stamps)

    def apply(self, pod: PodShape, p: Placement) -> None:
        """Bind ``pod`` at ``p``; raises ValueError if it does not fit there."""
        self._change(pod, p, +1)

    def release(self, pod: PodShape, p: Placement) -> None:
        """Undo :meth:`apply` (a pod that finished or was evicted)."""
        self._change(pod, p, -1)

    def _change(self, pod: PodShape, p: Placement, sign: int) -> None:
        n = p.node
        cpu = self.cpu_free[n] - sign * pod.cpu_milli
        mem = self.mem_free[n] - sign * pod.memory_mib
        if not (0 <= cpu <= self.cpu_cap[n] and 0 <= mem <= self.mem_cap[n]):
            raise ValueError(f"CPU or memory of {self.names[n]} cannot take this change: {pod}")
        if len(p.gpus) != pod.num_gpu or len(set(p.gpus)) != len(p.gpus):
            raise ValueError(f"placement {p} does not name {pod.num_gpu} distinct GPUs")
        if any(not 0 <= g < self.gpu_count[n] for g in p.gpus):
            raise ValueError(f"placement {p} names a GPU {self.names[n]} does not have")
        if pod.mig_profile is not None:
            self._change_mig(pod, p, sign)
        elif pod.replica:
            self._change_replica(p, sign)
        elif pod.num_gpu:
            self._change_milli(pod, p, sign)
        self.cpu_free[n] = cpu
        self.mem_free[n] = mem
        self._touch(n)

    def _change_milli(self, pod: PodShape, p: Placement, sign: int) -> None:
        n, gpus = p.node, list(p.gpus)
        if self.mode[n] != EXCLUSIVE:
            raise ValueError(f"{self.names[n]} is {MODE_NAMES[int(self.mode[n])]}, not exclusive")
        after = self.gpu_free[n, gpus] - sign * pod.gpu_milli
        if (after < 0).any() or (after > MILLI).any():
            raise ValueError(f"GPUs {gpus} of {self.names[n]} cannot take this change: {pod}")
        self.gpu_free[n, gpus] = after
        self.full_free[n] = int((self.gpu_free[n] == MILLI).sum())

    def _change_replica(self, p: Placement, sign: int) -> None:
        n, g = p.node, p.gpus[0]
        if self.mode[n] != TIME_SLICED:
            raise ValueError(f"{self.names[n]} is not time-sliced")
        after = self.ts_free[n, g] - sign
        if not 0 <= after <= self.ts_replicas[n]:
            raise ValueError(f"GPU {g} of {self.names[n]} has no replica to change")
        self.ts_free[n, g] = after

    def _change_mig(self, pod: PodShape, p: Placement, sign: int) -> None:
        n = p.node
        if self.mode[n] != MIG or p.mig_start is None:
            raise ValueError(f"{self.names[n]} is not MIG-enabled or the placement has no start slice")
        geo = mig.geometry_for(self.models[int(self.model_idx[n])])
        change = geo.add if sign > 0 else geo.remove
        for g in p.gpus:
            new = change(int(self.mig_state[n, g]), pod.mig_profile or "", p.mig_start)
            if new is None:
                raise ValueError(f"{pod.mig_profile}@{p.mig_start} is not valid on GPU {g} of {self.names[n]}")
            self.mig_state[n, g] = new


def build_state(
    names: Sequence[str],
    models: Sequence[str],
    gpu_counts: Sequence[int],
    cpu_milli: Sequence[int],
    memory_mib: Sequence[int],
    modes: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
) -> ClusterState:
    """An empty cluster. ``modes`` defaults to EXCLUSIVE; ``replicas`` is read for TIME_SLICED nodes."""
    n = len(names)
    if not all(len(x) == n for x in (models, gpu_counts, cpu_milli, memory_mib)):
        raise ValueError("node columns differ in length")
    catalogue = tuple(sorted(set(models)))
    counts = np.asarray(gpu_counts, dtype=np.int64)
    mode = np.asarray(modes if modes is not None else [EXCLUSIVE] * n, dtype=np.int64)
    reps = np.asarray(replicas if replicas is not None else [0] * n, dtype=np.int64)
    width = max(1, int(counts.max(initial=0)))
    present = np.arange(width)[None, :] < counts[:, None]
    excl = present & (mode == EXCLUSIVE)[:, None]
    ts = mode == TIME_SLICED
    if (ts & (reps < 1)).any():
        raise ValueError("time-sliced nodes need replicas >= 1")
    for i in np.flatnonzero(mode == MIG):
        mig.geometry_for(models[i])  # raises for models without MIG
    cpu = np.asarray(cpu_milli, dtype=np.int64)
    mem = np.asarray(memory_mib, dtype=np.int64)
    return ClusterState(
        names=tuple(names),
        models=catalogue,
        model_idx=np.asarray([catalogue.index(m) for m in models], dtype=np.int64),
        gpu_count=counts,
        mode=mode,
        cpu_cap=cpu.copy(),
        cpu_free=cpu.copy(),
        mem_cap=mem.copy(),
        mem_free=mem.copy(),
        gpu_free=np.where(excl, MILLI, 0).astype(np.int64),
        full_free=excl.sum(axis=1).astype(np.int64),
        ts_replicas=np.where(ts, reps, 0).astype(np.int64),
        ts_free=np.where(present & ts[:, None], reps[:, None], 0).astype(np.int64),
        mig_state=np.where(present & (mode == MIG)[:, None], 0, -1).astype(np.int64),
        stamp=_fresh_stamps(n),
    )
