"""The main menu, derived from the person's roles. One list, so pages and tests agree on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from portal.alerts.access import sees_alerts


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    url_name: str
    shown_to: Callable[[Any], bool]


def _anyone(user: Any) -> bool:
    return True


def _in_a_team(user: Any) -> bool:
    return bool(user.memberships.exists())


def _sees_teams(user: Any) -> bool:
    return _in_a_team(user) or user.is_finance or user.is_operator


def _finance(user: Any) -> bool:
    return bool(user.is_finance or user.is_operator)


def _operator(user: Any) -> bool:
    return bool(user.is_operator)


def _staff(user: Any) -> bool:
    return bool(user.is_staff)


MENU: tuple[NavItem, ...] = (
    NavItem("home", "Home", "home", _anyone),
    NavItem("workspaces", "My workspaces", "workspaces", _in_a_team),
    NavItem("queue", "Queue", "queue", _in_a_team),
    NavItem("teams", "Teams", "teams", _sees_teams),
    NavItem("chargeback", "Chargeback", "chargeback", _finance),
    NavItem("cluster", "Cluster", "cluster", _operator),
    NavItem("alerts", "Alerts", "alerts", sees_alerts),
    NavItem("api", "API", "api-docs", _anyone),
    NavItem("admin", "Admin", "admin:index", _staff),
)


def menu_for(user: Any) -> list[dict[str, str]]:
    if not getattr(user, "is_authenticated", False):
        return []
    return [
        {"key": item.key, "label": item.label, "url": reverse(item.url_name)} for item in MENU if item.shown_to(user)
    ]
