"""The one place that decides who may see or change a workspace.

Teammates may look at each other's workspaces; only the owner, the team's leads and operators may act on
one. Missing and not-visible both answer 404; visible-but-not-yours answers 403.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404

from portal.access import is_operator
from portal.models import Membership
from workspaces.models import Workspace


def workspaces_visible_to(user: Any) -> Any:
    return Workspace.objects.visible_to(user).select_related("team", "owner", "offering")


def access_workspace_by_id(user: Any, workspace_id: int | str) -> Workspace:
    try:
        workspace: Workspace = workspaces_visible_to(user).get(pk=int(workspace_id))
    except (Workspace.DoesNotExist, ValueError, TypeError):
        raise Http404("No such workspace.") from None
    return workspace


def can_change_workspace(user: Any, workspace: Workspace) -> bool:
    if is_operator(user):
        return True
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if workspace.owner_id == user.pk:
        return True
    return Membership.objects.filter(team_id=workspace.team_id, user=user, role=Membership.Role.LEAD).exists()


def access_workspace_for_change(user: Any, workspace_id: int | str) -> Workspace:
    workspace = access_workspace_by_id(user, workspace_id)
    if not can_change_workspace(user, workspace):
        raise PermissionDenied("Only the owner, the team's leads and operators can change this workspace.")
    return workspace
