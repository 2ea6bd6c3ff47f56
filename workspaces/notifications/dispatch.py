"""The hot path's only contact with notifications: for a notifiable event, enqueue delivery after commit.

``workspaces.transitions`` calls :func:`notify_after_commit` for every event it writes. The classifier is a
few dictionary look-ups; only a notifiable event costs an ``on_commit`` callback, and all delivery work
(rows, email, webhook) happens in the task, so the scheduling cycle and the loops never wait on SMTP or HTTP.
The events of a batch written at once go in one task per :data:`BATCH` of them, which reads them together.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from django.db import transaction

from portal.celery import app
from portal.queue import queue_for
from workspaces.notifications.kinds import classify

if TYPE_CHECKING:
    from workspaces.models import WorkspaceEvent

log = logging.getLogger(__name__)

DELIVER_TASK = "workspaces.deliver_notifications"
BATCH = 200  # event ids per task: a few queries read them all; the task hands on what its time does not reach


def notify_after_commit(event: WorkspaceEvent) -> None:
    if classify(event) is None:
        return
    event_id = event.pk
    # robust: a broker that cannot be reached is logged, never raised into the caller after its commit (the
    # loops would stop on it); the event stays in the timeline either way.
    transaction.on_commit(lambda: enqueue_delivery(event_id), robust=True)


def notify_many_after_commit(events: Iterable[WorkspaceEvent]) -> None:
    """:func:`notify_after_commit` for a batch of events written at once: one ``on_commit`` callback, which
    enqueues one task per :data:`BATCH` of their ids."""
    ids = [event.pk for event in events if classify(event) is not None]
    if ids:
        transaction.on_commit(partial(_send_all, ids), robust=True)


def _send_all(event_ids: list[int]) -> None:
    for start in range(0, len(event_ids), BATCH):
        enqueue_delivery(event_ids[start : start + BATCH])


def enqueue_delivery(event_ids: int | list[int]) -> None:
    """Enqueue delivery of one event or of a batch (the task also hands on here what it did not reach)."""
    # By name, in the default queue (not the control loops' queue): delivery may wait behind provisioning.
    app.signature(DELIVER_TASK, args=(event_ids,)).apply_async(queue=queue_for(DELIVER_TASK))
    log.debug("notification delivery for event(s) %s enqueued", event_ids)
