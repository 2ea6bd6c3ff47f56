"""The GPU Operator's MIG manager and the device plugin's live config switch, per node.

Setting `nvidia.com/mig.config` asks for a layout: an unknown or inapplicable name, or GPU pods still
running on the node, end in state `failed` with nothing else changed (mig-manager never evicts user
pods). Otherwise the state goes `pending`, the GPU operands pause (GPU allocatable drops to zero), and
after a short reconfiguration time the layout is applied and the state reads `success`.
`nvidia.com/device-plugin.config` switches time-slicing the same way; an unknown name is skipped, as
the plugin does, and a switch waits until no GPU pod runs there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduling.simcluster import nodes
from scheduling.simcluster.nodes import MIG_CONFIG_LABEL, PLUGIN_CONFIG_LABEL, ClusterSpec, MigState, NodeSpec


@dataclass
class GpuConfig:
    """What is applied on a node's GPUs, what its labels ask for, and any change in flight."""

    applied_mig: str | None
    applied_plugin: str | None
    requested_mig: str | None
    requested_plugin: str | None
    state: MigState = "success"
    mig_due: datetime | None = None  # a pending layout change lands at this time
    plugin_due: datetime | None = None

    @property
    def paused(self) -> bool:
        """Operands are down while a layout is being applied: the node offers no GPUs."""
        return self.mig_due is not None


def initial(spec: NodeSpec) -> GpuConfig:
    mig = spec.mig_config if spec.model is not None and spec.model.mig_capable else None
    if spec.model is not None and spec.model.mig_capable and mig is None:
        mig = nodes.DEFAULT_MIG_CONFIG
    return GpuConfig(mig, spec.plugin_config, mig, spec.plugin_config)


def observe(
    config: GpuConfig,
    spec: NodeSpec,
    cluster: ClusterSpec,
    labels: dict[str, str],
    *,
    gpu_pods: bool,
    now: datetime,
    delay: timedelta,
) -> bool:
    """React to the node's labels; True when the node's published state must be re-rendered."""
    changed = False
    wanted_mig = labels.get(MIG_CONFIG_LABEL)
    if spec.model is not None and spec.model.mig_capable and wanted_mig and wanted_mig != config.requested_mig:
        config.requested_mig = wanted_mig
        config.mig_due = None
        if wanted_mig == config.applied_mig:
            config.state = "success"
        elif nodes.mig_config_error(spec, cluster, wanted_mig) is not None or gpu_pods:
            config.state = "failed"
        else:
            config.state = "pending"
            config.mig_due = now + delay
        changed = True
    wanted_plugin = labels.get(PLUGIN_CONFIG_LABEL)
    if wanted_plugin != config.requested_plugin:
        config.requested_plugin = wanted_plugin
        known = wanted_plugin is None or wanted_plugin in cluster.plugin_configs
        config.plugin_due = now + delay if known and wanted_plugin != config.applied_plugin else None
        changed = True
    return changed


def due(config: GpuConfig) -> datetime | None:
    """When the next pending change lands, if any."""
    times = [t for t in (config.mig_due, config.plugin_due) if t is not None]
    return min(times) if times else None


def apply_due(config: GpuConfig, now: datetime, *, gpu_pods: bool) -> bool:
    """Land the changes whose time has come; True if anything changed."""
    changed = False
    if config.mig_due is not None and now >= config.mig_due:
        config.applied_mig = config.requested_mig
        config.state = "success"
        config.mig_due = None
        changed = True
    if config.plugin_due is not None and now >= config.plugin_due and not gpu_pods:
        config.applied_plugin = config.requested_plugin
        config.plugin_due = None
        changed = True
    return changed
