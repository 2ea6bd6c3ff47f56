"""Celery tasks of the organisation: thin, they call the code that does the work."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.alerts import record as alerts_record
from portal.billing import budgets
from portal.queue import enqueue
from portal.tasknames import CHECK_ALERTS, DELIVER_OPS_ALERT
from portal.tasknames import CHECK_BUDGETS as CHECK_BUDGETS  # the names' old home
from portal.tasknames import DELIVER_BUDGET_ALERT as DELIVER_BUDGET_ALERT


@shared_task(name=CHECK_BUDGETS)
def check_budgets() -> int:
    """Record the budget thresholds crossed since the last check and have the newest per team told."""
    alerts = budgets.newest_per_team(budgets.record_alerts(timezone.now()))
    for alert in alerts:
        enqueue(DELIVER_BUDGET_ALERT, alert.pk)
    return len(alerts)


@shared_task(name=CHECK_ALERTS)
def check_alerts() -> int:
    """Step the operators' and leads' alerts (portal/alerts/record.py) and have each firing and resolution
    told; notices whose delivery never happened are enqueued again (delivery is idempotent)."""
    now = timezone.now()
    made = alerts_record.check(now) or []
    for notice_id in [*made, *alerts_record.undelivered(now)]:
        enqueue(DELIVER_OPS_ALERT, notice_id)
    return len(made)
