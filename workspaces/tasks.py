"""Celery tasks of the workspaces app: thin, they take ids and call the code that does the work."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from portal.tasknames import DELIVER_BUDGET_ALERT, DELIVER_OPS_ALERT
from workspaces.notifications import delivery
from workspaces.notifications.dispatch import DELIVER_TASK

# A failed email or webhook is tried again after 30 s, 60 s, ... (the attempts per channel are capped by
# NOTIFY_MAX_ATTEMPTS on the row, so a redelivered task cannot exceed them either).
RETRY_BASE_SECONDS = 30


@shared_task(name=DELIVER_TASK, bind=True, max_retries=None)
def deliver_notifications(self: Task[Any, Any], event_id: int) -> dict[str, Any]:
    return _done_or_retry(self, delivery.deliver(event_id))


@shared_task(name=DELIVER_BUDGET_ALERT, bind=True, max_retries=None)
def deliver_budget_alert(self: Task[Any, Any], alert_id: int) -> dict[str, Any]:
    """Enqueued by ``billing.check_budgets`` (portal/tasks.py) for each alert it records."""
    return _done_or_retry(self, delivery.deliver_budget_alert(alert_id))


@shared_task(name=DELIVER_OPS_ALERT, bind=True, max_retries=None)
def deliver_ops_alert(self: Task[Any, Any], notice_id: int) -> dict[str, Any]:
    """Enqueued by ``alerts.check`` (portal/tasks.py) for each alert that fired or resolved."""
    return _done_or_retry(self, delivery.deliver_ops_alert(notice_id))


def _done_or_retry(task: Task[Any, Any], outcome: delivery.Outcome) -> dict[str, Any]:
    if outcome.retry:
        raise task.retry(countdown=RETRY_BASE_SECONDS * 2**task.request.retries)
    return outcome.as_dict()
