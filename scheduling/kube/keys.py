"""Every key the portal reads or writes on Kubernetes objects, said once: the labels GPU Feature Discovery
and the MIG manager publish, the device plugin's resource names, the GPU taint, the portal's own labels and
annotations (and how to read its workspace label), and the ports its pods serve (facts:
``shared/design/GPU-ON-KUBERNETES.md``).

The simulated cluster (``scheduling/simcluster``) writes the same keys from its own tables: it plays the
cluster, so it does not import the portal's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# -- GPU Feature Discovery and the MIG manager (node labels) ------------------------------------------
PRODUCT = "nvidia.com/gpu.product"  # e.g. NVIDIA-H100-80GB-HBM3; MIG strategy "single" appends -MIG-<profile>
GPU_COUNT = "nvidia.com/gpu.count"
REPLICAS = "nvidia.com/gpu.replicas"  # time-slicing or MPS replicas per GPU (1: none)
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"  # none | time-slicing | mps
SHARING_MPS = "mps"
GPU_MEMORY = "nvidia.com/gpu.memory"  # MiB per GPU
MIG_CONFIG = "nvidia.com/mig.config"  # the layout asked of the MIG manager, e.g. all-1g.10gb
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"  # pending | rebooting | success | failed
MIG_DISABLED = "all-disabled"
HOSTNAME = "kubernetes.io/hostname"

# -- the device plugin (extended resources) -----------------------------------------------------------
DEVICE_PREFIX = "nvidia.com/"
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"  # time-sliced or MPS replicas with renameByDefault
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # + profile, MIG strategy "mixed"

# -- taints -------------------------------------------------------------------------------------------
GPU_TAINT_KEY = "nvidia.com/gpu"  # GPU nodes' NoSchedule taint; GPU pods tolerate it

# -- the portal's labels and annotations --------------------------------------------------------------
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpu-portal"  # the value of MANAGED_BY (and part-of) on everything the portal creates
WORKSPACE_ID = "gpuportal.io/workspace-id"
TEAM = "gpuportal.io/team"
OWNER = "gpuportal.io/owner"
# On a node while the portal changes its MIG layout (scheduling/loops/mig_repartition.py): the phase
# (draining | applying) and the layouts before and after.
MIG_REPARTITION = "gpuportal.io/mig-repartition"
MIG_REPARTITION_FROM = "gpuportal.io/mig-repartition-from"
MIG_REPARTITION_TO = "gpuportal.io/mig-repartition-to"
SIM_PROFILE_ANNOTATION = "sim.gpuportal.io/workload-profile"  # simulated cluster only
SIM_DURATION_ANNOTATION = "sim.gpuportal.io/duration-seconds"  # simulated cluster only
SIM_BUSY_ANNOTATION = "sim.gpuportal.io/busy-seconds"  # simulated cluster only
SIM_GPU_MEMORY_ANNOTATION = "sim.gpuportal.io/gpu-memory-mib"  # simulated cluster only

# -- ports --------------------------------------------------------------------------------------------
NOTEBOOK_PORT = 8888
MASTER_PORT = 29500  # torch.distributed rendezvous on worker 0


def workspace_id_of(obj: Mapping[str, Any]) -> int | None:
    """The workspace an object of the portal's belongs to, by its ``WORKSPACE_ID`` label; None for others."""
    value = (obj.get("metadata", {}).get("labels") or {}).get(WORKSPACE_ID, "")
    return int(value) if value.isascii() and value.isdigit() else None
