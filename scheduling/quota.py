"""Team quota: what a team is guaranteed per GPU flavour and how much of it is in use.

This is the first version of admission (FIFO within guarantee); the quota issue adds borrowing,
priorities and fair share on top of the same functions.
"""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Sum

from scheduling.models import TeamQuota
from workspaces.models import Workspace


def guaranteed(team_id: int, flavour: str, *, lock: bool = False) -> Decimal:
    """The team's guarantee for ``flavour``; 0 when none was set. ``lock`` row-locks it (in a transaction)."""
    rows = TeamQuota.objects.filter(team_id=team_id, flavour=flavour)
    if lock:
        rows = rows.select_for_update()
    quota = rows.first()
    return quota.guaranteed if quota else Decimal(0)


def used(team_id: int, flavour: str) -> Decimal:
    total = (
        Workspace.objects.active()
        .filter(team_id=team_id, offering__gpu_model=flavour)
        .aggregate(total=Sum("gpu_equivalents"))["total"]
    )
    return total or Decimal(0)


def quota_summary(team_id: int) -> dict[str, dict[str, Decimal]]:
    """Guaranteed and used GPU-equivalents per flavour of one team."""
    summary = {
        q.flavour: {"guaranteed": q.guaranteed, "used": Decimal(0)} for q in TeamQuota.objects.filter(team_id=team_id)
    }
    rows = (
        Workspace.objects.active()
        .filter(team_id=team_id)
        .values("offering__gpu_model")
        .annotate(total=Sum("gpu_equivalents"))
    )
    for row in rows:
        flavour = row["offering__gpu_model"]
        summary.setdefault(flavour, {"guaranteed": Decimal(0), "used": Decimal(0)})["used"] = row["total"]
    return summary
