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

The typical shapes (with memory) come either fixed, like FGD's, or from an :class:`OnlineWorkload` that
learns them from the requests the policy is offered; the benchmark's ``ours`` learns online.
"""

from __future__ import annotations

import math

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


class BalancedFGD:
    name = "ours"

    def __init__(self, workload: TypicalShapes | OnlineWorkload, weight: float = 1.0) -> None:
        """``workload``: fixed typical shapes, or a model to learn them from the requests offered."""
        self.online = workload if isinstance(workload, OnlineWorkload) else None
        self.weight = weight
        self._version = -1
        self._use(workload.typical() if isinstance(workload, OnlineWorkload) else workload)

    def _use(self, typical: TypicalShapes) -> None:
        self.index = FragIndex(typical)
        self.ratios = demand_ratios(typical)

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
        return pick(state, pod, cand, np.round(cost))
