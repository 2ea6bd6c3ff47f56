"""What the cluster has free, from its node and pod objects, for admission decisions.

A first, plain-Python version: per node, allocatable minus the requests of pods that hold resources.
The placement engine (``scheduling/engine``) takes over choosing nodes in the placement issue; this
module stays the bridge from Kubernetes objects to free capacity.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

GPU_TAINT_KEY = "nvidia.com/gpu"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class NodeFree:
    name: str
    labels: dict[str, str]
    free: dict[str, Decimal]
    gpu_tainted: bool


@dataclass(frozen=True)
class Demand:
    """What one pod of a workspace needs; ``pods`` of them must fit (one per worker)."""

    resource_name: str  # extended resource, or "" for CPU-only pods
    count: int
    cpu_millis: int
    memory_mib: int
    node_selector: Mapping[str, str]
    pods: int = 1


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        # Extended resources live in limits; requests default to limits when absent.
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in merged.items():
            totals[name] = totals.get(name, Decimal(0)) + Decimal(parse_quantity(quantity))
    return totals


def _other_taints(node: Mapping[str, Any]) -> tuple[bool, bool]:
    """(has the GPU taint, has any other NoSchedule/NoExecute taint our pods do not tolerate)."""
    gpu, other = False, False
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") == GPU_TAINT_KEY:
            gpu = True
        else:
            other = True
    return gpu, other


@dataclass
class Capacity:
    nodes: list[NodeFree]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_objects(cls, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> Capacity:
        used: dict[str, dict[str, Decimal]] = {}
        for pod in pods:
            node_name = pod.get("spec", {}).get("nodeName")
            if not node_name or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
                continue
            bucket = used.setdefault(node_name, {})
            for name, amount in _pod_requests(pod).items():
                bucket[name] = bucket.get(name, Decimal(0)) + amount
        result = []
        for node in nodes:
            gpu_tainted, other_taint = _other_taints(node)
            if node.get("spec", {}).get("unschedulable") or other_taint or not _ready(node):
                continue
            name = node["metadata"]["name"]
            allocatable = {k: Decimal(parse_quantity(v)) for k, v in (node["status"].get("allocatable") or {}).items()}
            taken = used.get(name, {})
            free = {k: v - taken.get(k, Decimal(0)) for k, v in allocatable.items()}
            result.append(NodeFree(name, dict(node["metadata"].get("labels") or {}), free, gpu_tainted))
        return cls(result)

    def _fits(self, node: NodeFree, demand: Demand) -> bool:
        if any(node.labels.get(k) != v for k, v in demand.node_selector.items()):
            return False
        if node.gpu_tainted and not demand.resource_name:
            return False  # CPU-only pods do not tolerate the GPU taint
        if demand.resource_name and node.free.get(demand.resource_name, Decimal(0)) < demand.count:
            return False
        return (
            node.free.get("cpu", Decimal(0)) * 1000 >= demand.cpu_millis
            and node.free.get("memory", Decimal(0)) >= demand.memory_mib * 1024 * 1024
        )

    def _reserve(self, node: NodeFree, demand: Demand, sign: int = 1) -> None:
        """Take one pod's worth of ``demand`` from ``node`` (``sign=-1`` gives it back)."""
        if demand.resource_name:
            node.free[demand.resource_name] = node.free.get(demand.resource_name, Decimal(0)) - sign * demand.count
        node.free["cpu"] = node.free.get("cpu", Decimal(0)) - sign * Decimal(demand.cpu_millis) / 1000
        node.free["memory"] = node.free.get("memory", Decimal(0)) - sign * demand.memory_mib * 1024 * 1024

    def place(self, demand: Demand) -> list[str] | None:
        """Reserve room for every pod of ``demand`` (all or nothing); returns the chosen nodes.

        Best fit on the requested resource: the node with the least left over, to keep whole nodes free
        for large requests.
        """
        with self._lock:
            chosen: list[NodeFree] = []
            for _ in range(demand.pods):
                candidates = [n for n in self.nodes if self._fits(n, demand)]
                if not candidates:
                    for node in chosen:  # roll back the pods already placed
                        self._reserve(node, demand, sign=-1)
                    return None
                key = demand.resource_name or "cpu"
                best = min(candidates, key=lambda n: (n.free.get(key, Decimal(0)), n.name))
                self._reserve(best, demand)
                chosen.append(best)
            return [node.name for node in chosen]

    def place_would_fail(self, demand: Demand) -> bool:
        """True when no node could take a pod of ``demand`` right now (nothing is reserved)."""
        with self._lock:
            return not any(self._fits(node, demand) for node in self.nodes)

    def explain(self, demand: Demand) -> str:
        """Why ``demand`` fits nowhere, counted per reason like kube-scheduler's message."""
        reasons: dict[str, int] = {}
        for node in self.nodes:
            if any(node.labels.get(k) != v for k, v in demand.node_selector.items()):
                reason = "node(s) didn't match the offering's node selector"
            elif node.gpu_tainted and not demand.resource_name:
                reason = "node(s) are GPU nodes"
            elif demand.resource_name and node.free.get(demand.resource_name, Decimal(0)) < demand.count:
                reason = f"Insufficient {demand.resource_name}"
            else:
                reason = "Insufficient cpu or memory"
            reasons[reason] = reasons.get(reason, 0) + 1
        parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return f"0/{len(self.nodes)} nodes are available: {parts}."
