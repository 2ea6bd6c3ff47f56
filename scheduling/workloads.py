"""The bridge from database rows to the admission engine: workspaces become workloads, quota rows become
the engine's quota configuration, cluster nodes give the capacity per GPU flavour."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from portal.models import Team
from scheduling import priorities
from scheduling.engine import gpus
from scheduling.engine.quota import Kind, QuotaConfig, TeamQuota, Workload, to_units
from scheduling.models import DepartmentCap
from scheduling.models import TeamQuota as TeamQuotaRow
from workspaces.models import GpuOffering, Workspace

PRODUCT = "nvidia.com/gpu.product"


def is_gpu(workspace: Workspace) -> bool:
    return workspace.offering.kind != GpuOffering.Kind.CPU


def workload_of(workspace: Workspace) -> Workload:
    return Workload(
        id=str(workspace.pk),
        team=workspace.team.slug,
        flavour=workspace.offering.flavour,
        units=to_units(float(workspace.gpu_equivalents)),
        priority=priorities.value(workspace.priority),
        kind=Kind.INTERACTIVE if workspace.kind == Workspace.Kind.NOTEBOOK else Kind.BATCH,
        created_at=workspace.created_at.timestamp(),
        admitted_at=workspace.admitted_at.timestamp() if workspace.admitted_at else None,
        borrowing=workspace.borrowing,
        preempting=workspace.preempt_at is not None,
    )


def capacity_of(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """GPU-equivalents per GPU model that the cluster's schedulable GPU nodes hold (GFD's ``gpu.count``)."""
    capacity: dict[str, int] = {}
    for node in nodes:
        labels = node.get("metadata", {}).get("labels") or {}
        product = labels.get(PRODUCT)
        if not product or node.get("spec", {}).get("unschedulable"):
            continue
        try:
            flavour = gpus.get_model(product).key
        except gpus.UnknownGpuModel:
            continue
        count = int(labels.get("nvidia.com/gpu.count", "0") or 0)
        capacity[flavour] = capacity.get(flavour, 0) + to_units(float(count))
    return capacity


def quota_config(capacity: Mapping[str, int]) -> QuotaConfig:
    rows = TeamQuotaRow.objects.select_related("team__department")
    return QuotaConfig(
        quotas={
            (row.team.slug, row.flavour): TeamQuota(to_units(float(row.guaranteed)), to_units(float(row.borrow_limit)))
            for row in rows
        },
        departments=dict(Team.objects.values_list("slug", "department__slug")),
        caps={
            (cap.department.slug, cap.flavour): to_units(float(cap.cap))
            for cap in DepartmentCap.objects.select_related("department")
        },
        capacity=dict(capacity),
    )
