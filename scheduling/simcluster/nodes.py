"""Simulated GPU nodes as the cluster file declares them: the file format, node and cluster specs, the
GPU-stack label and resource names, and the MIG layout each node's ``nvidia.com/mig.config`` applies.

What the GPU stack then publishes for a node (labels, capacity/allocatable, devices) is
:mod:`~scheduling.simcluster.node_render`; the ``v1.Node`` objects :mod:`~scheduling.simcluster.node_objects`;
device-plugin allocation :mod:`~scheduling.simcluster.device_plugin`.

Pure: no I/O except reading the cluster YAML. Facts come from ``shared/design/GPU-ON-KUBERNETES.md``
("facts doc"); the section is cited where a value is used.

Cluster file format (YAML; ``clusters/demo.yaml`` is the worked example)::

    seed: 7                       # makes GPU/MIG UUIDs, node UIDs and telemetry deterministic
    driverVersion: 570.172.08     # nvidia.com/cuda.driver-version.* and DCGM_FI_DRIVER_VERSION
    cudaVersion: "12.8"           # nvidia.com/cuda.runtime-version.*
    kubeletVersion: v1.34.2
    dcgmVirtualGpus: false        # dcgm-exporter --kubernetes-virtual-gpus: series for every pod on a shared GPU
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
        gpuDriver: dra            # optional: the NVIDIA DRA driver publishes this node's GPUs as ResourceSlice
                                  #   devices instead of the device plugin (default device-plugin; facts doc 4.3)
        labels: {team: ml}        # extra labels
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]

GPU nodes whose ``taints`` key is absent get ``nvidia.com/gpu=present:NoSchedule`` (facts doc 5: the key
is the common convention, the value varies; GKE's is ``present``). ``taints: []`` leaves a GPU node untainted.

The simulated device plugin runs MIG strategy ``mixed`` on every node (facts doc 1.2), so whole GPUs are
``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when renamed) and MIG instances ``nvidia.com/mig-<profile>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    dra: bool = False  # GPUs published by the DRA driver; the device plugin does not run here (facts doc 4.3)

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
    dcgm_virtual_gpus: bool = False

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


def _gpu_driver(value: Any) -> str:
    if value not in ("device-plugin", "dra"):
        raise ValueError(f"gpuDriver must be device-plugin or dra, not {value!r}")
    return str(value)


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
            dra=_gpu_driver(raw.get("gpuDriver", "device-plugin")) == "dra",
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
        dcgm_virtual_gpus=doc.get("dcgmVirtualGpus", False) is True,
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
