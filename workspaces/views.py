"""Researcher pages: my workspaces, new request, workspace detail. Thin: serializers validate, actions act."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.http import AuthenticatedRequest
from portal.models import Membership
from scheduling import services
from workspaces import access, actions, policy
from workspaces.models import GpuOffering, Image, Workspace
from workspaces.serializers import WorkspaceRequestSerializer
from workspaces.tokens import jupyter_token


@login_required
def workspace_list(request: AuthenticatedRequest) -> HttpResponse:
    return render(request, "workspaces/list.html", {})


def _form_context(request: AuthenticatedRequest) -> dict[str, Any]:
    offerings = list(GpuOffering.objects.filter(enabled=True))
    free = services.free_units(offerings)
    teams = [m.team for m in Membership.objects.filter(user=request.user).select_related("team")]
    summaries = services.quota_summaries(team.pk for team in teams)
    rows = []
    for offering in offerings:
        left = {}
        for team in teams:
            numbers = summaries.get((team.pk, offering.flavour), {})
            left[team.slug] = max(Decimal(0), numbers.get("guaranteed", Decimal(0)) - numbers.get("used", Decimal(0)))
        needs_quota = offering.kind != GpuOffering.Kind.CPU
        rows.append({"offering": offering, "free": free.get(offering.slug), "quota_left": left if needs_quota else {}})
    return {
        "offerings": rows,
        "teams": teams,
        "notebook_images": Image.objects.filter(enabled=True, kind=Image.Kind.NOTEBOOK),
        "job_images": Image.objects.filter(enabled=True, kind=Image.Kind.JOB),
        "limits": policy.limits(),
    }


def _parse_form(post: Any) -> dict[str, Any]:
    data: dict[str, Any] = {k: post.get(k) for k in ("kind", "name", "team", "offering", "image") if post.get(k)}
    for number in ("gpu_count", "workers", "max_runtime_hours", "home_volume_gib"):
        if post.get(number):
            data[number] = post.get(number)
    if post.get("command"):
        data["command"] = post.get("command").split()
    env: dict[str, str] = {}
    for line in (post.get("env") or "").splitlines():
        if line.strip():
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    data["env"] = env
    return data


@login_required
def workspace_new(request: AuthenticatedRequest) -> HttpResponse:
    errors: dict[str, Any] = {}
    values: dict[str, Any] = {"kind": "notebook", "gpu_count": 1, "workers": 1, "home_volume_gib": 10}
    if request.method == "POST":
        values = dict(request.POST.items())
        payload = WorkspaceRequestSerializer(data=_parse_form(request.POST), context={"request": request})
        if payload.is_valid():
            try:
                workspace = actions.do_request_workspace(request.user, payload.validated_data)
            except ValidationError as exc:
                errors = exc.message_dict
            else:
                messages.success(request, f"Requested {workspace.name}; it is queued.")
                return redirect("workspace-detail", workspace_id=workspace.pk)
        else:
            errors = {field: [str(e) for e in errs] for field, errs in payload.errors.items()}
    context = _form_context(request) | {"errors": errors, "values": values}
    return render(request, "workspaces/new.html", context, status=400 if errors else 200)


@login_required
def workspace_detail(request: AuthenticatedRequest, workspace_id: int) -> HttpResponse:
    workspace = access.access_workspace_by_id(request.user, workspace_id)
    context: dict[str, Any] = {
        "workspace": workspace,
        "events": workspace.events.all(),
        "can_change": access.can_change_workspace(request.user, workspace),
        "is_owner": workspace.owner_id == request.user.pk,
        "notebook_url": None,
        "can_stop": workspace.state in (Workspace.State.QUEUED, *Workspace.ACTIVE_STATES),
        "can_resume": workspace.state in Workspace.RESUMABLE_STATES,
        "can_extend": workspace.state == Workspace.State.RUNNING,
        "can_delete": workspace.state != Workspace.State.DELETED,
    }
    if context["is_owner"] and workspace.kind == Workspace.Kind.NOTEBOOK and workspace.state == Workspace.State.RUNNING:
        context["notebook_url"] = services.notebook_url(workspace, jupyter_token(workspace))
    return render(request, "workspaces/detail.html", context)


@require_POST
@login_required
def workspace_action(request: AuthenticatedRequest, workspace_id: int, verb: str) -> HttpResponse:
    workspace = access.access_workspace_for_change(request.user, workspace_id)
    verbs = {"stop": actions.do_stop, "resume": actions.do_resume, "delete": actions.do_delete}
    try:
        if verb == "extend":
            actions.do_extend(request.user, workspace, int(request.POST.get("hours") or 0))
        elif verb in verbs:
            verbs[verb](request.user, workspace)
        else:
            messages.error(request, f"Unknown action {verb!r}.")
    except (ValidationError, ValueError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("workspace-detail", workspace_id=workspace.pk)
