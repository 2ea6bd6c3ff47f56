"""Small generated traces in the openb CSV format (tests never read the real trace)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from scheduling.engine.shapes import PodShape
from scheduling.engine.state import ClusterState, build_state

NODE_COLUMNS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
POD_COLUMNS = [
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
]  # fmt: skip


def write_nodes(path: Path, rows: Sequence[tuple[str, int, int, int, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(NODE_COLUMNS)
        w.writerows(rows)
    return path


def write_pods(path: Path, rows: Sequence[tuple[int, int, int, int, str]]) -> Path:
    """Rows of (cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec); names and times are generated."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(POD_COLUMNS)
        for i, (cpu, mem, num, milli, spec) in enumerate(rows):
            w.writerow([f"pod-{i:04d}", cpu, mem, num, milli, spec, "LS", "Running", i * 10, i * 10 + 5, i * 10])
    return path


def cluster(gpus_per_node: Sequence[int], cpu: int = 32_000, mem: int = 262_144, model: str = "G2") -> ClusterState:
    n = len(gpus_per_node)
    return build_state([f"n{i}" for i in range(n)], [model] * n, list(gpus_per_node), [cpu] * n, [mem] * n)


def share(milli: int, cpu: int = 1000, mem: int = 1024) -> PodShape:
    return PodShape(cpu, mem, 1, milli)


def whole(k: int, cpu: int = 1000, mem: int = 1024) -> PodShape:
    return PodShape(cpu, mem, k, 1000)


def cpu_only(cpu: int, mem: int = 1024) -> PodShape:
    return PodShape(cpu, mem)
