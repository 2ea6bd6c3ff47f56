"""The simulated NVIDIA device plugin's allocation: which GPUs, MIG instances or shared replicas a
container gets, the IDs the kubelet sees, and the admission check for shared resources (facts doc 1.3,
``shared/design/GPU-ON-KUBERNETES.md``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduling.engine import gpus
from scheduling.simcluster.node_render import MigInstance, RenderedNode, shared_resource_name
from scheduling.simcluster.nodes import GPU_RESOURCE, GPU_SHARED_RESOURCE


@dataclass(frozen=True)
class DeviceRef:
    """What the device plugin hands a container: a whole GPU, a MIG instance, or a replica of either."""

    gpu_index: int
    gi_id: int | None = None
    replica: int | None = None


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
