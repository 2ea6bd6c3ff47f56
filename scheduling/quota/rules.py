"""Team quota for pages and request checks: what a team is guaranteed per GPU flavour, may borrow, and
uses. The scheduling cycle reads the same numbers in bulk, under lock, through ``scheduling/quota/snapshot.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum

from scheduling.models import TeamPolicy, TeamQuota
from workspaces.models import Workspace


@dataclass(frozen=True)
class Limits:
    guaranteed: Decimal
    borrow_limit: Decimal


def limits(team_id: int, flavour: str, *, lock: bool = False) -> Limits:
    """Guarantee and borrowing limit for ``flavour`` (zeros when none); ``lock`` row-locks the quota."""
    rows = TeamQuota.objects.filter(team_id=team_id, flavour=flavour)
    if lock:
        rows = rows.select_for_update()
    row = rows.first()
    return Limits(row.guaranteed, row.borrow_limit) if row else Limits(Decimal(0), Decimal(0))


def quota_summaries(team_ids: Iterable[int]) -> dict[tuple[int, str], dict[str, Decimal]]:
    """Guaranteed, borrowable and used GPU-equivalents per (team, flavour), in two queries for any number of teams."""
    ids = list(team_ids)
    zero = Decimal(0)
    summary: dict[tuple[int, str], dict[str, Decimal]] = {
        (q.team_id, q.flavour): {"guaranteed": q.guaranteed, "borrow_limit": q.borrow_limit, "used": zero}
        for q in TeamQuota.objects.filter(team_id__in=ids)
    }
    rows = (
        Workspace.objects.active()
        .filter(team_id__in=ids)
        .values("team_id", "offering__gpu_model")
        .annotate(total=Sum("gpu_equivalents"))
    )
    for row in rows:
        key = (row["team_id"], row["offering__gpu_model"])
        summary.setdefault(key, {"guaranteed": zero, "borrow_limit": zero, "used": zero})["used"] = row["total"]
    return summary


def quota_summary(team_id: int) -> dict[str, dict[str, Decimal]]:
    """Guaranteed, borrowable and used GPU-equivalents per flavour of one team."""
    return {flavour: numbers for (_, flavour), numbers in quota_summaries([team_id]).items()}


@dataclass(frozen=True)
class TeamRules:
    default_runtime_hours: int
    max_runtime_hours: int
    allowed_offerings: frozenset[str]  # empty: all enabled offerings


def team_rules(team_id: int) -> TeamRules:
    """The team's policy, or the portal-wide defaults where its lead set none."""
    policy = TeamPolicy.objects.filter(team_id=team_id).prefetch_related("allowed_offerings").first()
    if policy is None:
        return TeamRules(settings.WORKSPACE_DEFAULT_RUNTIME_HOURS, settings.WORKSPACE_MAX_RUNTIME_HOURS, frozenset())
    return TeamRules(
        policy.default_runtime_hours,
        min(policy.max_runtime_hours, settings.WORKSPACE_MAX_RUNTIME_HOURS),
        frozenset(o.slug for o in policy.allowed_offerings.all()),
    )
