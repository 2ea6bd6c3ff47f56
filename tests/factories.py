"""Small factories for test data: unique defaults, explicit overrides (no fixture dumps)."""

from __future__ import annotations

import itertools
from typing import Any

from rest_framework.authtoken.models import Token

from portal.models import Department, Membership, OrgRole, Team, User
from workspaces.models import GpuOffering, Workspace

_seq = itertools.count(1)
PASSWORD = "correct-horse-battery"


def make_user(username: str | None = None, **fields: Any) -> User:
    n = next(_seq)
    return User.objects.create_user(username=username or f"user{n}", password=PASSWORD, **fields)


def make_department(**fields: Any) -> Department:
    n = next(_seq)
    defaults = {"name": f"Department {n}", "slug": f"dept-{n}", "cost_centre": f"CC-{n}"}
    return Department.objects.create(**(defaults | fields))


def make_team(department: Department | None = None, **fields: Any) -> Team:
    n = next(_seq)
    defaults = {"name": f"Team {n}", "slug": f"team-{n}"}
    return Team.objects.create(department=department or make_department(), **(defaults | fields))


def add_member(team: Team, user: User, role: str = Membership.Role.MEMBER) -> Membership:
    return Membership.objects.create(team=team, user=user, role=role)


def grant(user: User, role: str) -> User:
    OrgRole.objects.create(user=user, role=role)
    return user


def token_for(user: User) -> str:
    return str(Token.objects.get_or_create(user=user)[0].key)


def make_workspace(team: Team, owner: User, offering: GpuOffering, **fields: Any) -> Workspace:
    """A queued one-unit notebook on ``offering``, as a request would leave it; override what a test is about."""
    defaults: dict[str, Any] = {
        "name": f"ws-{next(_seq)}",
        "kind": Workspace.Kind.NOTEBOOK,
        "gpu_count": 1 if offering.gpu_equivalents else 0,
        "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
        "cpu_millis": 1000,
        "memory_mib": 1024,
        "max_runtime_seconds": 3600,
        "gpu_equivalents": offering.gpu_equivalents,
        "priority": Workspace.Priority.INTERACTIVE,
    }
    return Workspace.objects.create(team=team, owner=owner, offering=offering, **(defaults | fields))
