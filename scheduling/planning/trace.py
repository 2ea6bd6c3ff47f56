"""The Alibaba GPU-sharing trace (openb CSV format) and the benchmark's workload procedure.

Nodes: ``sn,cpu_milli,memory_mib,gpu,model``. Pods: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,
gpu_spec,...`` with ``gpu_spec`` a ``|``-separated list of allowed models (empty: any). The trace is
read from ``../shared/traces/...`` relative to the repository root and never copied into it.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduling.engine.shapes import MILLI, PodShape
from scheduling.engine.state import ClusterState, build_state

REPO_ROOT = Path(__file__).resolve().parents[2]
TRACE_DIR = REPO_ROOT.parent / "shared" / "traces" / "alibaba-gpu-v2023" / "csv"
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"


def variant_path(variant: str) -> Path:
    """``default`` -> ``../shared/traces/alibaba-gpu-v2023/csv/openb_pod_list_default.csv``."""
    return TRACE_DIR / f"openb_pod_list_{variant}.csv"


def available_variants() -> list[str]:
    prefix = "openb_pod_list_"
    return sorted(p.stem.removeprefix(prefix) for p in TRACE_DIR.glob(f"{prefix}*.csv"))


@dataclass(frozen=True)
class NodeRow:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class PodRow:
    name: str
    shape: PodShape
    created: int = 0
    deleted: int = 0  # seconds, like ``created``; 0 when the list does not say
    scheduled: int = 0

    @property
    def lifetime(self) -> int:
        """Seconds the pod ran once placed (at least one)."""
        return max(1, self.deleted - max(self.created, self.scheduled))


def read_nodes(path: Path) -> list[NodeRow]:
    with path.open(newline="") as f:
        return [
            NodeRow(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
            for r in csv.DictReader(f)
        ]


def parse_models(spec: str) -> frozenset[str] | None:
    models = frozenset(m.strip() for m in spec.split("|") if m.strip())
    return models or None


def read_pods(path: Path) -> list[PodRow]:
    with path.open(newline="") as f:
        return [
            PodRow(
                r["name"],
                PodShape(
                    cpu_milli=int(r["cpu_milli"]),
                    memory_mib=int(r["memory_mib"]),
                    num_gpu=int(r["num_gpu"]),
                    gpu_milli=int(r["gpu_milli"]) if int(r["num_gpu"]) else 0,
                    gpu_models=parse_models(r.get("gpu_spec") or ""),
                ),
                int(float(r.get("creation_time") or 0)),
                int(float(r.get("deletion_time") or 0)),
                int(float(r.get("scheduled_time") or 0)),
            )
            for r in csv.DictReader(f)
        ]


def state_from_nodes(nodes: Sequence[NodeRow]) -> ClusterState:
    return build_state(
        names=[n.name for n in nodes],
        models=[n.model for n in nodes],
        gpu_counts=[n.gpus for n in nodes],
        cpu_milli=[n.cpu_milli for n in nodes],
        memory_mib=[n.memory_mib for n in nodes],
    )


def workload(pods: Sequence[PodRow], total_gpus: int, seed: int, inflate: float = 1.3) -> list[PodShape]:
    """The arrival sequence of one benchmark run (PLACEMENT.md, procedure steps 1-3).

    Sort by name, shuffle with a generator seeded by ``seed``, then append copies of pods drawn
    uniformly with replacement until GPU demand reaches ``inflate`` times the cluster's GPUs.
    """
    rng = np.random.default_rng(seed)
    ordered = sorted(pods, key=lambda p: p.name)
    shapes = [ordered[i].shape for i in rng.permutation(len(ordered))]
    target = inflate * total_gpus * MILLI
    demand = sum(s.total_milli for s in shapes)
    if not any(s.total_milli for s in shapes):
        return shapes
    while demand < target:
        s = ordered[int(rng.integers(len(ordered)))].shape
        shapes.append(s)
        demand += s.total_milli
    return shapes
