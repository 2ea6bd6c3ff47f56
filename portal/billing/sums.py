"""The ledger summed for a period: what every report of it is assembled from (``portal/billing/report.py``).

Two aggregate queries whatever the number of teams or intervals: usage per finest key (cost centre,
department, team, user, offering, GPU model, adjusted month) and the fleet per GPU model. A calendar month is
summed by booking: the rows charged in it (its own usage and late usage of closed months, as adjustments).
Any other period is summed by time: every interval clipped to it, adjustments counted when they happened.

The result is plain JSON-able data, which is also what closing a month stores (``portal/billing/closing.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import ExpressionWrapper, F, FloatField, Sum, Value
from django.db.models.functions import Cast, Greatest, Least

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.models import CapacityInterval, ClosedMonth, UsageInterval
from portal.billing.sql import Seconds
from portal.models import Department, Team, User
from workspaces.models import GpuOffering

GROUPS = ("cost_centre", "department", "team", "user", "offering")
_FIELDS = {
    "cost_centre": "cost_centre",
    "department": "department_id",
    "team": "team_id",
    "user": "user_id",
    "offering": "offering_id",
}
FIGURES = ("eq_seconds", "money_seconds", "used", "idle", "measured")


@dataclass
class Sums:
    """``usage``: one dict per finest key, ids as strings, ``adjusts`` an ISO month or None, figures in
    seconds (``eq_seconds``: seconds x GPU-equivalents; ``money_seconds``: seconds x hourly rate; ``used``,
    ``idle``, ``measured``: GPU-equivalent seconds). ``capacity``: per GPU model, ``gpu_seconds`` and
    ``money_seconds``. ``labels``: per group, key -> [stable key, label, cost centre]."""

    start: datetime
    end: datetime
    month: date | None
    usage: list[dict[str, Any]]
    capacity: dict[str, dict[str, float]]
    labels: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def calendar_month(start: datetime, end: datetime) -> date | None:
    """The month [start, end) is, exactly, in the portal's time zone; None for any other period."""
    month = periods.month_of(start, zone())
    return month if (start, end) == periods.month_bounds(month, zone()) else None


def _float(expression: Any) -> Any:
    return ExpressionWrapper(expression, output_field=FloatField())


def _usage(start: datetime, end: datetime, month: date | None) -> list[dict[str, Any]]:
    keys = [*_FIELDS.values(), "gpu_model"]
    if month is not None:
        rows = UsageInterval.objects.filter(period=month)
        clipped: Any = Seconds(F("last_seen_at"), F("started_at"))
        fraction: Any = Value(1.0)
        keys.append("adjusts")
    else:
        tz = zone()
        rows = UsageInterval.objects.filter(
            period__gte=periods.month_of(start, tz),
            period__lte=periods.month_of(end, tz),
            started_at__lt=end,
            last_seen_at__gt=start,
        )
        clipped = Seconds(Least(F("last_seen_at"), Value(end)), Greatest(F("started_at"), Value(start)))
        # The share of an interval inside the period, for its telemetry sums.
        fraction = _float(clipped / Greatest(Seconds(F("last_seen_at"), F("started_at")), Value(1e-9)))
    summed = rows.values(*keys).annotate(
        eq_seconds=Sum(_float(clipped * Cast("gpu_equivalents", FloatField()))),
        money_seconds=Sum(_float(clipped * Cast("rate", FloatField()))),
        used=Sum(_float(F("used_gpu_seconds") * fraction)),
        idle=Sum(_float(F("idle_gpu_seconds") * fraction)),
        measured=Sum(_float(F("measured_gpu_seconds") * fraction)),
    )
    return [
        {
            **{group: str(row[name]) for group, name in _FIELDS.items()},
            "gpu_model": row["gpu_model"],
            "adjusts": row["adjusts"].isoformat() if row.get("adjusts") else None,
            **{name: float(row[name] or 0.0) for name in FIGURES},
        }
        for row in summed
    ]


def _capacity(start: datetime, end: datetime, month: date | None) -> dict[str, dict[str, float]]:
    if month is not None:
        rows = CapacityInterval.objects.filter(period=month)
        clipped: Any = Seconds(F("last_seen_at"), F("started_at"))
    else:
        tz = zone()
        rows = CapacityInterval.objects.filter(
            period__gte=periods.month_of(start, tz),
            period__lte=periods.month_of(end, tz),
            started_at__lt=end,
            last_seen_at__gt=start,
        )
        clipped = Seconds(Least(F("last_seen_at"), Value(end)), Greatest(F("started_at"), Value(start)))
    gpus = Cast("gpus", FloatField())
    summed = rows.values("gpu_model").annotate(
        gpu_seconds=Sum(_float(clipped * gpus)),
        money_seconds=Sum(_float(clipped * gpus * Cast("rate", FloatField()))),
    )
    return {
        row["gpu_model"]: {"gpu_seconds": float(row["gpu_seconds"]), "money_seconds": float(row["money_seconds"])}
        for row in summed
    }


def labels(group: str, keys: Iterable[str]) -> dict[str, list[str]]:
    """key -> [stable key text, label, cost centre] for one group's keys, in one query."""
    wanted = set(keys)
    ids = [int(k) for k in wanted if k.isdigit()]
    if group == "cost_centre":
        names = dict(Department.objects.filter(cost_centre__in=wanted).values_list("cost_centre", "name"))
        return {k: [k, f"{k} ({names[k]})" if k in names else k, k] for k in wanted}
    if group == "department":
        found = Department.objects.filter(pk__in=ids).values_list("pk", "slug", "name", "cost_centre")
        return {str(pk): [slug, name, cc] for pk, slug, name, cc in found}
    if group == "team":
        teams = Team.objects.filter(pk__in=ids).values_list("pk", "slug", "name", "department__cost_centre")
        return {str(pk): [slug, name, cc] for pk, slug, name, cc in teams}
    if group == "user":
        users = User.objects.filter(pk__in=ids).values_list("pk", "username", "first_name", "last_name")
        return {str(pk): [u, f"{first} {last}".strip() or u, ""] for pk, u, first, last in users}
    offerings = GpuOffering.objects.filter(pk__in=ids).values_list("pk", "slug", "display_name")
    return {str(pk): [slug, name, ""] for pk, slug, name in offerings}


def gather(start: datetime, end: datetime, *, groups: Iterable[str]) -> Sums:
    """The period's sums for the whole organisation, with labels for ``groups``."""
    month = calendar_month(start, end)
    usage = _usage(start, end, month)
    names = {group: labels(group, {row[group] for row in usage}) for group in groups}
    return Sums(start, end, month, usage, _capacity(start, end, month), names)


def to_json(sums: Sums) -> dict[str, Any]:
    return {
        "start": sums.start.isoformat(),
        "end": sums.end.isoformat(),
        "month": sums.month.isoformat() if sums.month else None,
        "usage": sums.usage,
        "capacity": sums.capacity,
        "labels": sums.labels,
    }


def from_json(data: dict[str, Any]) -> Sums:
    return Sums(
        start=datetime.fromisoformat(data["start"]),
        end=datetime.fromisoformat(data["end"]),
        month=date.fromisoformat(data["month"]) if data["month"] else None,
        usage=list(data["usage"]),
        capacity=dict(data["capacity"]),
        labels=dict(data["labels"]),
    )


@dataclass(frozen=True)
class MonthCost:
    money: float  # in currency
    idle_money: float  # the part of it that paid for GPUs below the idle test


def _month_cost(money_seconds: float, eq_seconds: float, idle: float) -> MonthCost:
    money = money_seconds / 3600
    share = min(1.0, idle / eq_seconds) if eq_seconds else 0.0
    return MonthCost(money, money * share)


def monthly(first: date, last: date, groups: Iterable[str]) -> dict[str, dict[tuple[date, str], MonthCost]]:
    """Cost per (month charged, group key) from ``first`` to ``last``, for each of ``groups``; what idle time
    cost is each row's cost times its idle share of the held GPU-hours. Closed months come from what was
    stored at their closing (they no longer change), the open ones from one query: a year of ledger costs
    no more than its open months."""
    groups = list(groups)
    closed = {
        row.period: row.data
        for row in ClosedMonth.objects.filter(period__gte=first, period__lte=last).only("period", "data")
    }
    totals: dict[str, dict[tuple[date, str], list[float]]] = {g: defaultdict(lambda: [0.0, 0.0, 0.0]) for g in groups}
    for month, data in closed.items():
        for row in data["usage"]:
            for group in groups:
                figures = totals[group][(month, row[group])]
                figures[0] += row["money_seconds"]
                figures[1] += row["eq_seconds"]
                figures[2] += row["idle"]
    seconds = Seconds(F("last_seen_at"), F("started_at"))
    rows = (
        UsageInterval.objects.filter(period__gte=first, period__lte=last)
        .exclude(period__in=list(closed))
        .values("period", *(_FIELDS[g] for g in groups))
        .annotate(
            money=Sum(_float(seconds * Cast("rate", FloatField()))),
            eq=Sum(_float(seconds * Cast("gpu_equivalents", FloatField()))),
            idle=Sum("idle_gpu_seconds"),
        )
    )
    for row in rows:
        for group in groups:
            figures = totals[group][(row["period"], str(row[_FIELDS[group]]))]
            figures[0] += float(row["money"] or 0)
            figures[1] += float(row["eq"] or 0)
            figures[2] += float(row["idle"] or 0)
    return {g: {key: _month_cost(*figures) for key, figures in found.items()} for g, found in totals.items()}


def daily(start: datetime, end: datetime, team_id: int, unit: str) -> list[tuple[date, Decimal]]:
    """What a team was charged per day of [start, end), money or GPU-hours (``unit`` "gpu_hours"), each
    interval spread over the days it covers. One query; the team's intervals are summed here."""
    tz = zone()
    first = start.astimezone(tz).date()
    days = [first + timedelta(days=n) for n in range((end.astimezone(tz).date() - first).days + 1)]
    totals = dict.fromkeys(days, 0.0)
    rows = UsageInterval.objects.filter(
        team_id=team_id, period=periods.month_of(start, tz), started_at__lt=end, last_seen_at__gt=start
    ).values_list("started_at", "last_seen_at", "rate", "gpu_equivalents")
    for began, seen, rate, equivalents in rows:
        per_second = float(equivalents if unit == "gpu_hours" else rate) / 3600
        a, b = max(began, start), min(seen, end)
        while a < b:
            midnight = datetime.combine(a.astimezone(tz).date() + timedelta(days=1), time(), tzinfo=tz)
            piece_end = min(b, midnight)
            day = a.astimezone(tz).date()
            if day in totals:
                totals[day] += (piece_end - a).total_seconds() * per_second
            a = piece_end
    quantum = Decimal("0.0001") if unit == "gpu_hours" else Decimal("0.01")
    return [
        (day, Decimal(totals[day]).quantize(quantum))
        for day in days
        if day <= (end - timedelta(microseconds=1)).astimezone(tz).date()
    ]
