"""Enqueue Celery work by task name, only after the current transaction commits.

Apps enqueue each other's tasks by name (``"scheduling.run_cycle"``) so that ``workspaces`` never imports
``scheduling`` internals. A registered task honours ``task_always_eager``; an unknown name goes to the broker.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from portal.celery import app


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    def send() -> None:
        options: dict[str, Any] = {} if countdown is None else {"countdown": countdown}
        # The queue is named each time (not left to Celery's cached default) so it follows the settings.
        app.signature(task_name, args=args).apply_async(queue=settings.CELERY_TASK_DEFAULT_QUEUE, **options)

    transaction.on_commit(send)
