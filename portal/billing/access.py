"""Who may see and change billing: finance and operators read everything and set prices and budgets;
finance closes months; leads read their teams' costs and budgets; members their own use and their teams'
totals. Everyone else sees nothing (views answer 404 for what is out of reach)."""

from __future__ import annotations

from typing import Any

from portal.models import Membership, Team


def _signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_active)


def reads_all(user: Any) -> bool:
    return _signed_in(user) and bool(user.is_finance or user.is_operator)


def can_set_prices(user: Any) -> bool:
    return reads_all(user)


def can_set_budgets(user: Any) -> bool:
    return reads_all(user)


def can_close_months(user: Any) -> bool:
    return _signed_in(user) and bool(user.is_finance)


def led_team_ids(user: Any) -> set[int]:
    if not _signed_in(user):
        return set()
    return set(Membership.objects.filter(user=user, role=Membership.Role.LEAD).values_list("team_id", flat=True))


def member_team_ids(user: Any) -> set[int]:
    if not _signed_in(user):
        return set()
    return set(Membership.objects.filter(user=user).values_list("team_id", flat=True))


def team_cost_scope(user: Any, team: Team) -> str | None:
    """How much of a team's costs ``user`` sees: "all" (per member), "own" (the team's totals and their own
    line), or None."""
    if reads_all(user) or team.pk in led_team_ids(user):
        return "all"
    if team.pk in member_team_ids(user):
        return "own"
    return None
