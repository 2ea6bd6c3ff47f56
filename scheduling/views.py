"""Pages for the queue and for a team's quota and policies."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, Sum
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal import access
from portal.alerts.views import live_stalls
from portal.billing import charts as billing_charts
from portal.http import AuthenticatedRequest
from portal.models import Team
from scheduling import activity, charts, utilisation
from scheduling.kube.calls import KubeError
from scheduling.kube.client import KubeNotConfigured, kube
from scheduling.kube.keys import DEVICE_PREFIX, MIG_REPARTITION
from scheduling.loops import mig_repartition
from scheduling.models import DepartmentCap, MemberCap, TeamQuota
from scheduling.node_gpus import capacity_by_model, read_node
from scheduling.queue_view import queue_entries
from scheduling.quota import actions as quota_actions
from scheduling.quota import rules as quota
from workspaces.models import GpuOffering, Workspace


@login_required
def queue_page(request: AuthenticatedRequest) -> HttpResponse:
    entries = queue_entries(request.user)
    for entry in entries:
        entry["estimate"] = parse_datetime(entry["estimated_start"]) if entry["estimated_start"] else None
    return render(request, "scheduling/queue.html", {"entries": entries})


CHART_DAYS = (1, 7, 30)
DEFAULT_CHART_DAYS = 7


def _chart_days(raw: str | None) -> tuple[int, str]:
    """The chart window asked for with ``?days=``, or the default and a message saying why not."""
    if raw is None:
        return DEFAULT_CHART_DAYS, ""
    try:
        days = int(raw)
    except ValueError:
        days = 0
    if days in CHART_DAYS:
        return days, ""
    return DEFAULT_CHART_DAYS, (
        f"The chart covers 1, 7 or 30 days, not {raw[:20]!r}; showing the last {DEFAULT_CHART_DAYS} days."
    )


def _team_figures(
    team: Team, summary: dict[str, dict[str, Decimal]], limits: dict[str, Decimal], days: int
) -> list[dict[str, Any]]:
    """One figure per flavour: used, borrowed and lent over the last ``days`` days.

    One query for the whole department: the team's own workspaces and its teammates' borrowing ones
    (borrowing stays within a department), whatever the number of teams, workspaces or flavours.
    """
    end = timezone.now()
    start = end - timedelta(days=days)
    rows = (
        Workspace.objects.filter(team__department_id=team.department_id, admitted_at__isnull=False, admitted_at__lt=end)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=start))
        .filter(Q(team_id=team.pk) | Q(borrowing=True))
        .values_list("team_id", "offering__gpu_model", "admitted_at", "finished_at", "gpu_equivalents", "borrowing")
    )
    own: dict[str, list[charts.Interval]] = defaultdict(list)
    others: dict[str, list[charts.Interval]] = defaultdict(list)
    for team_id, flavour, admitted_at, finished_at, units, borrowing in rows:
        if admitted_at is not None:  # filtered above; narrows the type
            (own if team_id == team.pk else others)[flavour].append(
                charts.Interval(admitted_at, finished_at, units, borrowing)
            )
    figures = []
    for flavour, numbers in sorted(summary.items()):
        series = charts.quota_series(own[flavour], others[flavour], numbers["guaranteed"], start, end)
        guaranteed, borrow_limit = float(numbers["guaranteed"]), float(limits.get(flavour, 0))
        if charts.worth_charting(flavour, series, guaranteed, borrow_limit):  # no empty "CPU" chart
            figures.append(charts.quota_figure(flavour, series, guaranteed, borrow_limit))
    return figures


@login_required
def team_quota_page(request: AuthenticatedRequest, team_id: int) -> HttpResponse:
    team = access.access_team_by_id(request.user, team_id)
    can_manage = access.can_manage_team(request.user, team)
    days, days_error = _chart_days(request.GET.get("days"))
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if not can_manage:
            raise PermissionDenied("Only this team's leads and operators can change its policies.")
        try:
            if request.POST.get("form") == "policy":
                quota_actions.do_set_team_policy(
                    request.user,
                    team,
                    default_runtime_hours=int(request.POST.get("default_runtime_hours") or 0),
                    max_runtime_hours=int(request.POST.get("max_runtime_hours") or 0),
                    allowed_offerings=request.POST.getlist("allowed_offerings"),
                )
            elif request.POST.get("form") == "idle":
                values = {f: int(request.POST[f]) for f in quota_actions.IDLE_FIELDS if request.POST.get(f, "").strip()}
                quota_actions.do_set_idle_policy(request.user, team, **values)
            elif request.POST.get("form") == "member-cap":
                raw = request.POST.get("cap", "").strip()
                quota_actions.do_set_member_cap(
                    request.user, team, request.POST.get("username", ""), request.POST.get("flavour", ""),
                    Decimal(raw) if raw else None,
                )  # fmt: skip
        except ValidationError as exc:
            errors = exc.message_dict
        except (ValueError, ArithmeticError):
            errors = {"__all__": ["Enter whole hours and a number of GPU-equivalents."]}
        else:
            messages.success(request, "Saved.")
            url = reverse("team-quota", args=[team.pk])  # keeps the chart window the lead was looking at
            return redirect(url if days == DEFAULT_CHART_DAYS else f"{url}?days={days}")
    if days_error:
        errors["days"] = [days_error]
    summary = quota.quota_summary(team.pk)
    limits = dict(TeamQuota.objects.filter(team=team).values_list("flavour", "borrow_limit"))
    context = {
        "team": team,
        "can_manage": can_manage,
        "rows": [
            {"flavour": f, "guaranteed": n["guaranteed"], "used": n["used"], "borrow_limit": limits.get(f, Decimal(0))}
            for f, n in sorted(summary.items())
        ],
        "figures": _team_figures(team, summary, limits, days),
        "days": days,
        "day_choices": CHART_DAYS,
        "rules": quota.team_rules(team.pk),
        "offerings": GpuOffering.objects.filter(enabled=True),
        "member_caps": MemberCap.objects.filter(team=team).select_related("user"),
        "members": team.memberships.select_related("user"),
        "idle_fields": quota_actions.idle_fields(team),
        "idle_minute_seconds": settings.IDLE_POLICY_MINUTE_SECONDS,
        "offenders": activity.idle_offenders(team.pk, timezone.now()) if can_manage else [],
        "errors": errors,
    }
    return render(request, "scheduling/team_quota.html", context, status=400 if errors else 200)


def _node_rows(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for node in map(read_node, nodes):
        if node.mig_enabled:
            mode = f"MIG {node.mig_config} ({node.mig_state or '?'})"
        elif node.replicas > 1:
            mode = f"{'MPS' if node.mps else 'time-sliced'} x{node.replicas}"
        else:
            mode = "whole GPUs" if node.product else "CPU only"
        if phase := node.labels.get(MIG_REPARTITION):
            mode += f", repartitioning ({phase})"
        rows.append(
            {
                "name": node.name,
                "product": node.product,
                "count": node.count,
                "mode": mode,
                "resources": ", ".join(
                    f"{k.removeprefix(DEVICE_PREFIX)}: {v}" for k, v in sorted(node.devices.items()) if v
                ),
                "ready": node.ready and not node.cordoned,
            }
        )
    return rows


@login_required
def cluster_page(request: AuthenticatedRequest) -> HttpResponse:
    """Operators: nodes and their GPU modes, capacity per GPU model against the sum of guarantees."""
    access.require_operator(request.user, "see the cluster page")
    try:
        nodes = kube().list("Node", None, "")
        error = ""
    except (KubeError, KubeNotConfigured) as exc:
        nodes, error = [], str(exc)
    capacity = {flavour: Decimal(units) / 1000 for flavour, units in capacity_by_model(map(read_node, nodes)).items()}
    guaranteed = dict(
        TeamQuota.objects.values("flavour").annotate(total=Sum("guaranteed")).values_list("flavour", "total")
    )
    flavours = [
        {
            "flavour": flavour,
            "capacity": capacity.get(flavour, Decimal(0)),
            "guaranteed": guaranteed.get(flavour, Decimal(0)),
            "ratio": (guaranteed.get(flavour, Decimal(0)) / capacity[flavour]) if capacity.get(flavour) else None,
        }
        for flavour in sorted(set(capacity) | set(guaranteed))
    ]
    context = {
        "nodes": _node_rows(nodes),
        "flavours": flavours,
        "activity": sorted(activity.active_by_model(timezone.now()).items()),
        "caps": DepartmentCap.objects.select_related("department"),
        "repartitions": mig_repartition.recent_repartitions(),
        "repartition_enabled": settings.MIG_REPARTITION_ENABLED,
        "error": error,
        # Live, not from the worker's alert check: a dead worker does not report itself stalled.
        "stalls": live_stalls(),
    }
    return render(request, "scheduling/cluster.html", context)


UTILISATION_WINDOWS = {1: timedelta(minutes=15), 7: timedelta(hours=1), 30: timedelta(hours=6)}


@login_required
def utilisation_page(request: AuthenticatedRequest) -> HttpResponse:
    """Operators: GPUs allocated against GPUs active per model over time, and the queue's waits."""
    access.require_operator(request.user, "see the utilisation page")
    days, problem = _chart_days(request.GET.get("days"))
    if problem:
        messages.warning(request, problem)
    step = UTILISATION_WINDOWS[days]
    now = timezone.now()
    end = now - timedelta(seconds=now.timestamp() % step.total_seconds())  # whole buckets only
    start = end - timedelta(days=days)
    found = utilisation.series(start, end, step)
    figures = [
        billing_charts.allocated_vs_active(found.times, found.allocated, found.active),
        billing_charts.queue_wait_percentiles(utilisation.queue_waits(start, now)),
    ]
    context = {
        "days": days,
        "day_choices": CHART_DAYS,
        "step_minutes": int(step.total_seconds() // 60),
        "figures": [f for f in figures if billing_charts.has_data(f)],
    }
    return render(request, "scheduling/utilisation.html", context)
