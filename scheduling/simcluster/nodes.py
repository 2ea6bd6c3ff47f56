"""Simulated GPU nodes: the cluster file, node labels/allocatable as GFD and the device plugin publish
them, full ``v1.Node`` objects, and device-plugin allocation.

Pure: no I/O except reading the cluster YAML. Facts come from ``shared/design/GPU-ON-KUBERNETES.md``
("facts doc"); the section is cited where a value is used.

Cluster file format (YAML; ``clusters/demo.yaml`` is the worked example)::

    seed: 7                       # makes GPU/MIG UUIDs, node UIDs and telemetry deterministic
    driverVersion: 570.172.08     # nvidia.com/cuda.driver-version.* and DCGM_FI_DRIVER_VERSION
    cudaVersion: "12.8"           # nvidia.com/cuda.runtime-version.*
    kubeletVersion: v1.34.2
    devicePlugin:                 # the device-plugin ConfigMap (facts doc 1.3/1.4)
      default: default            # config used when a node has no nvidia.com/device-plugin.config label
      configs:
        default: {version: v1, flags: {migStrategy: mixed}}
        ts-4:                     # the device plugin's own file shape ...
          version: v1
          sharing:
            timeSlicing:
              renameByDefault: false
              failRequestsGreaterThanOne: true
              resources: [{name: nvidia.com/gpu, replicas: 4}]
        ts-2-short: {replicas: 2} # ... or a short form: replicas, renameByDefault,
                                  #     failRequestsGreaterThanOne, strategy (time-slicing|mps)
    migConfigs:                   # extra configs in mig-parted ``mig-configs`` shape (facts doc 3.3);
      half-half:                  # the operator's named ones (all-disabled, all-balanced, ...) are built in
        - devices: [0, 1, 2, 3]
          mig-enabled: false
        - devices: [4, 5, 6, 7]
          mig-enabled: true
          mig-devices: {"3g.40gb": 2}
    nodes:
      - name: gpu-a100-0
        cpu: 256                  # cores
        memory: 2Ti               # Kubernetes quantity
        ephemeralStorage: 3500Gi  # optional, default 1800Gi
        maxPods: 110              # optional
        arch: amd64               # optional (GH200 nodes are arm64)
        instanceType: dgx-a100    # optional -> node.kubernetes.io/instance-type
        gpu: {model: A100-SXM4-80GB, count: 8}   # model: a key of scheduling.engine.gpus.MODELS
        migConfig: all-balanced   # initial nvidia.com/mig.config (MIG-capable parts; default all-disabled)
        pluginConfig: ts-4        # initial nvidia.com/device-plugin.config (optional)
        labels: {team: ml}        # extra labels
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]

GPU nodes whose ``taints`` key is absent get ``nvidia.com/gpu=present:NoSchedule`` (facts doc 5: the key
is the common convention, the value varies; GKE's is ``present``). ``taints: []`` leaves a GPU node untainted.

The simulated device plugin runs MIG strategy ``mixed`` on every node (facts doc 1.2), so whole GPUs are
``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when renamed) and MIG instances ``nvidia.com/mig-<profile>``.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from scheduling.engine import gpus
from scheduling.engine.gpus import GpuModel, MigError, Placement

# --- label and resource names (facts doc 1, 2, 3.4, 5) -----------------------------------------------

GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
MIG_STRATEGY = "mixed"
DEFAULT_MIG_CONFIG = "all-disabled"  # GPU Operator chart default migManager.config.default (facts doc 3.4)

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

MigState = Literal["success", "pending", "rebooting", "failed"]


class ClusterFileError(ValueError):
    """The cluster YAML is malformed; the message names the offending entry."""


# --- specs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PluginConfig:
    """One key of the device-plugin ConfigMap, reduced to what changes allocatable (facts doc 1.3).

    ``replicas`` applies to ``nvidia.com/gpu``; ``mig_replicas`` maps a MIG profile to its replicas.
    """

    replicas: int = 1
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    strategy: Literal["time-slicing", "mps"] = "time-slicing"
    mig_replicas: Mapping[str, int] = field(default_factory=dict)

    def replicas_for(self, profile: str | None) -> int:
        return self.replicas if profile is None else self.mig_replicas.get(profile, 1)


UNSHARED = PluginConfig()


@dataclass(frozen=True)
class MigConfigEntry:
    """One item of a mig-parted config list (facts doc 3.3). ``devices=None`` means ``all``."""

    devices: tuple[int, ...] | None
    mig_enabled: bool
    mig_devices: Mapping[str, int] = field(default_factory=dict)
    device_filter: tuple[str, ...] | None = None

    def applies_to(self, model: GpuModel, index: int) -> bool:
        if self.device_filter is not None and model.pci_filter_id.lower() not in self.device_filter:
            return False
        return self.devices is None or index in self.devices


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: int
    memory: str
    max_pods: int = 110
    gpu_model: str | None = None
    gpu_count: int = 0
    mig_config: str | None = None
    plugin_config: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    arch: str = "amd64"
    instance_type: str | None = None
    ephemeral_storage: str = "1800Gi"

    @property
    def model(self) -> GpuModel | None:
        return gpus.get_model(self.gpu_model) if self.gpu_model and self.gpu_count else None


@dataclass(frozen=True)
class ClusterSpec:
    nodes: tuple[NodeSpec, ...]
    plugin_configs: Mapping[str, PluginConfig] = field(default_factory=dict)
    mig_configs: Mapping[str, tuple[MigConfigEntry, ...]] = field(default_factory=dict)
    seed: int = 0
    default_plugin_config: str | None = None
    driver_version: str = "570.172.08"
    cuda_version: str = "12.8"
    kubelet_version: str = "v1.34.2"

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def plugin_config(self, name: str | None) -> PluginConfig:
        """Config for a node's ``device-plugin.config`` label value (facts doc 1.4).

        No label, or an unknown value (which the plugin skips), falls back to the default: the configured
        default, else a key named ``default``, else the only key, else no sharing.
        """
        if name is not None and name in self.plugin_configs:
            return self.plugin_configs[name]
        default = self.default_plugin_config
        if default is None and "default" in self.plugin_configs:
            default = "default"
        if default is None and len(self.plugin_configs) == 1:
            default = next(iter(self.plugin_configs))
        return self.plugin_configs.get(default or "", UNSHARED)


# --- cluster file -----------------------------------------------------------------------------------


def default_cluster_file() -> Path:
    return Path(__file__).with_name("clusters") / "demo.yaml"


def _plugin_config(name: str, raw: Any) -> PluginConfig:
    if not isinstance(raw, Mapping):
        raise ClusterFileError(f"devicePlugin config {name!r} must be a mapping")
    if "sharing" not in raw and "version" not in raw and "flags" not in raw:
        short = raw.get("strategy", "time-slicing")
        if short not in ("time-slicing", "mps"):
            raise ClusterFileError(f"devicePlugin config {name!r}: strategy must be time-slicing or mps")
        return PluginConfig(
            replicas=int(raw.get("replicas", 1)),
            rename_by_default=bool(raw.get("renameByDefault", False)),
            fail_requests_greater_than_one=bool(raw.get("failRequestsGreaterThanOne", short == "mps")),
            strategy=short,
        )
    sharing = raw.get("sharing") or {}
    if "timeSlicing" in sharing and "mps" in sharing:
        raise ClusterFileError(f"devicePlugin config {name!r}: timeSlicing and mps are mutually exclusive")
    strategy: Literal["time-slicing", "mps"] = "mps" if "mps" in sharing else "time-slicing"
    block = sharing.get("mps" if strategy == "mps" else "timeSlicing") or {}
    replicas, mig_replicas = 1, {}
    for res in block.get("resources") or []:
        rname, n = str(res["name"]), int(res["replicas"])
        if rname == GPU_RESOURCE:
            replicas = n
        elif rname.startswith("nvidia.com/mig-"):
            mig_replicas[rname.removeprefix("nvidia.com/mig-")] = n
        else:
            raise ClusterFileError(f"devicePlugin config {name!r}: unknown resource {rname!r}")
    if strategy == "mps" and mig_replicas:
        raise ClusterFileError(f"devicePlugin config {name!r}: MPS supports full GPUs only (facts doc 1.3)")
    return PluginConfig(
        replicas=replicas,
        rename_by_default=bool(block.get("renameByDefault", False)),
        # failRequestsGreaterThanOne defaults to false for time-slicing, true for MPS (facts doc 1.3).
        fail_requests_greater_than_one=bool(block.get("failRequestsGreaterThanOne", strategy == "mps")),
        strategy=strategy,
        mig_replicas=_mig_profile_keys(mig_replicas),
    )


def _mig_profile_keys(by_resource_suffix: dict[str, int]) -> dict[str, int]:
    # Resource names write "+" as "." (facts doc 1.1); keys here are profile names, so map back.
    return {(k[: -len(".me")] + "+me" if k.endswith(".me") else k): v for k, v in by_resource_suffix.items()}


def _mig_entries(name: str, raw: Any) -> tuple[MigConfigEntry, ...]:
    if not isinstance(raw, list):
        raise ClusterFileError(f"mig config {name!r} must be a list of entries")
    out = []
    for e in raw:
        if "devices" not in e or "mig-enabled" not in e:
            raise ClusterFileError(f"mig config {name!r}: devices and mig-enabled are required (facts doc 3.3)")
        devices = None if e["devices"] == "all" else tuple(int(d) for d in e["devices"])
        flt = e.get("device-filter")
        if isinstance(flt, str):
            flt = [flt]
        out.append(
            MigConfigEntry(
                devices=devices,
                mig_enabled=bool(e["mig-enabled"]),
                mig_devices={str(k): int(v) for k, v in (e.get("mig-devices") or {}).items()},
                device_filter=None if flt is None else tuple(str(f).lower() for f in flt),
            )
        )
    return tuple(out)


def _node_spec(raw: Any) -> NodeSpec:
    try:
        gpu = raw.get("gpu") or {}
        model = gpu.get("model")
        count = int(gpu.get("count", 0)) if model else 0
        if model:
            gpus.get_model(model)
        taints = raw.get("taints")
        if taints is None:
            taints = [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}] if count else []
        return NodeSpec(
            name=str(raw["name"]),
            cpu=int(raw["cpu"]),
            memory=str(raw["memory"]),
            max_pods=int(raw.get("maxPods", 110)),
            gpu_model=gpus.get_model(model).key if model else None,
            gpu_count=count,
            mig_config=raw.get("migConfig"),
            plugin_config=raw.get("pluginConfig"),
            labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
            taints=tuple({str(k): str(v) for k, v in t.items()} for t in taints),
            arch=str(raw.get("arch", "amd64")),
            instance_type=raw.get("instanceType"),
            ephemeral_storage=str(raw.get("ephemeralStorage", "1800Gi")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ClusterFileError(f"bad node entry {raw!r}: {exc!r}") from exc


def parse_cluster(doc: Mapping[str, Any]) -> ClusterSpec:
    """Build a :class:`ClusterSpec` from the parsed YAML document (format in the module docstring)."""
    dp = doc.get("devicePlugin") or {}
    plugin_configs = {str(k): _plugin_config(str(k), v) for k, v in (dp.get("configs") or {}).items()}
    mig_configs = {str(k): _mig_entries(str(k), v) for k, v in (doc.get("migConfigs") or {}).items()}
    nodes = tuple(_node_spec(n) for n in doc.get("nodes") or [])
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ClusterFileError("node names must be unique")
    cluster = ClusterSpec(
        nodes=nodes,
        plugin_configs=plugin_configs,
        mig_configs=mig_configs,
        seed=int(doc.get("seed", 0)),
        default_plugin_config=dp.get("default"),
        driver_version=str(doc.get("driverVersion", "570.172.08")),
        cuda_version=str(doc.get("cudaVersion", "12.8")),
        kubelet_version=str(doc.get("kubeletVersion", "v1.34.2")),
    )
    for n in nodes:
        if n.mig_config is not None and (err := mig_config_error(n, cluster, n.mig_config)):
            raise ClusterFileError(f"node {n.name}: {err}")
        # A live label may name an unknown config (the plugin skips it); in the file it is a typo.
        if n.plugin_config is not None and n.plugin_config not in plugin_configs:
            raise ClusterFileError(f"node {n.name}: unknown devicePlugin config {n.plugin_config!r}")
    return cluster


def load_cluster_file(path: str | Path) -> ClusterSpec:
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, Mapping):
        raise ClusterFileError(f"{path}: expected a mapping at the top level")
    return parse_cluster(doc)


# --- MIG layouts per node ---------------------------------------------------------------------------


def node_mig_layouts(spec: NodeSpec, cluster: ClusterSpec, name: str | None) -> tuple[list[Placement] | None, ...]:
    """Per-GPU layouts (``None`` = MIG off) that mig-parted would apply for config ``name``.

    ``None`` as the name means the operator default ``all-disabled``. A custom config (cluster file
    ``migConfigs``) wins over a named one of the same name; GPUs no entry matches stay MIG-off.
    Raises :class:`MigError` when the config cannot apply to this node.
    """
    model = spec.model
    if model is None:
        if name not in (None, DEFAULT_MIG_CONFIG):
            raise gpus.MigNotSupported(f"node {spec.name} has no GPUs")
        return ()
    name = name or DEFAULT_MIG_CONFIG
    if name in cluster.mig_configs:
        layouts: list[list[Placement] | None] = []
        for i in range(spec.gpu_count):
            entry = next((e for e in cluster.mig_configs[name] if e.applies_to(model, i)), None)
            if entry is None or not entry.mig_enabled:
                layouts.append(None)
            else:
                layouts.append(gpus.pack_layout(model, entry.mig_devices))
        return tuple(layouts)
    layout = gpus.named_layout(model, name)
    return tuple(None if layout is None else list(layout) for _ in range(spec.gpu_count))


def mig_config_error(spec: NodeSpec, cluster: ClusterSpec, name: str) -> str | None:
    """Why mig-parted would fail to apply ``name`` on this node, or ``None`` if it applies."""
    try:
        node_mig_layouts(spec, cluster, name)
    except MigError as exc:
        return str(exc)
    return None


# --- rendering ----------------------------------------------------------------------------------------


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
class DeviceRef:
    """What the device plugin hands a container: a whole GPU, a MIG instance, or a replica of either."""

    gpu_index: int
    gi_id: int | None = None
    replica: int | None = None


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


def _uuid(*parts: object) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:16]))


def gpu_uuid(seed: int, node: str, index: int) -> str:
    return "GPU-" + _uuid(seed, node, index)


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
                    uuid="MIG-" + _uuid(u, name, start),
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


# --- v1.Node ------------------------------------------------------------------------------------------


def _ip(cluster_seed: int, name: str) -> str:
    h = hashlib.sha256(f"{cluster_seed}/{name}".encode()).digest()
    return f"10.0.{h[0]}.{h[1] % 250 + 2}"  # never contacted; only has to look like a node address


def _condition(kind: str, status: str, reason: str, message: str, heartbeat: str, since: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def build_node_object(
    spec: NodeSpec,
    rendered: RenderedNode,
    *,
    created: str,
    ready: bool = True,
    unschedulable: bool = False,
    heartbeat: str | None = None,
    ready_since: str | None = None,
) -> dict[str, Any]:
    """A full ``v1.Node`` as the API server serves it (valid against the 1.34 strict schema).

    ``heartbeat``/``ready_since`` default to ``created``. Cordoning adds the
    ``node.kubernetes.io/unschedulable`` taint and NotReady the ``node.kubernetes.io/not-ready`` taints,
    as the node lifecycle controller does. ``metadata.resourceVersion`` is the store's to set.
    """
    beat = heartbeat or created
    since = ready_since or created
    seed = rendered.seed
    taints: list[dict[str, str]] = [dict(t) for t in rendered.taints]
    if unschedulable:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": beat})
    if not ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": since})
    node_spec: dict[str, Any] = {
        "podCIDR": f"10.244.{int(_ip(seed, spec.name).split('.')[2])}.0/24",
    }
    node_spec["podCIDRs"] = [node_spec["podCIDR"]]
    if taints:
        node_spec["taints"] = taints
    if unschedulable:
        node_spec["unschedulable"] = True
    ready_cond = (
        _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", beat, since)
        if ready
        else _condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s",
            beat,
            since,
        )
    )
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [_condition(k, "False", r, m, beat, created) for k, r, m in pressure] + [ready_cond]
    machine = _uuid(seed, spec.name, "machine").replace("-", "")
    handlers = ["", "runc"] + (["nvidia", "nvidia-cdi", "nvidia-legacy"] if spec.model else [])
    gpu_kernel = "6.8.0-1028-nvidia" if spec.model else "6.8.0-1028-generic"
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": spec.name,
            "uid": _uuid(seed, spec.name, "uid"),
            "creationTimestamp": created,
            "labels": dict(rendered.labels),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": node_spec,
        "status": {
            "capacity": dict(rendered.capacity),
            "allocatable": dict(rendered.allocatable),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": _ip(seed, spec.name)},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": _uuid(seed, spec.name, "system"),
                "bootID": _uuid(seed, spec.name, "boot", created),
                "kernelVersion": gpu_kernel,
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": rendered.kubelet_version,
                # Deprecated; kubelets since 1.31 leave it empty (DisableNodeKubeProxyVersion).
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": spec.arch,
            },
            "runtimeHandlers": [
                {"name": h, "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}} for h in handlers
            ],
            "features": {"supplementalGroupsPolicy": True},
        },
    }


def build_cluster_nodes(cluster: ClusterSpec, *, created: str) -> list[dict[str, Any]]:
    """Every node of the cluster in its initial state (the file's migConfig/pluginConfig)."""
    out = []
    for spec in cluster.nodes:
        r = render_node(spec, cluster, mig_config=spec.mig_config, plugin_config=spec.plugin_config)
        out.append(build_node_object(spec, r, created=created))
    return out


# --- device plugin allocation ---------------------------------------------------------------------------


def is_gpu_resource(resource: str) -> bool:
    return resource in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or resource.startswith("nvidia.com/mig-")


def admission_error(rendered: RenderedNode, limits: Mapping[str, int]) -> str | None:
    """The kubelet admission failure for a shared-resource request > 1 (facts doc 1.3), else ``None``."""
    if not rendered.plugin.fail_requests_greater_than_one:
        return None
    for res, n in limits.items():
        if n > 1 and is_gpu_resource(res) and _replicas_of(rendered, res) > 1:
            return f"maximum request size for shared resources is 1, requested {n} of {res}"
    return None


def _replicas_of(rendered: RenderedNode, resource: str) -> int:
    base = resource.removesuffix(".shared")
    if base == GPU_RESOURCE:
        return rendered.plugin.replicas
    model = gpus.get_model(rendered.gpu_model) if rendered.gpu_model else None
    p = gpus.profile_for_resource(model, base) if model else None
    return rendered.plugin.replicas_for(p.name) if p else 1


def _slots(rendered: RenderedNode, resource: str) -> list[tuple[DeviceRef, int]]:
    """Every healthy allocatable unit of ``resource`` as (ref, parent GPU index)."""
    plugin = rendered.plugin
    out: list[tuple[DeviceRef, int]] = []
    for d in rendered.devices:
        if not d.healthy:
            continue
        if d.mig is None:
            if shared_resource_name(GPU_RESOURCE, plugin, None) != resource:
                continue
            r = plugin.replicas
            out += [(DeviceRef(d.index, None, k if r > 1 else None), d.index) for k in range(r)]
            continue
        for inst in d.mig:
            if shared_resource_name(inst.resource, plugin, inst.profile) != resource:
                continue
            r = plugin.replicas_for(inst.profile)
            out += [(DeviceRef(d.index, inst.gi_id, k if r > 1 else None), d.index) for k in range(r)]
    return out


def allocate(
    rendered: RenderedNode, limits: Mapping[str, int], in_use: set[DeviceRef] | frozenset[DeviceRef]
) -> list[DeviceRef] | None:
    """Pick devices for a container's GPU limits, or ``None`` if the node cannot supply them.

    Whole GPUs and MIG instances: lowest free index (then lowest memory-slice start). Shared replicas:
    spread ("distributed", facts doc 1.3): each replica goes to the device with the fewest replicas in
    use, ties to the lowest index, so pods land on separate GPUs while any is untouched.
    Non-GPU resources in ``limits`` are ignored.
    """
    taken = set(in_use)
    chosen: list[DeviceRef] = []
    for res in sorted(limits):
        n = limits[res]
        if n <= 0 or not is_gpu_resource(res):
            continue
        slots = [(ref, gpu) for ref, gpu in _slots(rendered, res) if ref not in taken]
        for _ in range(n):
            if not slots:
                return None
            if any(ref.replica is not None for ref, _ in slots):
                load: dict[tuple[int, int | None], int] = {}
                for t in taken:
                    load[(t.gpu_index, t.gi_id)] = load.get((t.gpu_index, t.gi_id), 0) + 1
                ref, _ = min(slots, key=lambda s: (load.get((s[0].gpu_index, s[0].gi_id), 0), s[1], s[0].gi_id or 0))
            else:
                ref = slots[0][0]
            slots = [s for s in slots if s[0] != ref]
            taken.add(ref)
            chosen.append(ref)
    return chosen


def device_id(rendered: RenderedNode, ref: DeviceRef) -> str:
    """The device ID the kubelet sees: the UUID, ``<UUID>::<n>`` for a replica (facts doc 1.3)."""
    d = rendered.devices[ref.gpu_index]
    u = d.uuid
    if ref.gi_id is not None:
        u = next(i.uuid for i in d.mig or () if i.gi_id == ref.gi_id)
    return u if ref.replica is None else f"{u}::{ref.replica}"


def visible_devices(rendered: RenderedNode, refs: Iterable[DeviceRef]) -> str:
    """``NVIDIA_VISIBLE_DEVICES`` for the allocated devices: GPU/MIG UUIDs, comma-separated (facts doc 5)."""
    seen: list[str] = []
    for ref in refs:
        u = device_id(rendered, ref).split("::")[0]
        if u not in seen:
            seen.append(u)
    return ",".join(seen) if seen else "void"


def mig_instance(rendered: RenderedNode, ref: DeviceRef) -> MigInstance | None:
    if ref.gi_id is None:
        return None
    return next(i for i in rendered.devices[ref.gpu_index].mig or () if i.gi_id == ref.gi_id)
