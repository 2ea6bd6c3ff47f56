"""Celery tasks of the organisation: thin, they call the code that does the work."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.billing import budgets
from portal.queue import enqueue

CHECK_BUDGETS = "billing.check_budgets"
DELIVER_BUDGET_ALERT = "workspaces.deliver_budget_alert"  # workspaces/tasks.py: notifications are theirs


@shared_task(name=CHECK_BUDGETS)
def check_budgets() -> int:
    """Record the budget thresholds crossed since the last check and have the newest per team told."""
    alerts = budgets.newest_per_team(budgets.record_alerts(timezone.now()))
    for alert in alerts:
        enqueue(DELIVER_BUDGET_ALERT, alert.pk)
    return len(alerts)
