"""The portal's own policy: FGD's fragmentation plus the GPU that a node's CPU and memory strand.

FGD asks, per typical pod shape, whether one more such pod could use a node's free GPU. It does not see
that a node whose CPU or memory runs out before its GPUs do will strand those GPUs whatever comes next:
on the reference cluster the 8-GPU nodes have 12 cores and 48 GiB per GPU while the T4 nodes have 52
cores per GPU, and most late failures under FGD are pods that find GPUs only on nodes without the CPU
or memory to go with them.

So the cost of a placement is the increase of

    fragmentation(node) + stranded(node),
    stranded = max(0, free GPU - min(free CPU * gpu_per_cpu, free memory * gpu_per_mib))

where ``gpu_per_cpu`` and ``gpu_per_mib`` are the GPU that the typical GPU-using shapes request per
unit of CPU and memory. A CPU-hungry pod therefore goes where CPU is plentiful relative to GPU, a
GPU-heavy one where CPU is scarce. Costs are compared to 1/1000 GPU (finer differences are rounding
noise); ties go to the best-fit node, then the lowest index.

A third term keeps the GPUs of models that requests name for the requests that need them. When a share of
the pods may run only on some models (every portal request names its model; in the FGD paper's constrained
workloads over half of the constraints name T4, which holds 14% of the GPUs), a pod free to go anywhere
that lands on a model in demand takes a GPU that a constrained pod will miss, and the constrained pod is
then turned away. Neither fragmentation nor stranding sees that. So the cost also grows by

    scarce_weight * GPU taken * claimed(model),
    claimed(model) = (share of recent GPU demand that may run only on the model)
                     / (the model's share of the cluster's free GPU)

which is the same for every candidate of a pod whose models all have the same claim (an unconstrained
workload adds nothing), and steers a pod with a choice to the models others need least. Measured on
constrained variants of the trace (README, Benchmarks): at 33% constrained pods, 4.80% unallocated against
our FGD's 11.32% and the published FGD's 12.16%.

The typical shapes (with memory) come either fixed, like FGD's, or from an :class:`OnlineWorkload` that
learns them, and the demand per model, from the requests the policy is offered; the benchmark's ``ours``
learns online.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from scheduling.engine.fragmentation import F64, I64, FragIndex, TypicalShapes
from scheduling.engine.policies.base import candidates
from scheduling.engine.policies.fgd import frag_increase, pick
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import ClusterState
from scheduling.engine.workload import OnlineWorkload


def demand_ratios(typical: TypicalShapes) -> tuple[float, float]:
    """GPU milli requested per milli-CPU and per MiB by the typical GPU-using shapes (weighted)."""
    gpu = typical.milli > 0
    w = typical.weight[gpu]
    milli = float(w @ (typical.milli[gpu] * typical.count[gpu]))
    cpu = float(w @ typical.cpu[gpu])
    mem = float(w @ typical.memory[gpu])
    return (milli / cpu if cpu else math.inf, milli / mem if mem else math.inf)


def stranded(gpu_free: I64 | F64, cpu_free: I64 | F64, mem_free: I64 | F64, ratios: tuple[float, float]) -> F64:
    """Free milli-GPU beyond what the node's free CPU and memory can feed at the workload's ratios."""
    feedable = np.full(np.shape(gpu_free), np.inf)
    for free, per_unit in zip((cpu_free, mem_free), ratios, strict=True):
        if np.isfinite(per_unit):  # an infinite ratio: the workload asks none of it, so it feeds all
            feedable = np.minimum(feedable, np.asarray(free, dtype=np.float64) * per_unit)
    return np.asarray(np.maximum(0.0, gpu_free - feedable), dtype=np.float64)


def typical_model_demand(typical: TypicalShapes) -> dict[str, float]:
    """Per GPU model, the share of the typical shapes' GPU demand that may run only there (a set of models
    counts a part for each)."""
    milli = typical.weight * typical.milli * typical.count
    total = float(milli.sum())
    demand: dict[str, float] = {}
    for models, m in zip(typical.models, milli, strict=True):
        if models and m:
            for model in models:
                demand[model] = demand.get(model, 0.0) + float(m) / len(models) / total
    return demand


def claimed(state: ClusterState, free_milli: I64 | F64, demand: Mapping[str, float]) -> F64:
    """Per model of ``state.models``: share of demand that may run only there over the model's share of the
    free milli-GPU (``free_milli`` per node). 0 for models no request names."""
    want = np.array([demand.get(m, 0.0) for m in state.models], dtype=np.float64)
    if not want.any():
        return want
    free = np.bincount(state.model_idx, weights=free_milli, minlength=len(state.models))
    return np.asarray(want * free.sum() / np.maximum(free, 1.0), dtype=np.float64)


class BalancedFGD:
    name = "ours"

    def __init__(
        self, workload: TypicalShapes | OnlineWorkload, weight: float = 1.0, scarce_weight: float = 1.0
    ) -> None:
        """``workload``: fixed typical shapes, or a model to learn them from the requests offered."""
        self.online = workload if isinstance(workload, OnlineWorkload) else None
        self.weight = weight
        self.scarce_weight = scarce_weight
        self._version = -1
        self._fixed_demand: dict[str, float] = {}
        self._use(workload.typical() if isinstance(workload, OnlineWorkload) else workload)
        if self.online is None:
            self._fixed_demand = typical_model_demand(self.index.typical)

    def _use(self, typical: TypicalShapes) -> None:
        self.index = FragIndex(typical)
        self.ratios = demand_ratios(typical)

    def model_demand(self) -> Mapping[str, float]:
        return self.online.model_demand() if self.online is not None else self._fixed_demand

    def choose(self, state: ClusterState, pod: PodShape) -> Placement | None:
        if self.online is not None:
            self.online.observe(pod)
            if self.online.version != self._version:
                self._version = self.online.version
                self._use(self.online.typical())
        cand = candidates(state, pod)
        if not len(cand):
            return None
        self.index.sync(state)
        n = cand.node
        gpu, cpu, mem = self.index.tot[n], state.cpu_free[n], state.mem_free[n]
        before = stranded(gpu, cpu, mem, self.ratios)
        after = stranded(gpu - pod.total_milli, cpu - pod.cpu_milli, mem - pod.memory_mib, self.ratios)
        cost = frag_increase(self.index, state, pod, cand) + self.weight * (after - before)
        if pod.num_gpu and self.scarce_weight:
            claim = claimed(state, self.index.tot, self.model_demand())
            cost = cost + self.scarce_weight * pod.total_milli * claim[state.model_idx[n]]
        return pick(state, pod, cand, np.round(cost))
