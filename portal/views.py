"""Organisation pages: home, teams. Thin: access functions decide, templates show."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal import access, actions
from portal.http import AuthenticatedRequest
from portal.models import Membership


@login_required
def home(request: AuthenticatedRequest) -> HttpResponse:
    memberships = Membership.objects.filter(user=request.user).select_related("team__department")
    return render(
        request,
        "portal/home.html",
        {"memberships": memberships, "org_roles": sorted(request.user.org_roles())},
    )


@login_required
def team_list(request: AuthenticatedRequest) -> HttpResponse:
    teams = access.teams_visible_to(request.user).prefetch_related("memberships")
    return render(request, "portal/team_list.html", {"teams": teams})


@login_required
def team_detail(request: AuthenticatedRequest, team_id: int) -> HttpResponse:
    team = access.access_team_by_id(request.user, team_id)
    members = list(team.memberships.select_related("user").order_by("-role", "user__username"))
    return render(
        request,
        "portal/team_detail.html",
        {
            "team": team,
            "members": members,
            "my_role": access.role_in_team(request.user, team),
            "can_manage": access.can_manage_team(request.user, team),
            "roles": Membership.Role.choices,
            # The last lead can be neither removed nor demoted (portal.actions): offer neither.
            "lead_count": sum(m.role == Membership.Role.LEAD for m in members),
        },
    )


def _messages_of(exc: ValidationError) -> str:
    return " ".join(exc.messages)


@require_POST
@login_required
def team_members(request: AuthenticatedRequest, team_id: int) -> HttpResponse:
    """The team page's member controls: add by username, change a role, remove. The same access rule and
    actions as the API (``portal.access``, ``portal.actions``), so the same refusals and the same audit."""
    team = access.access_team_for_management(request.user, team_id)
    op = request.POST.get("op")
    username = (request.POST.get("username") or "").strip()
    role = request.POST.get("role") or Membership.Role.MEMBER
    try:
        if not username:
            raise ValidationError({"username": "Give the username of the person."})
        if op == "add":
            membership = actions.do_add_member(request.user, team, username, role)
            messages.success(request, f"Added {username} to {team.name} as {membership.get_role_display().lower()}.")
        elif op == "role":
            membership = actions.do_change_member_role(request.user, team, username, role)
            messages.success(request, f"{username} is now a {membership.get_role_display().lower()} of {team.name}.")
        elif op == "remove":
            actions.do_remove_member(request.user, team, username)
            messages.success(request, f"Removed {username} from {team.name}.")
            if not access.teams_visible_to(request.user).filter(pk=team.pk).exists():
                return redirect("home")  # they removed themselves and no longer see the team
        else:
            raise ValidationError(f"Unknown change {op!r}: add, role or remove.")
    except ValidationError as exc:
        messages.error(request, _messages_of(exc))
    return redirect("team-detail", team_id=team.pk)
