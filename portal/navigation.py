"""The main menu, derived from the person's roles. One list, so pages and tests agree on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from portal.models import Membership


@dataclass(frozen=True)
class Viewer:
    """What the menu depends on, read once per page: the person and their teams' roles."""

    user: Any
    team_roles: frozenset[str]  # the roles they hold in any team (member, lead); empty when in none

    @classmethod
    def of(cls, user: Any) -> Viewer:
        roles = Membership.objects.filter(user_id=user.pk).order_by().values_list("role", flat=True)  # no join
        return cls(user, frozenset(roles))


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    url_name: str
    shown_to: Callable[[Viewer], bool]


def _anyone(viewer: Viewer) -> bool:
    return True


def _in_a_team(viewer: Viewer) -> bool:
    return bool(viewer.team_roles)


def _sees_teams(viewer: Viewer) -> bool:
    return _in_a_team(viewer) or viewer.user.is_finance or viewer.user.is_operator


def _finance(viewer: Viewer) -> bool:
    return bool(viewer.user.is_finance or viewer.user.is_operator)


def _operator(viewer: Viewer) -> bool:
    return bool(viewer.user.is_operator)


def _alerts(viewer: Viewer) -> bool:
    # As portal.alerts.access.sees_alerts: operators, and the leads of a team.
    return bool(viewer.user.is_operator or (viewer.user.is_active and Membership.Role.LEAD in viewer.team_roles))


def _staff(viewer: Viewer) -> bool:
    return bool(viewer.user.is_staff)


MENU: tuple[NavItem, ...] = (
    NavItem("home", "Home", "home", _anyone),
    NavItem("workspaces", "My workspaces", "workspaces", _in_a_team),
    NavItem("queue", "Queue", "queue", _in_a_team),
    NavItem("teams", "Teams", "teams", _sees_teams),
    NavItem("chargeback", "Chargeback", "chargeback", _finance),
    NavItem("cluster", "Cluster", "cluster", _operator),
    NavItem("alerts", "Alerts", "alerts", _alerts),
    NavItem("api", "API", "api-docs", _anyone),
    NavItem("admin", "Admin", "admin:index", _staff),
)


def menu_for(user: Any) -> list[dict[str, str]]:
    if not getattr(user, "is_authenticated", False):
        return []
    viewer = Viewer.of(user)
    return [
        {"key": item.key, "label": item.label, "url": reverse(item.url_name)} for item in MENU if item.shown_to(viewer)
    ]
