"""The scheduling cycle: admit queued workspaces that fit their team's quota and the cluster.

One cycle at a time (``single_flight``). Within a cycle, requests are taken first come, first served;
a request that does not fit is skipped, not blocking others of other teams or shapes. Each admission
row-locks the team's quota, so admissions racing from several processes cannot overrun it.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from django.db import transaction

from portal.queue import enqueue
from scheduling import quota
from scheduling.inventory import Capacity, Demand
from scheduling.kube.calls import Kube
from scheduling.locks import single_flight
from workspaces.models import GpuOffering, Workspace
from workspaces.transitions import State, set_reason, transition

log = logging.getLogger(__name__)
PROVISION = "scheduling.provision_workspace"


def demand_of(workspace: Workspace) -> Demand:
    offering = workspace.offering
    gpu = offering.kind != GpuOffering.Kind.CPU and workspace.gpu_count > 0
    return Demand(
        resource_name=offering.resource_name if gpu else "",
        count=workspace.gpu_count if gpu else 0,
        cpu_millis=workspace.cpu_millis,
        memory_mib=workspace.memory_mib,
        node_selector=dict(offering.node_selector),
        pods=workspace.workers,
    )


def _fmt(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def admit_one(workspace: Workspace, capacity: Capacity) -> bool:
    """Admit ``workspace`` if its team's quota and the cluster have room; else record why it waits."""
    offering = workspace.offering
    with transaction.atomic():
        if offering.kind != GpuOffering.Kind.CPU:
            guarantee = quota.guaranteed(workspace.team_id, offering.flavour, lock=True)
            in_use = quota.used(workspace.team_id, offering.flavour)
            if in_use + workspace.gpu_equivalents > guarantee:
                set_reason(
                    workspace,
                    f"Waiting for team quota: {workspace.team.name} uses {_fmt(in_use)} of its {_fmt(guarantee)} "
                    f"guaranteed {offering.flavour} GPU-equivalents and this needs {_fmt(workspace.gpu_equivalents)}.",
                    source="scheduler",
                )
                return False
            capped = quota.member_headroom(workspace.team_id, workspace.owner_id, offering.flavour)
            if capped and capped[1] + workspace.gpu_equivalents > capped[0]:
                set_reason(
                    workspace,
                    f"Waiting for your share: your lead caps you at {_fmt(capped[0])} {offering.flavour} "
                    f"GPU-equivalents, you use {_fmt(capped[1])} and this needs {_fmt(workspace.gpu_equivalents)}.",
                    source="scheduler",
                )
                return False
        demand = demand_of(workspace)
        nodes = capacity.place(demand)
        if nodes is None:
            set_reason(
                workspace,
                f"Waiting for a free {offering.display_name}: {capacity.explain(demand)}",
                source="scheduler",
            )
            return False
        admitted = transition(
            workspace,
            State.ADMITTED,
            f"Admitted: fits {workspace.team.name}'s quota and {', '.join(sorted(set(nodes)))} has room.",
            expected=[State.QUEUED],
            source="scheduler",
        )
        if admitted:
            enqueue(PROVISION, workspace.pk)
        return admitted


def run_cycle(kube: Kube) -> int:
    """Admit what fits; returns how many workspaces were admitted (0 if another cycle is running)."""
    with single_flight("scheduling-cycle") as acquired:
        if not acquired:
            log.info("scheduling cycle skipped: another one is running")
            return 0
        queued = list(
            Workspace.objects.filter(state=State.QUEUED).select_related("offering", "team").order_by("created_at", "id")
        )
        if not queued:
            return 0
        capacity = Capacity.from_objects(kube.list("Node", None, ""), kube.list("Pod", None, ""))
        # Admitted workspaces whose pods are not created yet still hold their room.
        for pending in Workspace.objects.filter(state=State.ADMITTED).select_related("offering"):
            capacity.place(demand_of(pending))
        admitted = sum(admit_one(workspace, capacity) for workspace in queued)
        log.info("scheduling cycle admitted %d of %d queued workspaces", admitted, len(queued))
        return admitted
