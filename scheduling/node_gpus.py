"""What GPUs a Kubernetes node has, read once from the labels GPU Feature Discovery and the MIG manager
publish and the device plugin's allocatable resources (GPU-ON-KUBERNETES.md sections 1, 2 and 6).

The placement inventory, offering discovery, the operators' cluster page and the quota capacity per GPU
model all read nodes through :func:`read_node`. Pure: a node object (a dict, as the API returns it) in,
plain values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from scheduling.engine import gpus
from scheduling.engine.quota import to_units
from scheduling.kube import keys


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass(frozen=True)
class NodeGpus:
    name: str
    labels: Mapping[str, str]
    product: str  # the GFD product label as published; "" on nodes without GPUs
    model: str  # catalogue key (MIG "single" suffix removed); "" without GPUs or for a model not in the catalogue
    count: int  # GPUs on the node (GFD's count label), healthy or not
    replicas: int  # time-slicing or MPS replicas per GPU; 1 when not shared
    sharing_strategy: str  # GFD's none | time-slicing | mps ("" when not labelled)
    memory_mib: int  # per GPU, GFD's memory label; 0 when not labelled
    mig_config: str  # the MIG manager's layout label, "" when not set
    mig_state: str  # pending | rebooting | success | failed | ""
    devices: Mapping[str, int]  # device-plugin resources (nvidia.com/...) the node can hand out now
    ready: bool
    cordoned: bool

    @property
    def mig_enabled(self) -> bool:
        return self.mig_config not in ("", keys.MIG_DISABLED)

    @property
    def mps(self) -> bool:
        """The device plugin shares this node's GPUs through MPS (``sharing.mps``, GPU doc 1.3)."""
        return self.sharing_strategy == keys.SHARING_MPS and self.replicas > 1

    @property
    def has_mig_devices(self) -> bool:
        return any(name.startswith(keys.MIG_RESOURCE_PREFIX) and n > 0 for name, n in self.devices.items())

    @property
    def healthy_whole_gpus(self) -> int:
        """Whole GPUs the device plugin offers: unhealthy ones leave allocatable, not the count label."""
        return min(self.count, self.devices.get(keys.GPU_RESOURCE, 0))


def _model_of(product: str) -> str:
    base = product.split("-MIG-")[0]  # MIG strategy "single" appends the profile to the product
    try:
        return gpus.get_model(base).key if base else ""
    except gpus.UnknownGpuModel:
        return ""


def read_node(node: Mapping[str, Any]) -> NodeGpus:
    metadata = node.get("metadata") or {}
    labels = dict(metadata.get("labels") or {})
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    product = labels.get(keys.PRODUCT, "")
    return NodeGpus(
        name=metadata.get("name", ""),
        labels=labels,
        product=product,
        model=_model_of(product),
        count=_int(labels.get(keys.GPU_COUNT, "0") or 0),
        replicas=_int(labels.get(keys.REPLICAS, "1") or 1, 1) or 1,
        sharing_strategy=labels.get(keys.SHARING_STRATEGY, ""),
        memory_mib=_int(labels.get(keys.GPU_MEMORY, "0") or 0),
        mig_config=labels.get(keys.MIG_CONFIG, ""),
        mig_state=labels.get(keys.MIG_CONFIG_STATE, ""),
        devices={
            name: int(Decimal(parse_quantity(value)))
            for name, value in allocatable.items()
            if name.startswith(keys.DEVICE_PREFIX)
        },
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        cordoned=bool((node.get("spec") or {}).get("unschedulable")),
    )


def capacity_by_model(nodes: Iterable[NodeGpus]) -> dict[str, int]:
    """The quota capacity: GPU-equivalents (admission units) per GPU model on the nodes that are not
    cordoned, by GFD's count (the cluster's GPUs, whether in use, healthy or not)."""
    capacity: dict[str, int] = {}
    for node in nodes:
        if node.model and not node.cordoned:
            capacity[node.model] = capacity.get(node.model, 0) + to_units(float(node.count))
    return capacity
