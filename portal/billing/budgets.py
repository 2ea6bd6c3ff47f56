"""Team budgets: what each team has spent this month, the month-end forecast, the thresholds it crossed,
and whether a new request is refused for it.

Spent is what the ledger has charged in the month so far (usage up to its last sighting, late usage of
closed months booked in it). The forecast extends the month's average rate so far to the month's end: a
quiet night does not hide a busy week, and a lead can check it by hand (spent / days so far x days).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import ExpressionWrapper, F, FloatField, Sum
from django.db.models.functions import Cast

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.models import Budget, BudgetAlert, UsageInterval
from portal.billing.report import cents, hours
from portal.billing.sql import Seconds

THRESHOLDS = (50, 80, 100)


@dataclass(frozen=True)
class Spend:
    money: Decimal
    gpu_hours: Decimal


@dataclass(frozen=True)
class BudgetStatus:
    team_id: int
    month: date
    amount: Decimal
    unit: str
    policy: str
    spent: Decimal  # in the budget's unit
    forecast: Decimal | None  # at month end, at the month's rate so far; None right at its start

    @property
    def share(self) -> float:
        return float(self.spent / self.amount) if self.amount else 0.0

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.amount

    @property
    def crossed(self) -> list[int]:
        return [t for t in THRESHOLDS if self.spent * 100 >= self.amount * t]

    def describe(self, amount: Decimal) -> str:
        """``amount`` in the budget's unit, as people read it: 1,250.00 EUR, 310.50 GPU-h."""
        return f"{amount:,.2f} {'GPU-h' if self.unit == Budget.Unit.GPU_HOURS else settings.BILLING_CURRENCY}"


def spend_this_month(now: datetime, team_ids: Collection[int] | None = None) -> dict[int, Spend]:
    """Per team, what the month of ``now`` has charged so far; one query."""
    seconds = Seconds(F("last_seen_at"), F("started_at"))
    rows = UsageInterval.objects.filter(period=periods.month_of(now, zone()))
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    summed = rows.values("team_id").annotate(
        money=Sum(ExpressionWrapper(seconds * Cast("rate", FloatField()), output_field=FloatField())),
        eq=Sum(ExpressionWrapper(seconds * Cast("gpu_equivalents", FloatField()), output_field=FloatField())),
    )
    return {r["team_id"]: Spend(cents((r["money"] or 0) / 3600), hours((r["eq"] or 0) / 3600)) for r in summed}


def forecast(spent: Decimal, now: datetime) -> Decimal | None:
    start, end = periods.month_bounds(periods.month_of(now, zone()), zone())
    elapsed = (now - start).total_seconds()
    if elapsed < 3600:
        return None
    return (spent * Decimal((end - start).total_seconds()) / Decimal(elapsed)).quantize(Decimal("0.01"))


def statuses(now: datetime, team_ids: Collection[int] | None = None) -> dict[int, BudgetStatus]:
    """The budget status of every team that has a budget (of ``team_ids``); two queries."""
    budgets = Budget.objects.all() if team_ids is None else Budget.objects.filter(team_id__in=team_ids)
    budgets_by_team = {b.team_id: b for b in budgets}
    if not budgets_by_team:
        return {}  # most teams have none: no spend to sum (a request's check is then one query)
    spent = spend_this_month(now, list(budgets_by_team))
    month = periods.month_of(now, zone())
    found = {}
    for team_id, budget in budgets_by_team.items():
        spend = spent.get(team_id, Spend(Decimal(0), Decimal(0)))
        value = spend.money if budget.unit == Budget.Unit.MONEY else spend.gpu_hours
        found[team_id] = BudgetStatus(
            team_id, month, budget.amount, budget.unit, budget.policy, value, forecast(value, now)
        )
    return found


def refusal(team: Any, kind: str, now: datetime) -> str | None:
    """Why a new request of ``kind`` in ``team`` is refused for its budget, or None."""
    status = statuses(now, [team.pk]).get(team.pk)
    if status is None or not status.exhausted or status.policy == Budget.Policy.WARN:
        return None
    if status.policy == Budget.Policy.BLOCK_BATCH and kind != "job":
        return None
    what = "training jobs" if status.policy == Budget.Policy.BLOCK_BATCH else "new requests"
    return (
        f"Budget: {team.name} has used its budget for {status.month:%B %Y} "
        f"({status.describe(status.spent)} of {status.describe(status.amount)}), so {what} are refused until "
        "next month or until finance raises the budget."
    )


def record_alerts(now: datetime) -> list[BudgetAlert]:
    """The thresholds crossed since the last check, as new alert rows (each made once per month)."""
    made = []
    for status in statuses(now).values():
        for threshold in status.crossed:
            try:
                with transaction.atomic():
                    made.append(
                        BudgetAlert.objects.create(
                            team_id=status.team_id,
                            period=status.month,
                            threshold=threshold,
                            at=now,
                            spent=status.spent,
                            amount=status.amount,
                            unit=status.unit,
                        )
                    )
            except IntegrityError:
                continue  # told before (or by a concurrent check)
    return made


def newest_per_team(alerts: Iterable[BudgetAlert]) -> list[BudgetAlert]:
    """Of several thresholds crossed at once, only the highest is worth a message."""
    best: dict[int, BudgetAlert] = {}
    for alert in alerts:
        if alert.team_id not in best or alert.threshold > best[alert.team_id].threshold:
            best[alert.team_id] = alert
    return list(best.values())
