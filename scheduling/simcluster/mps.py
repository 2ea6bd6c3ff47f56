"""MPS shares on the simulated GPUs (device plugin ``sharing.mps``, facts doc 1.3).

Each replica of an MPS-shared GPU is an MPS client that the control daemon caps at 1/replicas of the GPU's
memory and compute. A workload says how much GPU memory it allocates with the annotation
``sim.gpuportal.io/gpu-memory-mib`` (the portal sets it from ``GPUPORTAL_SIM_GPU_MEMORY_MIB``, as it does the
other ``sim.gpuportal.io/*`` workload annotations); one that asks for more than its client's limit fails as
CUDA does, with an out-of-memory error, as soon as it allocates (when its container starts).

Pure: rendered node and allocation in, numbers and text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduling.engine import gpus
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.node_render import RenderedNode

GPU_MEMORY_ANNOTATION = "sim.gpuportal.io/gpu-memory-mib"
OOM_EXIT_CODE = 1  # the Python process ends on an uncaught torch.OutOfMemoryError


def client_memory_limit_mib(rendered: RenderedNode, devices: Iterable[DeviceRef]) -> int | None:
    """The pinned device memory limit of a container's MPS client: its GPU's memory / replicas, as the
    device plugin's MPS daemon sets it; None when the container holds no MPS replica."""
    plugin = rendered.plugin
    if plugin.strategy != "mps" or plugin.replicas <= 1:
        return None
    for ref in devices:
        if ref.replica is not None and ref.gi_id is None:  # MPS shares full GPUs only
            return gpus.get_model(rendered.devices[ref.gpu_index].model).memory_mib // plugin.replicas
    return None


def gpu_memory_asked_mib(annotations: Mapping[str, str] | None) -> int | None:
    """The GPU memory the workload allocates, from its annotation; None when absent or not a whole number."""
    value = str((annotations or {}).get(GPU_MEMORY_ANNOTATION, ""))
    return int(value) if value.isascii() and value.isdigit() else None


def out_of_memory(limit_mib: int | None, annotations: Mapping[str, str] | None) -> str | None:
    """The error the workload dies of when it asks for more than its MPS client's limit, else None."""
    asked = gpu_memory_asked_mib(annotations)
    if limit_mib is None or asked is None or asked <= limit_mib:
        return None
    return f"CUDA out of memory: MPS client pinned device memory limit {limit_mib} MiB exceeded (asked {asked} MiB)"
