"""Quota rules as the portal reads them from the database: a team's guarantee and borrowing limit per GPU
flavour, what it uses, its lead's policy, and the engine's quota configuration for the scheduling cycle.

The rules themselves (the ceiling, the department cap) are said once, in :mod:`scheduling.engine.quota`;
this module feeds them the stored numbers. The cycle reads the same numbers in bulk, under lock, through
:mod:`scheduling.quota.snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, cast

from django.conf import settings
from django.db.models import OuterRef, Subquery, Sum

from portal.models import Team
from scheduling.engine import quota as engine_quota
from scheduling.engine.quota import QuotaConfig, to_units
from scheduling.models import DepartmentCap, MemberCap, TeamPolicy, TeamQuota
from scheduling.telemetry.idle_rule import IdlePolicy
from workspaces.models import Workspace

ZERO = Decimal(0)


@dataclass(frozen=True)
class Limits:
    guaranteed: Decimal
    borrow_limit: Decimal

    def ceiling(self, *, borrowing: bool) -> Decimal:
        """What the team may hold: its guarantee, plus its borrowing limit for work that may borrow."""
        return engine_quota.ceiling(self.guaranteed, self.borrow_limit, may_borrow=borrowing)


NO_LIMITS = Limits(ZERO, ZERO)


def may_borrow(workspace_kind: str) -> bool:
    """Training jobs may borrow idle capacity beyond the guarantee (and are preempted for it); notebooks never."""
    return workspace_kind == Workspace.Kind.JOB


def limits(team_id: int, flavour: str) -> Limits:
    """Guarantee and borrowing limit for ``flavour`` (zeros when none)."""
    row = TeamQuota.objects.filter(team_id=team_id, flavour=flavour).first()
    return Limits(row.guaranteed, row.borrow_limit) if row else NO_LIMITS


def _held(team_ids: Iterable[int], *keys: str) -> dict[tuple[Any, ...], Decimal]:
    rows = (
        Workspace.objects.active()
        .filter(team_id__in=list(team_ids))
        .values_list(*keys)
        .annotate(total=Sum("gpu_equivalents"))
    )
    return {tuple(row[:-1]): row[-1] for row in rows}


def team_use(team_ids: Iterable[int]) -> dict[tuple[int, str], Decimal]:
    """The quota use: GPU-equivalents held by active workspaces per (team, flavour), in one query."""
    return cast(dict[tuple[int, str], Decimal], _held(team_ids, "team_id", "offering__gpu_model"))


def member_use(team_ids: Iterable[int]) -> dict[tuple[int, int, str], Decimal]:
    """The same per (team, member, flavour), for member caps."""
    return cast(dict[tuple[int, int, str], Decimal], _held(team_ids, "team_id", "owner_id", "offering__gpu_model"))


def quota_summaries(team_ids: Iterable[int]) -> dict[tuple[int, str], dict[str, Decimal]]:
    """Guaranteed, borrowable and used GPU-equivalents per (team, flavour), in two queries for any number of teams."""
    ids = list(team_ids)
    summary: dict[tuple[int, str], dict[str, Decimal]] = {
        (q.team_id, q.flavour): {"guaranteed": q.guaranteed, "borrow_limit": q.borrow_limit, "used": ZERO}
        for q in TeamQuota.objects.filter(team_id__in=ids)
    }
    for (team_id, flavour), total in team_use(ids).items():
        summary.setdefault((team_id, flavour), {"guaranteed": ZERO, "borrow_limit": ZERO, "used": ZERO})["used"] = total
    return summary


def quota_summary(team_id: int) -> dict[str, dict[str, Decimal]]:
    """Guaranteed, borrowable and used GPU-equivalents per flavour of one team."""
    return {flavour: numbers for (_, flavour), numbers in quota_summaries([team_id]).items()}


def never_fits(team: Team, flavour: str, workspace_kind: str, needed: Decimal, *, member_id: int) -> str | None:
    """Why a request of ``needed`` GPU-equivalents could never start within the team's quota or the member's
    cap in it, or None. (Refused at submit: queued, it would wait forever.)"""
    # The quota and the member's cap in one query (this runs on every request).
    member_cap = MemberCap.objects.filter(team_id=OuterRef("team_id"), user_id=member_id, flavour=flavour)
    guaranteed, borrow_limit, cap = (
        TeamQuota.objects.filter(team_id=team.pk, flavour=flavour)
        .values_list("guaranteed", "borrow_limit", Subquery(member_cap.order_by().values("cap")[:1]))
        .order_by()
        .first()
    ) or (ZERO, ZERO, None)  # no quota: nothing fits, whatever the cap
    ceiling = Limits(guaranteed, borrow_limit).ceiling(borrowing=may_borrow(workspace_kind))
    if needed > ceiling:
        return (
            f"{team.name} may use at most {ceiling.normalize():f} GPU-equivalents of {flavour} for this kind of "
            f"workspace; this request needs {needed.normalize():f}, so it could never start."
        )
    if cap is not None and needed > cap:
        return (
            f"Your lead caps you at {cap.normalize():f} GPU-equivalents of {flavour} in {team.name}; this request "
            f"needs {needed.normalize():f}, so it could never start."
        )
    return None


@dataclass(frozen=True)
class TeamRules:
    default_runtime_hours: int
    max_runtime_hours: int
    allowed_offerings: frozenset[str]  # empty: all enabled offerings


def team_rules(team_id: int) -> TeamRules:
    """The team's policy, or the portal-wide defaults where its lead set none."""
    return team_rules_for([team_id])[team_id]


def team_rules_for(team_ids: Iterable[int]) -> dict[int, TeamRules]:
    """:func:`team_rules` of each team, in two queries."""
    ids = set(team_ids)
    policies = {p.team_id: p for p in TeamPolicy.objects.filter(team_id__in=ids).prefetch_related("allowed_offerings")}
    defaults = TeamRules(settings.WORKSPACE_DEFAULT_RUNTIME_HOURS, settings.WORKSPACE_MAX_RUNTIME_HOURS, frozenset())
    return {
        team_id: defaults
        if (policy := policies.get(team_id)) is None
        else TeamRules(
            policy.default_runtime_hours,
            min(policy.max_runtime_hours, settings.WORKSPACE_MAX_RUNTIME_HOURS),
            frozenset(o.slug for o in policy.allowed_offerings.all()),
        )
        for team_id in ids
    }


@dataclass(frozen=True)
class IdleRules:
    policy: IdlePolicy
    keep_alive: timedelta  # how long one keep-alive lasts
    keep_alives_per_run: int


def idle_rules(team_id: int) -> IdleRules:
    """The team's idle rules (its lead's, or the defaults), as the idle rule reads them."""
    return idle_rules_for([team_id])[team_id]


def idle_rules_for(team_ids: Iterable[int]) -> dict[int, IdleRules]:
    """:func:`idle_rules` of each team, in one query."""
    ids = set(team_ids)
    policies = {p.team_id: p for p in TeamPolicy.objects.filter(team_id__in=ids)}
    return {team_id: _idle_rules(policies.get(team_id) or TeamPolicy()) for team_id in ids}


def _idle_rules(policy: TeamPolicy) -> IdleRules:
    minute = timedelta(seconds=settings.IDLE_POLICY_MINUTE_SECONDS)  # 60 s but in the demo and tests
    return IdleRules(
        IdlePolicy(
            threshold=policy.idle_threshold_percent / 100,
            window=policy.idle_window_minutes * minute,
            grace=policy.idle_grace_minutes * minute,
            stuck_window=policy.stuck_window_minutes * minute,
            max_gap=timedelta(seconds=3 * settings.TELEMETRY_INTERVAL_SECONDS),
        ),
        policy.keep_alive_hours * 60 * minute,
        policy.keep_alives_per_run,
    )


def quota_config(capacity: Mapping[str, int]) -> QuotaConfig:
    """Every team's quota and every department cap, in the admission engine's units."""
    rows = TeamQuota.objects.select_related("team__department")
    return QuotaConfig(
        quotas={
            (row.team.slug, row.flavour): engine_quota.TeamQuota(
                to_units(float(row.guaranteed)), to_units(float(row.borrow_limit))
            )
            for row in rows
        },
        departments=dict(Team.objects.values_list("slug", "department__slug")),
        caps={
            (cap.department.slug, cap.flavour): to_units(float(cap.cap))
            for cap in DepartmentCap.objects.select_related("department")
        },
        capacity=dict(capacity),
    )


def department_guaranteed(department_id: int, flavour: str, *, excluding_team: int | None = None) -> Decimal:
    """What the teams of a department are guaranteed of ``flavour`` together (optionally leaving one out)."""
    rows = TeamQuota.objects.filter(team__department=department_id, flavour=flavour)
    if excluding_team is not None:
        rows = rows.exclude(team=excluding_team)
    return rows.aggregate(total=Sum("guaranteed"))["total"] or ZERO
