"""Request shapes and placements: what a pod asks for and where the engine puts it.

All quantities are integers, as Kubernetes keeps them: CPU in milli-cores, memory in MiB, GPU share in
thousandths of one GPU ("milli-GPU").
"""

from __future__ import annotations

from dataclasses import dataclass

MILLI = 1000
"""Milli-GPU in one whole GPU."""


@dataclass(frozen=True, slots=True)
class PodShape:
    """What one pod requests.

    ``gpu_milli`` is the share of each GPU: below 1000 only for a single-GPU sharing pod, 1000 for whole
    GPUs, 0 for CPU-only pods. ``gpu_models`` restricts the GPU model (``None``: any). ``mig_profile``
    asks for ``num_gpu`` MIG instances of that profile instead (``gpu_milli`` then only records the share
    the pod wanted); ``replica`` asks for one time-sliced replica. MIG and replica requests are served
    only by MIG and time-sliced GPUs.
    """

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] | None = None
    mig_profile: str | None = None
    replica: bool = False

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise ValueError(f"negative request: {self}")
        if not 0 <= self.gpu_milli <= MILLI:
            raise ValueError(f"gpu_milli must be 0-{MILLI}: {self}")
        if self.gpu_milli < MILLI and self.num_gpu > 1:
            raise ValueError(f"only single-GPU pods may share a GPU: {self}")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise ValueError(f"num_gpu and gpu_milli must be both zero or both positive: {self}")
        if self.mig_profile is not None and self.num_gpu < 1:
            raise ValueError(f"a MIG request needs at least one instance: {self}")
        if self.replica and (self.num_gpu != 1 or self.mig_profile is not None):
            raise ValueError(f"a replica request takes exactly one replica: {self}")

    @property
    def is_sharing(self) -> bool:
        """A fractional share of one GPU (the trace's GPU-sharing pod)."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def total_milli(self) -> int:
        """GPU demand in milli-GPU, as the benchmark counts it."""
        return self.num_gpu * self.gpu_milli


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod goes: a node index and the GPU indices on it (empty for CPU-only pods).

    ``mig_start`` is the first memory slice of a MIG instance (``None`` otherwise).
    """

    node: int
    gpus: tuple[int, ...] = ()
    mig_start: int | None = None
