"""The one place that decides who may see or change organisation objects.

Views and API call these functions instead of querying models directly. "Missing" and "not yours" both
raise ``Http404`` so that nobody learns what exists outside their reach; ``PermissionDenied`` (403) is
only raised for objects the person may see but not change.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404

from portal.models import Membership, Team


def teams_visible_to(user: Any) -> Any:
    return Team.objects.visible_to(user).select_related("department")


def access_team_by_id(user: Any, team_id: int | str) -> Team:
    try:
        team: Team = teams_visible_to(user).get(pk=int(team_id))
    except (Team.DoesNotExist, ValueError, TypeError):
        raise Http404("No such team.") from None
    return team


def _signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_active)


def is_operator(user: Any) -> bool:
    """Operators run the cluster: they see every team and set quotas, caps and the catalogue."""
    return _signed_in(user) and bool(user.is_operator)


def require_operator(user: Any, what: str) -> None:
    if not is_operator(user):
        raise PermissionDenied(f"Only operators can {what}.")


def manages_with_role(user: Any, role: str | None) -> bool:
    """:func:`can_manage_team` for a caller whose role in the team is already known (no query)."""
    return is_operator(user) or (_signed_in(user) and role == Membership.Role.LEAD)


def can_manage_team(user: Any, team: Team) -> bool:
    """Leads manage their own team; operators manage every team."""
    if is_operator(user):
        return True
    return _signed_in(user) and Membership.objects.filter(team=team, user=user, role=Membership.Role.LEAD).exists()


def access_team_for_management(user: Any, team_id: int | str) -> Team:
    team = access_team_by_id(user, team_id)
    if not can_manage_team(user, team):
        raise PermissionDenied("Only this team's leads and operators can change its members.")
    return team


def role_in_team(user: Any, team: Team) -> str | None:
    membership = Membership.objects.filter(team=team, user=user).only("role").first()
    return membership.role if membership else None
