"""Billing pages: finance's chargeback with its exports and month closing, the rate card, budgets, and a
team's costs. Thin: they read the choice, ask ``report``/``budgets``/``actions``, and render."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from portal import access as portal_access
from portal.billing import access, actions, budgets, charts, choices, closing, exports, periods, report, sums
from portal.billing.ledger import rate_card, zone
from portal.billing.models import Budget, ClosedMonth, RateCardEntry
from portal.billing.rates import MODEL_PRICE, shape_key
from portal.http import AuthenticatedRequest
from portal.models import Team
from workspaces.models import GpuOffering

TREND_MONTHS = 12


def _messages_of(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return " ".join(m for msgs in exc.message_dict.values() for m in msgs)
    return " ".join(exc.messages)


def _finance_only(request: AuthenticatedRequest) -> None:
    if not access.reads_all(request.user):
        raise Http404("No such page.")


def _monthly_figures(last: date, currency: str) -> list[dict[str, Any]]:
    """Twelve months: cost per cost centre and month, the total with its idle share, cost per team."""
    months = choices.recent_months(last, TREND_MONTHS)
    costs = sums.monthly(months[0], months[-1], ["cost_centre", "team"])
    figures = []
    for group in ("cost_centre", "team"):
        names = sums.labels(group, {key for _, key in costs[group]})
        by_group: dict[str, list[Decimal]] = {}
        totals = [Decimal(0)] * len(months)
        idle = [Decimal(0)] * len(months)
        for (month, key), cost in costs[group].items():
            index = months.index(month)
            label = names.get(key, [key, key, ""])[1]
            by_group.setdefault(label, [Decimal(0)] * len(months))[index] += report.cents(cost.money)
            totals[index] += report.cents(cost.money)
            idle[index] += report.cents(cost.idle_money)
        title = f"Cost per {choices.GROUP_LABELS[group].lower()} and month"
        figures.append(charts.cost_by_month(months, by_group, currency, title))
        if group == "cost_centre":
            figures.append(charts.monthly_trend(months, totals, idle, currency))
    return figures


@login_required
def chargeback_page(request: AuthenticatedRequest) -> HttpResponse:
    _finance_only(request)
    choice = choices.read(request.GET)
    for problem in choice.problems:
        messages.warning(request, problem)
    built = report.build(
        choice.start, choice.end, group=choice.group, mode=choice.mode, spread_unallocated=choice.spread
    )
    month = choice.month or choices.this_month()
    figures = [
        charts.top_spenders(built.lines, built.currency),
        charts.idle_cost_share(built.lines, built.currency),
        *_monthly_figures(month, built.currency),
    ]
    ended = choice.month is not None and periods.month_bounds(choice.month, zone())[1] <= timezone.now()
    context = {
        "choice": choice,
        "report": built,
        "figures": [f for f in figures if charts.has_data(f)],
        "groups": choices.GROUP_LABELS,
        "group_label": choices.GROUP_LABELS[choice.group],
        "modes": choices.MODE_LABELS,
        "months": choices.recent_months(choices.this_month(), TREND_MONTHS)[::-1],
        "exports": {
            fmt: f"{reverse('chargeback-export', args=[fmt])}?{urlencode(choice.query())}" for fmt in _EXPORTERS
        },
        "can_close": access.can_close_months(request.user) and ended and built.closed_at is None,
        "closed": ClosedMonth.objects.filter(period=choice.month).first() if choice.month else None,
        "unallocated_shown": built.mode == report.Mode.FULL,
    }
    return render(request, "billing/chargeback.html", context)


@login_required
def chargeback_export(request: AuthenticatedRequest, fmt: str) -> HttpResponse:
    _finance_only(request)
    if fmt not in _EXPORTERS:
        raise Http404("No such export.")
    choice = choices.read(request.GET)
    if choice.problems:
        return HttpResponse(" ".join(choice.problems), status=400, content_type="text/plain; charset=utf-8")
    built = report.build(
        choice.start, choice.end, group=choice.group, mode=choice.mode, spread_unallocated=choice.spread
    )
    return export_response(built, fmt, f"Chargeback, {choice.label}")


def export_response(built: report.Report, fmt: str, title: str) -> HttpResponse:
    content_type, render_it = _EXPORTERS[fmt]
    response = HttpResponse(render_it(built, title), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{exports.filename(built, fmt)}"'
    return response


_EXPORTERS: dict[str, tuple[str, Callable[[report.Report, str], bytes]]] = {
    "csv": ("text/csv; charset=utf-8", lambda r, _: exports.to_csv(r)),
    "xlsx": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", lambda r, _: exports.to_xlsx(r)),
    "pdf": ("application/pdf", lambda r, title: exports.to_pdf(r, title=title)),
}


@login_required
@require_POST
def close_month(request: AuthenticatedRequest) -> HttpResponse:
    month = choices.read({"month": request.POST.get("month", "")})
    try:
        if month.problems:
            raise ValidationError(month.problems[0])
        assert month.month is not None
        closing.close_month(request.user, month.month)
        messages.success(request, f"{month.label} is closed: its figures and exports no longer change.")
    except PermissionDenied:
        raise Http404("No such page.") from None
    except ValidationError as exc:
        messages.error(request, _messages_of(exc))
    return redirect(f"{reverse('chargeback')}?month={request.POST.get('month', '')[:7]}")


# -- rate card ----------------------------------------------------------------------------------------


def _price_rows(now: datetime) -> list[dict[str, Any]]:
    """Per offering: the price of one unit in effect now, and whether it follows from the model's price."""
    card = rate_card()
    rows = []
    for offering in GpuOffering.objects.exclude(kind=GpuOffering.Kind.CPU).order_by("gpu_model", "kind", "slug"):
        shape = shape_key(offering.kind, offering.mig_profile, offering.replicas)
        rows.append(
            {
                "offering": offering,
                "shape": shape,
                "price": card.unit_price(offering.gpu_model, shape, offering.gpu_equivalents, now),
                "derived": card.own_price(offering.gpu_model, shape, now) is None,
            }
        )
    return rows


@login_required
def rates_page(request: AuthenticatedRequest) -> HttpResponse:
    _finance_only(request)
    now = timezone.now()
    if request.method == "POST":
        try:
            if request.POST.get("op") == "withdraw":
                actions.withdraw_price(request.user, int(request.POST.get("entry", "0") or 0))
                messages.success(request, "The scheduled price was withdrawn.")
            else:
                starts = request.POST.get("effective_from", "").strip()
                actions.set_price(
                    request.user,
                    gpu_model=request.POST.get("gpu_model", ""),
                    shape=request.POST.get("shape", MODEL_PRICE),
                    hourly_price=request.POST.get("hourly_price", ""),
                    effective_from=_local_datetime(starts) if starts else None,
                    note=request.POST.get("note", ""),
                )
                messages.success(request, "Price saved.")
            return redirect("chargeback-rates")
        except ValidationError as exc:
            messages.error(request, _messages_of(exc))
        except ValueError:
            messages.error(request, "That is not a price on the card.")
    entries = RateCardEntry.objects.select_related("created_by").order_by("gpu_model", "shape", "-effective_from")
    models = sorted(set(GpuOffering.objects.exclude(gpu_model="").values_list("gpu_model", flat=True)))
    context = {
        "rows": _price_rows(now),
        "entries": entries,
        "now": now,
        "gpu_models": models,
        "currency": settings.BILLING_CURRENCY,
        "can_edit": access.can_set_prices(request.user),
    }
    return render(request, "billing/rates.html", context)


def _local_datetime(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            {"effective_from": f"{text[:30]!r} is not a date and time like 2026-04-01T00:00."}
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone())


# -- budgets ------------------------------------------------------------------------------------------


@login_required
def budgets_page(request: AuthenticatedRequest) -> HttpResponse:
    _finance_only(request)
    if request.method == "POST":
        team = portal_access.access_team_by_id(request.user, request.POST.get("team", ""))
        try:
            if request.POST.get("op") == "remove":
                actions.remove_budget(request.user, team)
                messages.success(request, f"{team.name} has no budget now.")
            else:
                actions.set_budget(
                    request.user,
                    team,
                    amount=request.POST.get("amount", ""),
                    unit=request.POST.get("unit", ""),
                    policy=request.POST.get("policy", ""),
                )
                messages.success(request, f"Budget of {team.name} saved.")
            return redirect("chargeback-budgets")
        except ValidationError as exc:
            messages.error(request, _messages_of(exc))
    now = timezone.now()
    status = budgets.statuses(now)
    spent = budgets.spend_this_month(now)
    teams = Team.objects.select_related("department", "budget").order_by("department__name", "name")
    rows = [{"team": t, "budget": getattr(t, "budget", None), "status": status.get(t.pk),
             "spent": spent.get(t.pk)} for t in teams]  # fmt: skip
    context = {
        "rows": rows,
        "month": choices.this_month(),
        "currency": settings.BILLING_CURRENCY,
        "units": Budget.Unit.choices,
        "policies": Budget.Policy.choices,
        "can_edit": access.can_set_budgets(request.user),
    }
    return render(request, "billing/budgets.html", context)


# -- a team's costs -----------------------------------------------------------------------------------


def burndown(status: budgets.BudgetStatus, team_id: int, now: datetime) -> dict[str, Any]:
    """Cumulative spend per day of the month against the budget."""
    start, end = periods.month_bounds(status.month, zone())
    daily = sums.daily(start, min(now, end), team_id, status.unit)
    days, cumulative, total = [], [], Decimal(0)
    for day, amount in daily:
        total += amount
        days.append(day)
        cumulative.append(total)
    last_day = (end - timedelta(days=1)).astimezone(zone()).date()
    unit = "GPU-h" if status.unit == Budget.Unit.GPU_HOURS else settings.BILLING_CURRENCY
    return charts.budget_burndown(days, cumulative, status.amount, status.forecast, unit, last_day)


@login_required
def team_costs(request: AuthenticatedRequest, team_id: int) -> HttpResponse:
    team = portal_access.access_team_by_id(request.user, team_id)
    scope = access.team_cost_scope(request.user, team)
    if scope is None:
        raise Http404("No such team.")
    choice = choices.read(choices.period_only(request.GET), default_group="user")
    for problem in choice.problems:
        messages.warning(request, problem)
    own = request.user.pk if scope == "own" else None
    team_report = report.build(choice.start, choice.end, group="team", teams=[team.pk])
    members = report.build(choice.start, choice.end, group="user", teams=[team.pk], user=own)
    now = timezone.now()
    status = budgets.statuses(now, [team.pk]).get(team.pk)
    figures = [charts.member_usage(members.lines)]
    if status is not None and (choice.month is None or choice.month == status.month):
        figures.append(burndown(status, team.pk, now))
    context = {
        "team": team,
        "choice": choice,
        "scope": scope,
        "totals": team_report.lines[0] if team_report.lines else None,
        "adjustments": team_report.adjustments,
        "members": members,
        "status": status,
        "figures": [f for f in figures if charts.has_data(f)],
        "months": choices.recent_months(choices.this_month(), TREND_MONTHS)[::-1],
        "currency": settings.BILLING_CURRENCY,
    }
    return render(request, "billing/team_costs.html", context)
