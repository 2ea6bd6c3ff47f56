"""What the NVIDIA DRA driver (``gpu.nvidia.com``) publishes: its DeviceClasses and one ResourceSlice per node.

Pure. Names, attributes and capacities follow facts doc 4.3: whole GPUs are ``gpu-<minor>``, MIG devices
(pre-created by the MIG manager; the driver's DynamicMIG gate is off) ``gpu-<minor>-mig-<profile>-<gi profile
id>-<placement start>``. A GPU with MIG on publishes its MIG devices, not itself; an unhealthy GPU publishes
nothing. Versions are semver (``570.172.08`` becomes ``570.172.8``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from scheduling.engine import gpus
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.node_render import GpuDevice, MigInstance, RenderedNode

JSON = dict[str, Any]

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.k8s.io/v1"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"

_ATTRIBUTES = f"device.attributes['{DRIVER}']"
_CLASS_TYPES = {GPU_CLASS: "gpu", MIG_CLASS: "mig", "vfio.gpu.nvidia.com": "vfio"}


def device_classes() -> list[JSON]:
    """The DeviceClasses the driver's chart installs (facts doc 4.3; the compute-domain driver's are not ours)."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && {_ATTRIBUTES}.type == '{kind}'"}}]
            },
        }
        for name, kind in _CLASS_TYPES.items()
    ]


def _semver(version: str) -> str:
    parts = [int(p) for p in version.split(".")[:3] if p.isdigit()]
    return ".".join(str(p) for p in [*parts, 0, 0, 0][:3])


def _common(model: gpus.GpuModel, driver_version: str, cuda_version: str) -> JSON:
    return {
        "productName": {"string": model.nvml_name},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": model.architecture},
        "cudaComputeCapability": {"version": f"{model.compute_major}.{model.compute_minor}.0"},
        "driverVersion": {"version": _semver(driver_version)},
        "cudaDriverVersion": {"version": _semver(cuda_version)},
    }


def _pci_bus_id(d: GpuDevice) -> str:
    # NVML's 00000000:1B:00.0 in the kernel's 0000:1b:00.0 spelling, as Kubernetes' standard attribute has it.
    return d.pci_bus_id[4:].lower()


def mig_device_name(d: GpuDevice, inst: MigInstance, model: gpus.GpuModel) -> str:
    profile = model.profile(inst.profile)
    # Device names are DNS labels: dots dropped, a "+me" suffix spelled "-me".
    short = inst.profile.replace(".", "").replace("+", "-")
    return f"gpu-{d.index}-mig-{short}-{profile.gi_profile_id}-{inst.start}"


def _devices(rendered: RenderedNode, driver_version: str, cuda_version: str) -> Iterator[tuple[JSON, DeviceRef]]:
    model = gpus.get_model(rendered.gpu_model) if rendered.gpu_model else None
    if model is None:
        return
    common = _common(model, driver_version, cuda_version)
    for d in rendered.devices:
        if not d.healthy:
            continue
        if d.mig is None:
            attributes = {"type": {"string": "gpu"}, "uuid": {"string": d.uuid}, **common}
            attributes["resource.kubernetes.io/pciBusID"] = {"string": _pci_bus_id(d)}
            capacity = {"memory": {"value": f"{model.memory_mib}Mi"}}
            yield {"name": f"gpu-{d.index}", "attributes": attributes, "capacity": capacity}, DeviceRef(d.index)
            continue
        for inst in d.mig:
            p = model.profile(inst.profile)
            capacity = {
                "memory": {"value": f"{inst.memory_mib}Mi"},
                "multiprocessors": {"value": str(p.multiprocessors)},
                "copyEngines": {"value": str(p.copy_engines)},
                "decoders": {"value": str(p.decoders)},
                "encoders": {"value": str(p.encoders)},
                "jpegEngines": {"value": str(p.jpeg_engines)},
                "ofaEngines": {"value": str(p.ofa_engines)},
            } | {f"memorySlice{s}": {"value": "1"} for s in range(inst.start, inst.start + p.memory_slices)}
            attributes = {
                "type": {"string": "mig"},
                "uuid": {"string": inst.uuid},
                "parentUUID": {"string": d.uuid},
                "profile": {"string": inst.profile},
                **common,
            }
            yield (
                {"name": mig_device_name(d, inst, model), "attributes": attributes, "capacity": capacity},
                DeviceRef(d.index, inst.gi_id),
            )


def device_refs(rendered: RenderedNode) -> dict[str, DeviceRef]:
    """Published device name -> the device it stands for (what telemetry and the kubelet follow)."""
    return {device["name"]: ref for device, ref in _devices(rendered, "0", "0")}


def slice_name(node: str) -> str:
    # The kubelet plugin library uses generateName "<node>-<driver>-"; a stable suffix keeps runs reproducible.
    return f"{node}-{DRIVER}-{hashlib.sha256(node.encode()).hexdigest()[:5]}"


def resource_slice(rendered: RenderedNode, *, driver_version: str, cuda_version: str, generation: int) -> JSON:
    """The node's one ResourceSlice (its own pool, named after the node)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(rendered.name)},
        "spec": {
            "driver": DRIVER,
            "nodeName": rendered.name,
            "pool": {"name": rendered.name, "generation": generation, "resourceSliceCount": 1},
            "devices": [device for device, _ in _devices(rendered, driver_version, cuda_version)],
        },
    }
