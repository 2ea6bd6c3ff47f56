"""Organisation pages: home, teams. Thin: access functions decide, templates show."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal import access
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
    members = team.memberships.select_related("user").order_by("-role", "user__username")
    return render(
        request,
        "portal/team_detail.html",
        {
            "team": team,
            "members": members,
            "my_role": access.role_in_team(request.user, team),
            "can_manage": access.can_manage_team(request.user, team),
        },
    )


def _placeholder(title: str, text: str) -> Callable[[HttpRequest], HttpResponse]:
    @login_required
    def view(request: HttpRequest) -> HttpResponse:
        return render(request, "portal/placeholder.html", {"title": title, "text": text})

    return view


# Pages that later work fills. They say what will be there, nothing more, so the menu has no dead links.
chargeback_placeholder = _placeholder(
    "Chargeback", "GPU cost per team and cost centre, per month, with CSV and PDF export, will be shown here."
)
