"""The queue as a person sees it: where each waiting workspace stands, why it waits, when it may start,
and what would start right now instead."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import chain
from typing import Any

from django.db import connections
from django.utils import timezone

from scheduling import services
from workspaces.models import GpuOffering, Workspace

HISTORY = 50  # finished workspaces per flavour that inform the runtime estimate


def _typical_runtimes(flavours: set[str]) -> dict[str, timedelta | None]:
    """Median runtime of recently finished workspaces of each flavour (people often stop before the limit):
    one query, each flavour's newest finished rows read by the finished_at index as if asked alone."""
    per_flavour = [
        Workspace.objects.filter(offering__gpu_model=flavour, started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("offering__gpu_model", "started_at", "finished_at")[:HISTORY]
        for flavour in sorted(flavours)
    ]
    if not per_flavour:
        return {}
    rows: Iterable[tuple[str, datetime | None, datetime | None]] = (
        per_flavour[0].union(*per_flavour[1:], all=True)
        if connections[per_flavour[0].db].features.supports_slicing_ordering_in_compound
        else chain.from_iterable(per_flavour)  # SQLite (the demo): one query per flavour
    )
    durations: dict[str, list[float]] = defaultdict(list)
    for flavour, start, end in rows:
        if start and end and end > start:
            durations[flavour].append((end - start).total_seconds())
    return {
        flavour: timedelta(seconds=statistics.median(durations[flavour])) if len(durations[flavour]) >= 3 else None
        for flavour in flavours
    }


def _expected_end(
    started_at: datetime | None, max_runtime_seconds: int, typical: timedelta | None, now: datetime
) -> datetime:
    if started_at is None:  # admitted, not started yet
        return now
    deadline = started_at + timedelta(seconds=max_runtime_seconds)  # workspaces.deadlines, from two columns
    if typical is not None:
        deadline = min(deadline, max(now, started_at + typical))
    return max(deadline, now)


def _running(flavours: set[str]) -> dict[str, list[tuple[datetime | None, int, Decimal]]]:
    """The admitted and running workspaces of each flavour: (started at, runtime limit, units)."""
    running: dict[str, list[tuple[datetime | None, int, Decimal]]] = defaultdict(list)
    rows = (
        Workspace.objects.active()
        .filter(offering__gpu_model__in=flavours)
        .values_list("offering__gpu_model", "started_at", "max_runtime_seconds", "gpu_equivalents")
    )
    for flavour, start, limit, units in rows:
        running[flavour].append((start, limit, units))
    return running


def _estimates(
    waiting: list[tuple[int, Decimal]],
    running: list[tuple[datetime | None, int, Decimal]],
    typical: timedelta | None,
    now: datetime,
) -> dict[int, datetime | None]:
    """Walk a flavour's running workspaces in the order they are expected to end; each waiting workspace
    ((id, GPU-equivalents), in queue order) starts when the units released so far cover it and everything
    ahead."""
    ends = sorted((_expected_end(start, limit, typical, now), units) for start, limit, units in running)
    estimates: dict[int, datetime | None] = {}
    needed, released, index = Decimal(0), Decimal(0), 0
    for pk, units in waiting:
        needed += units
        while released < needed and index < len(ends):
            released += ends[index][1]
            index += 1
        estimates[pk] = ends[index - 1][0] if index and released >= needed else None
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
    """The queued workspaces ``user`` may see, each with its place in its flavour's line. Every queued row is
    read narrowly for the places; only the visible ones as models, and the rules and quota left of their
    teams and owners in a few queries whatever their number."""
    shown = {
        w.pk: w
        for w in Workspace.objects.visible_to(user)
        .filter(state=Workspace.State.QUEUED)
        .select_related("offering", "team", "owner")
    }
    if not shown:
        return []
    now = timezone.now()
    queued = (
        Workspace.objects.filter(state=Workspace.State.QUEUED)
        .order_by("created_at", "id")
        .values_list("pk", "offering__gpu_model", "gpu_equivalents")
    )
    by_flavour: dict[str, list[tuple[int, Decimal]]] = defaultdict(list)
    for pk, flavour, units in queued:
        by_flavour[flavour].append((pk, units))
    offerings = list(GpuOffering.objects.filter(enabled=True))
    free = services.free_units(offerings)
    teams = {w.team_id for w in shown.values()}
    rules = services.team_rules_for(teams)
    left = services.members_quota_left(teams, {(w.team_id, w.owner_id) for w in shown.values()})
    seen = {flavour for flavour, waiting in by_flavour.items() if any(pk in shown for pk, _ in waiting)}
    typical, running = _typical_runtimes(seen), _running(seen)
    entries = []
    for flavour, waiting in by_flavour.items():
        if flavour not in seen:
            continue
        estimates = _estimates(waiting, running[flavour], typical[flavour], now)
        for position, (pk, _) in enumerate(waiting, start=1):
            if (workspace := shown.get(pk)) is None:
                continue
            estimate = estimates.get(pk)
            entries.append(
                {
                    "id": pk,
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
                        workspace, offerings, free, left[workspace.owner_id], rules[workspace.team_id]
                    ),
                }
            )
    return sorted(entries, key=lambda e: (e["flavour"], e["position"]))
