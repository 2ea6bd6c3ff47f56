"""What an arm leaves behind: its runs, every request's wait, and GPUs held and asked for over time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduling.benchmarks.lab.runs import Run, Wait

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Step:
    """Piecewise-constant GPU-equivalents held and asked for (held + waiting) per pool of interchangeable
    GPUs (a GPU model; the static arm's cards are one pool), from each time to the next."""

    pools: tuple[str, ...]
    capacity: F64  # per pool
    times: F64  # (n,)
    held: F64  # (n, pools)
    asked: F64  # (n, pools)

    @classmethod
    def from_changes(cls, pool: str, capacity: float, changes: Iterable[tuple[float, float, float]]) -> Step:
        """One pool, from (time, change of held, change of asked) in any order."""
        rows = np.array(sorted(changes), dtype=np.float64).reshape(-1, 3)
        return cls(
            (pool,), np.array([capacity]), rows[:, 0], np.cumsum(rows[:, 1:2], axis=0), np.cumsum(rows[:, 2:3], axis=0)
        )

    @classmethod
    def from_samples(
        cls, capacity: Mapping[str, float], samples: Sequence[tuple[float, Mapping[str, float], Mapping[str, float]]]
    ) -> Step:
        """From (time, held per pool, asked per pool) in time order."""
        pools = tuple(sorted(capacity))
        return cls(
            pools,
            np.array([capacity[p] for p in pools]),
            np.array([t for t, _, _ in samples], dtype=np.float64),
            np.array([[h.get(p, 0.0) for p in pools] for _, h, _ in samples], dtype=np.float64).reshape(-1, len(pools)),
            np.array([[a.get(p, 0.0) for p in pools] for _, _, a in samples], dtype=np.float64).reshape(-1, len(pools)),
        )


@dataclass(frozen=True)
class ArmOutcome:
    name: str
    capacity: float  # GPU-equivalents of the arm's cluster (its GPUs)
    horizon: float  # seconds: the month
    runs: Sequence[Run]
    waits: Sequence[Wait]
    step: Step
    repartitions: int = 0  # MIG layout changes applied (arms whose layouts follow demand)
