"""The one place that decides who may see or change a workspace.

Teammates may look at each other's workspaces; only the owner, the team's leads and operators may act on
one. Missing and not-visible both answer 404; visible-but-not-yours answers 403.

:func:`allowed_actions` is what a page offers: the same two rules the actions enforce, who
(:func:`can_change_workspace`) and in which state (:func:`state_allows`, which the actions call too).
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


def can_change_workspace(user: Any, workspace: Workspace, *, led: set[int] | None = None) -> bool:
    """The owner, the team's leads and operators. ``led``: the ids of the teams ``user`` leads, when the
    caller already has them (:func:`teams_led_by`, one query for a whole list), else asked here."""
    if is_operator(user):
        return True
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if workspace.owner_id == user.pk:
        return True
    if led is not None:
        return workspace.team_id in led
    return Membership.objects.filter(team_id=workspace.team_id, user=user, role=Membership.Role.LEAD).exists()


# The states each lifecycle action accepts. ``workspaces.actions`` refuses the others with this rule, and
# pages offer a button only where it holds, so nothing is offered that the action would refuse.
_STATE_RULES: dict[str, tuple[str, ...]] = {
    "stop": (Workspace.State.QUEUED, *Workspace.ACTIVE_STATES),
    "resume": Workspace.RESUMABLE_STATES,
    "extend": (
        Workspace.State.QUEUED,
        Workspace.State.ADMITTED,
        Workspace.State.PROVISIONING,
        Workspace.State.RUNNING,
    ),
    "delete": tuple(s for s in Workspace.State.values if s != Workspace.State.DELETED),
}
ACTIONS = tuple(_STATE_RULES)


def state_allows(workspace: Workspace, verb: str) -> bool:
    """Whether ``verb`` (stop, resume, extend, delete) applies to the workspace in its current state."""
    return workspace.state in _STATE_RULES.get(verb, ())


def allowed_actions(user: Any, workspace: Workspace, *, led: set[int] | None = None) -> frozenset[str]:
    """The lifecycle actions ``user`` may take on ``workspace`` now (``led`` as for
    :func:`can_change_workspace`)."""
    if not can_change_workspace(user, workspace, led=led):
        return frozenset()
    return frozenset(verb for verb in ACTIONS if state_allows(workspace, verb))


def teams_led_by(user: Any) -> set[int]:
    """Ids of the teams ``user`` leads (one query, for pages that ask about many workspaces)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return set()
    leads = Membership.objects.filter(user=user, role=Membership.Role.LEAD).order_by()  # no join for the order
    return set(leads.values_list("team_id", flat=True))


def can_request_workspace(user: Any) -> bool:
    """Requests are made for a team: only people in one may ask (the request checks the team itself)."""
    return bool(getattr(user, "is_authenticated", False) and Membership.objects.filter(user=user).exists())


def access_workspace_for_change(user: Any, workspace_id: int | str) -> Workspace:
    workspace = access_workspace_by_id(user, workspace_id)
    if not can_change_workspace(user, workspace):
        raise PermissionDenied("Only the owner, the team's leads and operators can change this workspace.")
    return workspace
