"""Researcher pages: my workspaces, new request, workspace detail. Thin: serializers validate, actions act."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from portal import conditional
from portal.billing import costs
from portal.http import AuthenticatedRequest
from portal.models import Membership
from scheduling import services
from workspaces import access, actions, form_choices, freshness, row_fragments
from workspaces.deadlines import workspace_deadline
from workspaces.models import Workspace
from workspaces.serializers import WorkspaceRequestSerializer
from workspaces.tokens import jupyter_token

# Rows on the list page, newest first: a first screen by default (rendering rows is most of the page's cost,
# and it refreshes every 2 s), more on asking (?show=N, up to the most); the API pages through any number.
LIST_ROWS = 50
LIST_ROWS_MOST = 1000


@login_required
def workspace_list(request: AuthenticatedRequest) -> HttpResponseBase:
    """Workspaces of the viewer's teams (all for finance and operators), each with only the actions its
    viewer may take. ``?rows=1`` answers just the table's rows: the page's script redraws them with it every
    2 s, so they carry an ETag and an unchanged table answers 304 (``workspaces/freshness.py``)."""
    raw = request.GET.get("show", str(LIST_ROWS))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= LIST_ROWS_MOST:
        return HttpResponseBadRequest(
            f"show: a whole number of rows from 1 to {LIST_ROWS_MOST}.", content_type="text/plain"
        )
    count = int(raw)
    led = access.teams_led_by(request.user)
    visible = access.workspaces_visible_to(request.user).exclude(state=Workspace.State.DELETED)
    shown = visible[:count]
    if not request.GET.get("rows"):
        more = min(count * 2, LIST_ROWS_MOST) if count < LIST_ROWS_MOST and visible[count:].exists() else None
        return _workspace_list(request, shown, led, "workspaces/list.html", {"show": count, "show_more": more})
    found = freshness.shown(shown)
    as_of = freshness.as_of(request)
    cost = costs.workspace_costs(found.ids, upto=as_of)
    tag = freshness.tag(request, found, cost, led=led, activity_as_of=as_of)
    return conditional.answer(
        request, tag, lambda: _workspace_list(request, shown, led, "workspaces/_rows.html", cost=cost)
    )


def _workspace_list(
    request: AuthenticatedRequest,
    shown: QuerySet[Workspace],
    led: set[int],
    template: str,
    page: dict[str, Any] | None = None,
    cost: dict[int, Decimal] | None = None,
) -> HttpResponse:
    """``cost``: the rows' costs where the caller has read them already (for the tag)."""
    user = request.user
    visible = list(shown)
    now = timezone.now()
    activity = services.workspace_activity(visible, now)
    if cost is None:
        cost = costs.workspace_costs((ws.pk for ws in visible), upto=freshness.as_of(request))
    rows = [
        {
            "workspace": ws,
            "actions": access.allowed_actions(user, ws, led=led),
            "ends_at": _ends_at(ws),
            "activity": activity.get(ws.pk),
            "cost": cost.get(ws.pk),
        }
        for ws in visible
    ]
    context: dict[str, Any] = {"rows_html": row_fragments.render_rows(request, rows, now)}
    if page is not None:  # the page around the rows
        context |= page | {
            "can_request": access.can_request_workspace(user),
            "month_total": costs.month_total(user.pk, now),
            "currency": settings.BILLING_CURRENCY,
        }
    return render(request, template, context)


def _ends_at(workspace: Workspace) -> Any:
    """When a running workspace is stopped at its runtime limit (None for any other state)."""
    return workspace_deadline(workspace) if workspace.state == Workspace.State.RUNNING else None


def _form_context(request: AuthenticatedRequest, values: dict[str, Any]) -> dict[str, Any]:
    """What the form offers the member, per team (see ``workspaces.form_choices``)."""
    return form_choices.form_context(request.user, values.get("team"), values.get("offering"))


def _parse_form(post: Any) -> dict[str, Any]:
    data: dict[str, Any] = {k: post.get(k) for k in ("kind", "name", "team", "offering", "image") if post.get(k)}
    for number in ("gpu_count", "workers", "max_runtime_hours", "home_volume_gib"):
        if post.get(number):
            data[number] = post.get(number)
    if post.get("min_workers") and post.get("kind") == Workspace.Kind.JOB:  # only jobs are elastic
        data["min_workers"] = post.get("min_workers")
    if post.get("command"):
        data["command"] = post.get("command").split()
    if post.get("priority") and post.get("kind") == Workspace.Kind.JOB:  # notebooks are always interactive
        data["priority"] = post.get("priority")
    env: dict[str, str] = {}
    for line in (post.get("env") or "").splitlines():
        if line.strip():
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    data["env"] = env
    return data


@login_required
def workspace_new(request: AuthenticatedRequest) -> HttpResponse:
    if not Membership.objects.filter(user=request.user).exists():
        # Someone in no team cannot request anything: say so and who can add them, instead of an empty form.
        context = {"no_team": True, "operators": form_choices.who_adds_members()}
        return render(request, "workspaces/new.html", context, status=403 if request.method == "POST" else 200)
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
    context = _form_context(request, values) | {"errors": errors, "values": values}
    return render(request, "workspaces/new.html", context, status=400 if errors else 200)


@login_required
def workspace_detail(request: AuthenticatedRequest, workspace_id: int) -> HttpResponse:
    workspace = access.access_workspace_by_id(request.user, workspace_id)
    verbs = access.allowed_actions(request.user, workspace)  # the rules the actions enforce
    context: dict[str, Any] = {
        "workspace": workspace,
        "events": workspace.events.all(),
        "can_change": bool(verbs),
        "is_owner": workspace.owner_id == request.user.pk,
        "notebook_url": None,
        "can_stop": "stop" in verbs,
        "can_resume": "resume" in verbs,
        "can_extend": "extend" in verbs,
        "can_delete": "delete" in verbs,
        # Delete asks first: its button links here with ?confirm=delete, which shows the real form.
        "confirm_delete": "delete" in verbs and request.GET.get("confirm") == "delete",
        "ends_at": _ends_at(workspace),
        "cost_so_far": costs.workspace_costs([workspace.pk]).get(workspace.pk),
        "hourly_rate": costs.hourly_rate(workspace.pk),
        "currency": settings.BILLING_CURRENCY,
        "size_history": workspace.size_history(),
    }
    context |= _activity_context(workspace, is_owner=context["is_owner"])
    if context["is_owner"] and workspace.kind == Workspace.Kind.NOTEBOOK and workspace.state == Workspace.State.RUNNING:
        context["notebook_url"] = services.notebook_url(workspace, jupyter_token(workspace))
    return render(request, "workspaces/detail.html", context)


def _activity_context(workspace: Workspace, *, is_owner: bool) -> dict[str, Any]:
    """The running workspace's telemetry, idle banner and sparkline; keep-alive only for its owner."""
    now = timezone.now()
    activity = services.workspace_activity([workspace], now).get(workspace.pk)
    if activity is None:
        return {"activity": None}
    threshold = services.idle_rules(workspace.team_id).policy.threshold
    points = services.workspace_series(workspace, now)
    memory = ""
    if activity.fb_used_mib is not None:
        total = f" of {activity.fb_total_mib / 1024:.1f}" if activity.fb_total_mib else ""
        memory = f"{activity.fb_used_mib / 1024:.1f}{total} GiB"
    return {
        "activity": activity,
        "gpu_percent": None if activity.gpu_active is None else f"{100 * activity.gpu_active:.0f} %",
        "gpu_memory": memory,
        "sparkline": services.activity_sparkline(points, activity.fb_total_mib, threshold) if points else None,
        "can_keep_alive": is_owner and workspace.kind == Workspace.Kind.NOTEBOOK and activity.keep_alives_left > 0,
    }


@require_POST
@login_required
def workspace_action(request: AuthenticatedRequest, workspace_id: int, verb: str) -> HttpResponse:
    workspace = access.access_workspace_for_change(request.user, workspace_id)
    verbs = {
        "stop": actions.do_stop,
        "resume": actions.do_resume,
        "delete": actions.do_delete,
        "keep-alive": actions.do_keep_alive,
    }
    try:
        if verb == "extend":
            actions.do_extend(request.user, workspace, int(request.POST.get("hours") or 0))
        elif verb in verbs:
            changed = verbs[verb](request.user, workspace)
            if verb == "keep-alive":
                messages.success(request, f"Kept alive until {changed.kept_alive_until:%H:%M} UTC.")
        else:
            messages.error(request, f"Unknown action {verb!r}.")
    except (ValidationError, ValueError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("workspace-detail", workspace_id=workspace.pk)
