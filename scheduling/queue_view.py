"""The queue as a person sees it: where each waiting workspace stands, why it waits, when it may start,
and what would start right now instead."""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F
from django.utils import timezone

from scheduling import services
from workspaces.deadlines import workspace_deadline
from workspaces.models import GpuOffering, Workspace

HISTORY = 50  # finished workspaces per flavour that inform the runtime estimate


def _typical_runtime(flavour: str) -> timedelta | None:
    """Median runtime of recently finished workspaces of this flavour: people often stop before the limit."""
    finished = (
        Workspace.objects.filter(offering__gpu_model=flavour, started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:HISTORY]
    )
    durations = [(end - start).total_seconds() for start, end in finished if start and end and end > start]
    return timedelta(seconds=statistics.median(durations)) if len(durations) >= 3 else None


def _expected_end(workspace: Workspace, typical: timedelta | None, now: datetime) -> datetime:
    deadline = workspace_deadline(workspace) or now
    if typical is not None and workspace.started_at is not None:
        deadline = min(deadline, max(now, workspace.started_at + typical))
    return max(deadline, now)


def _estimates(flavour: str, waiting: list[Workspace], now: datetime) -> dict[int, datetime | None]:
    """Walk the running workspaces of the flavour in the order they are expected to end; each waiting
    workspace (in queue order) starts when the units released so far cover it and everything ahead."""
    typical = _typical_runtime(flavour)
    running = Workspace.objects.active().filter(offering__gpu_model=flavour)
    ends = sorted((_expected_end(w, typical, now), w.gpu_equivalents) for w in running)
    estimates: dict[int, datetime | None] = {}
    needed, released, index = Decimal(0), Decimal(0), 0
    for workspace in waiting:
        needed += workspace.gpu_equivalents
        while released < needed and index < len(ends):
            released += ends[index][1]
            index += 1
        estimates[workspace.pk] = ends[index - 1][0] if index and released >= needed else None
    return estimates


def _alternatives(
    workspace: Workspace,
    offerings: list[GpuOffering],
    free: dict[str, int | None],
    left: dict[tuple[int, str], Decimal],
    rules: services.TeamRules,
) -> list[str]:
    """Offerings the team's policy allows that could start now within what is left to the owner: the team's
    guarantee and the owner's own cap in it (``services.member_quota_left``)."""
    options = []
    for offering in offerings:
        if offering.pk == workspace.offering_id or offering.kind == GpuOffering.Kind.CPU or not free.get(offering.slug):
            continue
        if rules.allowed_offerings and offering.slug not in rules.allowed_offerings:
            continue
        if offering.gpu_equivalents <= left.get((workspace.team_id, offering.flavour), Decimal(0)):
            options.append(f"{offering.display_name} is free now")
    return options[:3]


def queue_entries(user: Any) -> list[dict[str, Any]]:
    visible = set(Workspace.objects.visible_to(user).filter(state=Workspace.State.QUEUED).values_list("pk", flat=True))
    if not visible:
        return []
    now = timezone.now()
    queued = list(
        Workspace.objects.filter(state=Workspace.State.QUEUED)
        .select_related("offering", "team", "owner")
        .order_by("created_at", "id")
        .annotate(flavour=F("offering__gpu_model"))
    )
    by_flavour: dict[str, list[Workspace]] = defaultdict(list)
    for workspace in queued:
        by_flavour[workspace.offering.flavour].append(workspace)
    offerings = list(GpuOffering.objects.filter(enabled=True))
    free = services.free_units(offerings)
    rules: dict[int, services.TeamRules] = {}
    left: dict[tuple[int, int], dict[tuple[int, str], Decimal]] = {}  # per (team, owner)
    entries = []
    for flavour, waiting in by_flavour.items():
        estimates = _estimates(flavour, waiting, now)
        for position, workspace in enumerate(waiting, start=1):
            if workspace.pk not in visible:
                continue
            estimate = estimates.get(workspace.pk)
            if workspace.team_id not in rules:
                rules[workspace.team_id] = services.team_rules(workspace.team_id)
            owner_key = (workspace.team_id, workspace.owner_id)
            if owner_key not in left:
                left[owner_key] = services.member_quota_left([workspace.team_id], workspace.owner_id)
            entries.append(
                {
                    "id": workspace.pk,
                    "name": workspace.name,
                    "team": workspace.team.slug,
                    "owner": workspace.owner.get_username(),
                    "offering": workspace.offering.display_name,
                    "flavour": flavour or "cpu",
                    "position": position,
                    "of": len(waiting),
                    "reason": workspace.reason,
                    "estimated_start": estimate.isoformat() if estimate else None,
                    "waiting_since": workspace.created_at.isoformat(),
                    "alternatives": _alternatives(
                        workspace, offerings, free, left[owner_key], rules[workspace.team_id]
                    ),
                }
            )
    return sorted(entries, key=lambda e: (e["flavour"], e["position"]))
