"""Celery tasks of the workspaces app: thin, they take ids and call the code that does the work."""

from __future__ import annotations

import time
from typing import Any

from celery import Task, shared_task
from django.conf import settings

from portal.tasknames import DELIVER_BUDGET_ALERT, DELIVER_OPS_ALERT
from workspaces.notifications import delivery
from workspaces.notifications.dispatch import DELIVER_TASK, enqueue_delivery

# A failed email or webhook is tried again after 30 s, 60 s, ... (the attempts per channel are capped by
# NOTIFY_MAX_ATTEMPTS on the row, so a redelivered task cannot exceed them either).
RETRY_BASE_SECONDS = 30
# A batch sends for at most this share of the soft time limit, then hands the events it did not reach to a
# task of their own: each send may wait its full timeout, and a batch cut off by the limit would leave the
# rest of its channels pending for good.
BATCH_TIME_SHARE = 0.5


@shared_task(name=DELIVER_TASK, bind=True, max_retries=None)
def deliver_notifications(self: Task[Any, Any], event_ids: int | list[int]) -> dict[str, Any]:
    """Enqueued by ``notifications.dispatch`` with the ids of a batch of events written together, or one id
    (as tasks enqueued before batches carry it)."""
    ids = [event_ids] if isinstance(event_ids, int) else list(event_ids)
    deadline = time.monotonic() + settings.CELERY_TASK_SOFT_TIME_LIMIT * BATCH_TIME_SHARE
    outcome = delivery.deliver_many(ids, deadline=deadline)
    if outcome.rest:
        enqueue_delivery(outcome.rest)
        rest = set(outcome.rest)
        ids = [event_id for event_id in ids if event_id not in rest]  # a retry is for these only
    return _done_or_retry(self, outcome, args=(ids,))


@shared_task(name=DELIVER_BUDGET_ALERT, bind=True, max_retries=None)
def deliver_budget_alert(self: Task[Any, Any], alert_id: int) -> dict[str, Any]:
    """Enqueued by ``billing.check_budgets`` (portal/tasks.py) for each alert it records."""
    return _done_or_retry(self, delivery.deliver_budget_alert(alert_id))


@shared_task(name=DELIVER_OPS_ALERT, bind=True, max_retries=None)
def deliver_ops_alert(self: Task[Any, Any], notice_id: int) -> dict[str, Any]:
    """Enqueued by ``alerts.check`` (portal/tasks.py) for each alert that fired or resolved."""
    return _done_or_retry(self, delivery.deliver_ops_alert(notice_id))


def _done_or_retry(
    task: Task[Any, Any], outcome: delivery.Outcome, args: tuple[Any, ...] | None = None
) -> dict[str, Any]:
    """Retry (``args`` instead of the task's own, if given) while a failed channel has attempts left."""
    if outcome.retry:
        raise task.retry(args=args, countdown=RETRY_BASE_SECONDS * 2**task.request.retries)
    return outcome.as_dict()
