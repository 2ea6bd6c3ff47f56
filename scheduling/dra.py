"""Dynamic Resource Allocation in the portal's terms (facts doc 4): GPUs the NVIDIA DRA driver publishes as
ResourceSlice devices, read as the device-plugin shapes they stand for, and the claims the portal asks with.

The portal keeps one language for capacity, quota and placement: a DRA whole GPU counts as one
``nvidia.com/gpu`` of its node, a DRA MIG device as one ``nvidia.com/mig-<profile>``. A node the driver
publishes gets those counts added to its allocatable (the device plugin does not run there), and an allocated
ResourceClaim takes its devices from its node as a bound pod takes device-plugin units. A DRA offering keeps
its ``resource_name`` as that shape and adds the DeviceClass and CEL selector its claims carry.

Pure: objects (dicts, as the API returns them) in, plain values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduling.engine import gpus
from scheduling.kube import keys

JSON = dict[str, Any]

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"


def _attribute(device: Mapping[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return value.get("string", value.get("version", value.get("int", value.get("bool"))))


def equivalent_resource(driver: str, device: Mapping[str, Any]) -> str | None:
    """The device-plugin resource a published device stands for; None for devices the portal does not use."""
    if driver != DRIVER:
        return None
    kind = _attribute(device, "type")
    if kind == "gpu":
        return keys.GPU_RESOURCE
    if kind == "mig" and (profile := _attribute(device, "profile")):
        return gpus.resource_name(str(profile))
    return None


@dataclass
class DraView:
    """The cluster's DRA devices: each node's devices as device-plugin counts, and what allocated claims hold."""

    devices: dict[str, Counter[str]] = field(default_factory=dict)  # node -> resource -> count
    by_device: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)  # key -> (node, resource)

    @classmethod
    def from_slices(cls, slices: Iterable[Mapping[str, Any]]) -> DraView:
        view = cls()
        for s in slices:
            spec = s.get("spec") or {}
            node, driver = spec.get("nodeName"), spec.get("driver", "")
            pool = (spec.get("pool") or {}).get("name", "")
            if not node:
                continue
            for device in spec.get("devices") or []:
                resource = equivalent_resource(driver, device)
                if resource is not None:
                    view.devices.setdefault(node, Counter())[resource] += 1
                    view.by_device[(driver, pool, device["name"])] = (node, resource)
        return view

    def with_devices(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        """The node with its DRA devices in allocatable, as the device plugin would list them."""
        counts = self.devices.get((node.get("metadata") or {}).get("name", ""))
        if not counts:
            return node
        status = node.get("status") or {}
        allocatable = {**(status.get("allocatable") or {}), **{k: str(v) for k, v in sorted(counts.items())}}
        return {**node, "status": {**status, "allocatable": allocatable}}

    def held_by(self, claim: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None:
        """(node, device-plugin counts) an allocated claim holds; None when it holds none of ours."""
        allocation = (claim.get("status") or {}).get("allocation") or {}
        held: Counter[str] = Counter()
        node = ""
        for result in (allocation.get("devices") or {}).get("results") or []:
            found = self.by_device.get((result.get("driver", ""), result.get("pool", ""), result.get("device", "")))
            if found is not None:
                node = found[0]
                held[found[1]] += 1
        return (node, dict(held)) if held else None


def selector_for(model: gpus.GpuModel, profile: str = "") -> str:
    """The CEL selector a discovered offering's claims carry: the product name (and the MIG profile).

    Matching names rather than memory avoids the facts' trap: an H100 80GB reports less than ``80Gi``."""
    product = f'device.attributes["{DRIVER}"].productName == "{model.nvml_name}"'
    return f'{product} && device.attributes["{DRIVER}"].profile == "{profile}"' if profile else product
