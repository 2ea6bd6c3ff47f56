"""Propose GPU offerings from what the cluster's nodes advertise, so operators never type resource names.

Reads the labels GPU Feature Discovery publishes and the device plugin's allocatable resources
(GPU-ON-KUBERNETES.md sections 1 and 2): whole GPUs, MIG profiles (``nvidia.com/mig-<profile>``) and
time-sliced replicas (``nvidia.com/gpu.replicas`` > 1, product label ending in ``-SHARED``) and MPS
replicas (the same, with ``nvidia.com/gpu.sharing-strategy: mps``), each capped at 1/replicas of the GPU's
memory and compute (section 1.3). GPUs the NVIDIA DRA driver publishes in ResourceSlices (section 4) are
proposed as DRA offerings: the same whole-GPU and MIG shapes, asked for with a claim (``scheduling/dra.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from scheduling import dra
from scheduling.engine import gpus
from scheduling.kube.keys import GPU_RESOURCE, MIG_RESOURCE_PREFIX, PRODUCT, SHARED_RESOURCE
from scheduling.node_gpus import read_node

WHOLE_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True)
class OfferingProposal:
    slug: str
    display_name: str
    kind: str  # whole | mig | shared | mps | cpu
    gpu_model: str
    resource_name: str
    node_selector: dict[str, str]
    gpu_equivalents: Decimal
    allowed_counts: list[int]
    mig_profile: str = ""
    replicas: int = 1
    memory_cap_mib: int | None = None  # MPS: the GPU's memory / replicas
    active_thread_percentage: int | None = None  # MPS: 100 / replicas
    device_class: str = ""  # DRA: the DeviceClass its claims name
    device_selector: str = ""  # DRA: the CEL selector its claims carry
    cpu_millis_default: int = 2000
    memory_mib_default: int = 8192
    description: str = ""
    nodes: list[str] = field(default_factory=list, compare=False)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")


def _equivalents(value: float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.0001"))


def _mps_proposal(
    model: gpus.GpuModel, memory_mib: int, replicas: int, resource: str, product: str
) -> OfferingProposal:
    # The device plugin's MPS daemon caps each replica at 1/replicas of memory and compute (facts doc 1.3).
    cap = memory_mib // replicas
    return OfferingProposal(
        slug=_slug(f"{model.key}-mps-{replicas}"),
        display_name=f"{model.nvml_name}, 1/{replicas} MPS share",
        kind="mps",
        gpu_model=model.key,
        resource_name=resource,
        node_selector={PRODUCT: product},
        gpu_equivalents=_equivalents(1 / replicas),
        allowed_counts=[1],  # failRequestsGreaterThanOne defaults to true for MPS
        replicas=replicas,
        memory_cap_mib=cap,
        active_thread_percentage=100 // replicas,
        description=f"An MPS share of one GPU: at most {cap} MiB of GPU memory and 1/{replicas} of its compute, "
        "in one fault domain with its neighbours.",
    )


def _node_proposals(node: Mapping[str, Any]) -> list[OfferingProposal]:
    read = read_node(node)
    product, replicas = read.product, read.replicas
    if not product:
        return []
    model = gpus.get_model(product)
    nice = model.nvml_name
    found: list[OfferingProposal] = []
    for resource in (GPU_RESOURCE, SHARED_RESOURCE):
        units = read.devices.get(resource, 0)
        if units <= 0:
            continue
        if read.mps:
            found.append(_mps_proposal(model, read.memory_mib or model.memory_mib, replicas, resource, product))
        elif replicas > 1 or resource.endswith(".shared"):
            found.append(
                OfferingProposal(
                    slug=_slug(f"{model.key}-shared-{replicas}"),
                    display_name=f"{nice}, 1/{replicas} shared",
                    kind="shared",
                    gpu_model=model.key,
                    resource_name=resource,
                    node_selector={PRODUCT: product},
                    gpu_equivalents=_equivalents(1 / replicas),
                    allowed_counts=[1],
                    replicas=replicas,
                    description="A time-sliced share of one GPU: no memory or fault isolation from its neighbours.",
                )
            )
        else:
            gpu_count = read.count or units
            found.append(
                OfferingProposal(
                    slug=_slug(model.key),
                    display_name=f"{nice} (whole GPU)",
                    kind="whole",
                    gpu_model=model.key,
                    resource_name=resource,
                    node_selector={PRODUCT: product},
                    gpu_equivalents=Decimal(1),
                    allowed_counts=[n for n in WHOLE_COUNTS if n <= gpu_count],
                    cpu_millis_default=8000,
                    memory_mib_default=65536,
                    description="Whole GPUs, exclusive to the workspace.",
                )
            )
    for resource, amount in read.devices.items():
        if not resource.startswith(MIG_RESOURCE_PREFIX) or amount <= 0:
            continue
        profile = gpus.profile_for_resource(model, resource)
        name = profile.name if profile else resource.removeprefix(MIG_RESOURCE_PREFIX)
        found.append(
            OfferingProposal(
                slug=_slug(f"{model.key}-{name}"),
                display_name=f"{nice} MIG {name}",
                kind="mig",
                gpu_model=model.key,
                resource_name=resource,
                node_selector={PRODUCT: product},
                gpu_equivalents=_equivalents(gpus.gpu_equivalents(model, name)),
                allowed_counts=[1],
                mig_profile=name,
                description="A hardware-isolated MIG slice of one GPU.",
            )
        )
    return found


def _as_dra(proposal: OfferingProposal) -> OfferingProposal | None:
    """The same shape asked for with a claim: whole GPUs and MIG devices (the portal pools no shared claims)."""
    if proposal.kind not in ("whole", "mig"):
        return None
    model = gpus.get_model(proposal.gpu_model)
    return replace(
        proposal,
        slug=_slug(f"{proposal.slug}-dra"),
        display_name=f"{proposal.display_name}, DRA",
        device_class=dra.GPU_CLASS if proposal.kind == "whole" else dra.MIG_CLASS,
        device_selector=dra.selector_for(model, proposal.mig_profile),
        nodes=[],
    )


def propose_offerings(
    nodes: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]] = ()
) -> list[OfferingProposal]:
    """One proposal per distinct shape across all nodes, plus CPU-only when some node has no GPUs.

    Nodes whose GPUs the NVIDIA DRA driver publishes (``slices``: the cluster's ResourceSlices) propose the
    same shapes asked for with claims, as offerings of their own (``<slug>-dra``)."""
    view = dra.DraView.from_slices(slices)
    by_slug: dict[str, OfferingProposal] = {}
    cpu_nodes: list[str] = []
    for node in nodes:
        name = node.get("metadata", {}).get("name", "")
        if name in view.devices:
            found = [_as_dra(p) for p in _node_proposals(view.with_devices(node))]
            proposals = [p for p in found if p is not None]
        else:
            proposals = _node_proposals(node)
        if not proposals and not read_node(node).product:
            cpu_nodes.append(name)
        for proposal in proposals:
            by_slug.setdefault(proposal.slug, proposal).nodes.append(name)
    if cpu_nodes:
        by_slug["cpu"] = OfferingProposal(
            slug="cpu",
            display_name="CPU only",
            kind="cpu",
            gpu_model="",
            resource_name="",
            node_selector={},
            gpu_equivalents=Decimal(0),
            allowed_counts=[0],
            description="No GPU.",
            nodes=cpu_nodes,
        )
    return sorted(by_slug.values(), key=lambda p: (p.kind, p.slug))
