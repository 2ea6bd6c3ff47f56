"""What the GPU stack publishes for a simulated node: its GPUs and MIG instances, labels as GPU Feature
Discovery sets them, capacity/allocatable as the kubelet and the device plugin report them.

Pure. Facts come from ``shared/design/GPU-ON-KUBERNETES.md`` ("facts doc"); the section is cited where a
value is used. The specs rendered here come from the cluster file (:mod:`~scheduling.simcluster.nodes`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from scheduling.engine import gpus
from scheduling.engine.gpus import GpuModel, Placement
from scheduling.simcluster.nodes import (
    DEFAULT_MIG_CONFIG,
    GPU_RESOURCE,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    MIG_STRATEGY,
    PLUGIN_CONFIG_LABEL,
    PRODUCT_LABEL,
    ClusterSpec,
    MigState,
    NodeSpec,
    PluginConfig,
    node_mig_layouts,
)

# Operands the MIG manager pauses during a change (facts doc 3.4 step 3).
MIG_PAUSED_OPERANDS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm", "client")
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
_OPERANDS = (
    "driver",
    "container-toolkit",
    "device-plugin",
    "gpu-feature-discovery",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
)


@dataclass(frozen=True)
class MigInstance:
    profile: str
    start: int
    gi_id: int
    uuid: str
    memory_mib: int
    ci_id: int = 0  # one full-size compute instance per GPU instance (facts doc 1.1)

    @property
    def resource(self) -> str:
        return gpus.resource_name(self.profile)


@dataclass(frozen=True)
class GpuDevice:
    index: int
    uuid: str
    model: str
    pci_bus_id: str
    mig: tuple[MigInstance, ...] | None  # None: MIG off
    replicas: int = 1
    healthy: bool = True

    @property
    def device(self) -> str:
        """dcgm-exporter ``device`` label: the ``/dev/nvidia<minor>`` name."""
        return f"nvidia{self.index}"


@dataclass(frozen=True)
class RenderedNode:
    name: str
    labels: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: tuple[dict[str, str], ...]
    devices: tuple[GpuDevice, ...]
    plugin: PluginConfig
    mig_config: str | None  # applied config; None on nodes without MIG-capable GPUs
    gpu_model: str | None
    seed: int = 0
    kubelet_version: str = "v1.34.2"

    def device(self, index: int) -> GpuDevice:
        return self.devices[index]


def stable_uuid(*parts: object) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:16]))


def gpu_uuid(seed: int, node: str, index: int) -> str:
    return "GPU-" + stable_uuid(seed, node, index)


# PCI buses of the eight SXM GPUs in an HGX H100 board; more GPUs get made-up buses.
_PCI_BUSES = (0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF)


def _pci_bus_id(index: int) -> str:
    bus = _PCI_BUSES[index] if index < len(_PCI_BUSES) else 0x20 + index
    return f"00000000:{bus:02X}:00.0"


# GPU-instance ids by (memory slices, start): one id per possible slot, so ids are stable and unique on a
# GPU. Real NVML hands ids out in creation order; the scheme here is deterministic instead.
_GI_SLOT_BASE = {8: 0, 4: 1, 2: 3, 1: 7}


def _gi_id(memory_slices: int, start: int) -> int:
    return _GI_SLOT_BASE[memory_slices] + start // memory_slices


def _devices(
    spec: NodeSpec,
    cluster: ClusterSpec,
    layouts: Sequence[list[Placement] | None],
    plugin: PluginConfig,
    lost: frozenset[int],
) -> tuple[GpuDevice, ...]:
    model = spec.model
    if model is None:
        return ()
    out = []
    for i in range(spec.gpu_count):
        u = gpu_uuid(cluster.seed, spec.name, i)
        layout = layouts[i] if i < len(layouts) else None
        mig = None
        if layout is not None:
            mig = tuple(
                MigInstance(
                    profile=name,
                    start=start,
                    gi_id=_gi_id(model.profile(name).memory_slices, start),
                    uuid="MIG-" + stable_uuid(u, name, start),
                    memory_mib=model.profile(name).memory_mib,
                )
                for name, start in sorted(layout, key=lambda p: p[1])
            )
        out.append(
            GpuDevice(
                index=i,
                uuid=u,
                model=model.key,
                pci_bus_id=_pci_bus_id(i),
                mig=mig,
                replicas=plugin.replicas if mig is None else 0,
                healthy=i not in lost,
            )
        )
    return tuple(out)


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPE]i?|k|m)?$")
_FACTORS = {
    None: 1,
    "m": 0.001,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_bytes(quantity: str | int) -> int:
    """A Kubernetes memory/storage quantity in bytes (``2Ti``, ``512G``, ``1073741824``)."""
    m = _QUANTITY.match(str(quantity).strip())
    if m is None:
        raise ValueError(f"not a quantity: {quantity!r}")
    return int(float(m.group(1)) * _FACTORS[m.group(2)])


def _tiered(total: float, tiers: Sequence[tuple[float, float]]) -> float:
    """Sum of ``rate * amount`` over consecutive ``(size, rate)`` tiers; the last tier is unbounded."""
    reserved, left = 0.0, total
    for size, rate in tiers:
        take = min(left, size)
        reserved += take * rate
        left -= take
        if left <= 0:
            break
    return reserved


_GI = 2**30


def _reserved_cpu_millis(cores: int) -> int:
    # GKE's kube-reserved formula: 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% above.
    return round(_tiered(cores * 1000, [(1000, 0.06), (1000, 0.01), (2000, 0.005), (float("inf"), 0.0025)]))


def _reserved_memory(total: int) -> int:
    # GKE's formula (25/20/10/6/2 % tiers) plus the kubelet's default 100Mi hard-eviction threshold.
    tiers = [(4 * _GI, 0.25), (4 * _GI, 0.20), (8 * _GI, 0.10), (112 * _GI, 0.06), (float("inf"), 0.02)]
    return int(_tiered(total, tiers)) + 100 * 2**20


def _base_resources(spec: NodeSpec) -> tuple[dict[str, str], dict[str, str]]:
    mem = parse_bytes(spec.memory)
    disk = parse_bytes(spec.ephemeral_storage)
    capacity = {
        "cpu": str(spec.cpu),
        "ephemeral-storage": f"{disk // 1024}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem // 1024}Ki",
        "pods": str(spec.max_pods),
    }
    # The kubelet prints allocatable ephemeral storage in bytes after the 10% nodefs eviction threshold.
    allocatable = {
        "cpu": f"{spec.cpu * 1000 - _reserved_cpu_millis(spec.cpu)}m",
        "ephemeral-storage": str(disk * 9 // 10),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{(mem - _reserved_memory(mem)) // 1024}Ki",
        "pods": str(spec.max_pods),
    }
    return capacity, allocatable


def _gpu_resources(devices: Sequence[GpuDevice], plugin: PluginConfig) -> tuple[dict[str, int], dict[str, int]]:
    """Extended resources (facts doc 1.1-1.3): capacity counts every device, allocatable healthy ones."""
    capacity: dict[str, int] = {}
    allocatable: dict[str, int] = {}

    def add(resource: str, n: int, healthy: bool) -> None:
        capacity[resource] = capacity.get(resource, 0) + n
        allocatable[resource] = allocatable.get(resource, 0) + (n if healthy else 0)

    for d in devices:
        if d.mig is None:
            add(shared_resource_name(GPU_RESOURCE, plugin, None), plugin.replicas, d.healthy)
            continue
        for inst in d.mig:
            add(
                shared_resource_name(inst.resource, plugin, inst.profile),
                plugin.replicas_for(inst.profile),
                d.healthy,
            )
    return capacity, allocatable


def shared_resource_name(resource: str, plugin: PluginConfig, profile: str | None) -> str:
    """``<name>.shared`` when the resource is shared and ``renameByDefault`` is set (facts doc 1.1)."""
    if plugin.rename_by_default and plugin.replicas_for(profile) > 1:
        return resource + ".shared"
    return resource


def _sharing(plugin: PluginConfig, replicas: int) -> str:
    return plugin.strategy if replicas > 1 else "none"


def _gfd_labels(
    model: GpuModel,
    devices: Sequence[GpuDevice],
    plugin: PluginConfig,
    cluster: ClusterSpec,
) -> dict[str, str]:
    """GPU Feature Discovery labels (facts doc 2)."""
    whole = [d for d in devices if d.mig is None]
    replicas = plugin.replicas if whole else 0  # 0 on MIG-enabled parents
    suffix = "-SHARED" if replicas > 1 and not plugin.rename_by_default else ""
    drv = cluster.driver_version.split(".")
    cuda = cluster.cuda_version.split(".")
    labels = {
        PRODUCT_LABEL: model.product + suffix,
        "nvidia.com/gpu.count": str(len(devices)),
        "nvidia.com/gpu.memory": str(model.memory_mib),
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": _sharing(plugin, replicas),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.compute.major": str(model.compute_major),
        "nvidia.com/gpu.compute.minor": str(model.compute_minor),
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/cuda.driver-version.major": drv[0],
        "nvidia.com/cuda.driver-version.minor": drv[1] if len(drv) > 1 else "0",
        "nvidia.com/cuda.driver-version.revision": drv[2] if len(drv) > 2 else "0",
        "nvidia.com/cuda.driver-version.full": cluster.driver_version,
        "nvidia.com/cuda.runtime-version.major": cuda[0],
        "nvidia.com/cuda.runtime-version.minor": cuda[1] if len(cuda) > 1 else "0",
        "nvidia.com/cuda.runtime-version.full": cluster.cuda_version,
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/mps.capable": str(plugin.strategy == "mps" and replicas > 1).lower(),
        "nvidia.com/vgpu.present": "false",
    }
    if model.mig_capable:
        labels["nvidia.com/mig.strategy"] = MIG_STRATEGY
    counts: dict[str, int] = {}
    for d in devices:
        for inst in d.mig or ():
            counts[inst.profile] = counts.get(inst.profile, 0) + 1
    for name in sorted(counts):
        p = model.profile(name)
        key = gpus.resource_name(name)  # labels are keyed like the resource (facts doc 2)
        r = plugin.replicas_for(name)
        shared = "-SHARED" if r > 1 and not plugin.rename_by_default else ""
        labels |= {
            f"{key}.count": str(counts[name]),
            f"{key}.product": f"{model.product}-MIG-{p.config_suffix}{shared}",
            f"{key}.memory": str(p.memory_mib),
            f"{key}.multiprocessors": str(p.multiprocessors),
            f"{key}.slices.gi": str(p.compute_slices),
            f"{key}.slices.ci": str(p.compute_slices),
            f"{key}.engines.copy": str(p.copy_engines),
            f"{key}.engines.decoder": str(p.decoders),
            f"{key}.engines.encoder": str(p.encoders),
            f"{key}.engines.jpeg": str(p.jpeg_engines),
            f"{key}.engines.ofa": str(p.ofa_engines),
            f"{key}.replicas": str(r),
            f"{key}.sharing-strategy": _sharing(plugin, r),
        }
    return labels


def render_node(
    spec: NodeSpec,
    cluster: ClusterSpec,
    *,
    mig_config: str | None,
    plugin_config: str | None,
    lost_gpus: frozenset[int] = frozenset(),
    mig_config_label: str | None = None,
    mig_config_state: MigState = "success",
    previous_resources: Iterable[str] = (),
) -> RenderedNode:
    """Labels, capacity/allocatable, taints and devices of a node as the GPU stack publishes them.

    ``mig_config`` is the layout actually applied (``None``: the operator default ``all-disabled``);
    ``mig_config_label`` the requested ``nvidia.com/mig.config`` value when it differs (a change in
    flight), with ``mig_config_state`` its ``mig.config.state`` (facts doc 3.4). ``plugin_config`` is the
    node's ``nvidia.com/device-plugin.config`` label value. ``lost_gpus`` are unhealthy GPU indices: they
    stay in capacity but leave allocatable (facts doc 9.4). ``previous_resources`` are extended resources
    the node advertised before; the kubelet keeps those that vanished at capacity 0.
    Raises :class:`MigError` if ``mig_config`` cannot apply (check :func:`mig_config_error` first).
    """
    model = spec.model
    plugin = cluster.plugin_config(plugin_config)
    layouts = node_mig_layouts(spec, cluster, mig_config)
    devices = _devices(spec, cluster, layouts, plugin, lost_gpus)
    labels = {
        "beta.kubernetes.io/arch": spec.arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": spec.arch,
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
    }
    if spec.instance_type:
        labels["node.kubernetes.io/instance-type"] = spec.instance_type
    capacity, allocatable = _base_resources(spec)
    applied: str | None = None
    if model is not None:
        labels["feature.node.kubernetes.io/pci-10de.present"] = "true"  # NFD, which the operator keys on
        labels["nvidia.com/gpu.present"] = "true"
        labels |= {f"nvidia.com/gpu.deploy.{op}": "true" for op in _OPERANDS}
        labels |= _gfd_labels(model, devices, plugin, cluster)
        if model.mig_capable:
            applied = mig_config or DEFAULT_MIG_CONFIG
            labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
            labels[MIG_CONFIG_LABEL] = mig_config_label or applied
            labels[MIG_STATE_LABEL] = mig_config_state
        if plugin_config is not None:
            labels[PLUGIN_CONFIG_LABEL] = plugin_config
        if spec.dra:
            # The operator's DRA install turns the device plugin off: GPUs are ResourceSlice devices instead.
            labels["nvidia.com/gpu.deploy.device-plugin"] = "false"
        else:
            gcap, galloc = _gpu_resources(devices, plugin)
            capacity |= {k: str(gcap[k]) for k in sorted(gcap)}
            allocatable |= {k: str(galloc[k]) for k in sorted(galloc)}
    for res in previous_resources:
        capacity.setdefault(res, "0")
        allocatable.setdefault(res, "0")
    labels |= dict(spec.labels)
    return RenderedNode(
        name=spec.name,
        labels=labels,
        capacity=capacity,
        allocatable=allocatable,
        taints=tuple(dict(t) for t in spec.taints),
        devices=devices,
        plugin=plugin,
        mig_config=applied,
        gpu_model=model.key if model else None,
        seed=cluster.seed,
        kubelet_version=cluster.kubelet_version,
    )


def extended_resources(rendered: RenderedNode) -> list[str]:
    """The ``nvidia.com/*`` resources in the node's capacity (feed back as ``previous_resources``)."""
    return sorted(k for k in rendered.capacity if k.startswith("nvidia.com/"))


def paused_operand_labels() -> dict[str, str]:
    """Labels the MIG manager sets while it reconfigures (facts doc 3.4 step 3)."""
    return {f"nvidia.com/gpu.deploy.{op}": PAUSED_FOR_MIG_CHANGE for op in MIG_PAUSED_OPERANDS}


def lose_gpu(rendered: RenderedNode, index: int) -> RenderedNode:
    """The node after GPU ``index`` turned unhealthy (Xid): its devices leave allocatable."""
    devices = tuple(replace(d, healthy=False) if d.index == index else d for d in rendered.devices)
    _, galloc = _gpu_resources(devices, rendered.plugin)
    allocatable = dict(rendered.allocatable)
    for k in allocatable:
        if k.startswith("nvidia.com/"):
            allocatable[k] = str(galloc.get(k, 0))
    return replace(rendered, devices=devices, allocatable=allocatable)
