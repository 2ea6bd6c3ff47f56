"""Enqueue Celery work by task name, only after the current transaction commits.

Apps enqueue each other's tasks by name (``"scheduling.run_cycle"``) so that ``workspaces`` never imports
``scheduling`` internals. A registered task honours ``task_always_eager``; an unknown name goes to the broker.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from portal.celery import app


def control_queue(queue: str) -> str:
    return queue + str(settings.CELERY_CONTROL_QUEUE_SUFFIX)


def scheduler_queue(queue: str) -> str:
    return queue + str(settings.CELERY_SCHEDULER_QUEUE_SUFFIX)


def portal_queues(queue: str) -> list[str]:
    """Every queue of default queue ``queue``: itself, its control queue and its scheduler queue."""
    return [queue, control_queue(queue), scheduler_queue(queue)]


def queue_for(task_name: str) -> str:
    """The default queue, or its control queue for the reconcile loop (settings.CELERY_CONTROL_TASKS), or its
    scheduler queue for the scheduling cycle (settings.CELERY_SCHEDULER_TASKS)."""
    default = str(settings.CELERY_TASK_DEFAULT_QUEUE)
    if task_name in settings.CELERY_SCHEDULER_TASKS:
        return scheduler_queue(default)
    return control_queue(default) if task_name in settings.CELERY_CONTROL_TASKS else default


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    def send() -> None:
        options: dict[str, Any] = {} if countdown is None else {"countdown": countdown}
        # The queue is named each time (not left to Celery's cached routes) so it follows the settings.
        app.signature(task_name, args=args).apply_async(queue=queue_for(task_name), **options)

    transaction.on_commit(send)


def enqueue_coalesced(task_name: str, *, window: float = 2.0, countdown: float | None = None) -> None:
    """Enqueue ``task_name`` (to start ``countdown`` seconds from now) unless a run of it is already waiting: a
    burst of requests then triggers one scheduling cycle, not one each. The task calls :func:`mark_started`
    so later triggers count again; the mark expires after ``window`` seconds in any case."""
    if cache.add(_pending_key(task_name), True, timeout=window + (countdown or 0.0)):
        enqueue(task_name, countdown=countdown)


def mark_started(task_name: str) -> None:
    cache.delete(_pending_key(task_name))


def _pending_key(task_name: str) -> str:
    return f"queue:pending:{task_name}"
