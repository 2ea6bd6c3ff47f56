"""Batched delivery: the events written together reach the broker as one task, which reads them, their
recipients and rows in a few queries for the whole batch, gives every recipient one row per event and, run
again (redelivered or retried), never sends a channel that went out."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.benchmarks.measuring import SentTask
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from tests.workspaces import test_notifications_delivery as delivery_tests
from tests.workspaces.test_notifications_delivery import Receiver, hook_url
from workspaces import tasks
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications import dispatch
from workspaces.notifications.models import Delivery, Notification, NotificationPreference
from workspaces.transitions import note_many

webhook = delivery_tests.webhook  # the delivery tests' local webhook receiver, a fixture here too


def calls(sent: list[SentTask]) -> list[tuple[str, tuple[Any, ...]]]:
    return [(task.name, task.args) for task in sent]


def notebooks(org: Org, count: int) -> list[Workspace]:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return [make_workspace(org.alpha, org.member, offering, state="running") for _ in range(count)]


def write_batch(workspaces: list[Workspace], stuck: Workspace | None = None) -> list[int]:
    """Idle warnings for ``workspaces`` (a possibly stuck one for ``stuck``) and one note nobody hears of, in
    one transaction as the idle loop writes them; their ids, oldest first."""
    notes = [(w, "Idle warning.", {"event": "idle_warning"}) for w in workspaces]
    notes.append((workspaces[0], "Extended by 1 h.", {}))
    if stuck is not None:
        notes.append((stuck, "Possibly stuck.", {"event": "possibly_stuck"}))
    note_many(notes, source="idle")
    return list(WorkspaceEvent.objects.filter(details__has_key="event").order_by("pk").values_list("pk", flat=True))


def with_email(org: Org) -> None:
    for user in (org.member, org.lead):
        user.email = f"{user.username}@example.org"
        user.save(update_fields=["email"])


def test_a_batch_written_together_is_enqueued_as_one_task(
    org: Org, sent_tasks: list[SentTask], django_capture_on_commit_callbacks: Any
) -> None:
    workspaces = notebooks(org, 5)

    with django_capture_on_commit_callbacks(execute=True):
        ids = write_batch(workspaces, stuck=workspaces[1])

    assert len(ids) == 6
    assert calls(sent_tasks) == [(dispatch.DELIVER_TASK, (ids,))]


def test_a_large_batch_is_split_into_tasks_of_at_most_batch_ids(
    org: Org, sent_tasks: list[SentTask], django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "BATCH", 3)
    with django_capture_on_commit_callbacks(execute=True):
        ids = write_batch(notebooks(org, 7))

    assert calls(sent_tasks) == [(dispatch.DELIVER_TASK, (chunk,)) for chunk in (ids[:3], ids[3:6], ids[6:])]


def test_every_recipient_gets_one_row_per_event_and_a_redelivered_batch_sends_nothing_twice(
    org: Org, webhook: Receiver, sent_tasks: list[SentTask], django_capture_on_commit_callbacks: Any
) -> None:
    with_email(org)
    NotificationPreference.objects.create(user=org.member, webhook_url=hook_url(webhook))
    workspaces = notebooks(org, 4)
    with django_capture_on_commit_callbacks(execute=True):
        ids = write_batch(workspaces, stuck=workspaces[2])
    [(_, args)] = calls(sent_tasks)

    first = tasks.deliver_notifications(*args)  # as the worker runs it

    owed = {(event_id, org.member.pk) for event_id in ids} | {(ids[-1], org.lead.pk)}  # the leads hear of stuck
    rows = list(Notification.objects.filter(event__in=ids))
    assert sorted((row.event_id, row.recipient_id) for row in rows) == sorted(owed)  # one row each, no more
    assert first == {"notifications": 6, "sent": 11, "failed": 0, "retry": False}  # the lead has no webhook
    assert len(mail.outbox) == 6 and len(webhook.received) == 5
    assert calls(sent_tasks) == [(dispatch.DELIVER_TASK, args)]  # no more tasks

    again = tasks.deliver_notifications(*args)  # redelivered after a crash
    tasks.deliver_notifications(ids[0])  # and one id alone, as tasks enqueued before batches carry it

    assert again == {"notifications": 6, "sent": 0, "failed": 0, "retry": False}
    assert Notification.objects.filter(event__in=ids).count() == 6
    assert len(mail.outbox) == 6 and len(webhook.received) == 5


def test_a_retried_batch_sends_again_only_what_failed(org: Org, webhook: Receiver, settings: Any) -> None:
    settings.NOTIFY_MAX_ATTEMPTS = 2
    with_email(org)
    NotificationPreference.objects.create(user=org.member, webhook_url=hook_url(webhook))
    webhook.answer = 500
    ids = write_batch(notebooks(org, 3))

    tasks.deliver_notifications.apply(args=(ids,))  # eager: its retry runs at once, here

    rows = Notification.objects.filter(event__in=ids)
    assert [(r.email_status, r.email_attempts, r.webhook_status, r.webhook_attempts) for r in rows] == [
        (Delivery.SENT, 1, Delivery.FAILED, 2)
    ] * 3
    assert len(mail.outbox) == 3  # once each, though the batch ran twice
    assert len(webhook.received) == 6  # twice each: the retry, then no attempts left


def test_a_batch_out_of_time_hands_the_rest_to_a_task_of_its_own(
    org: Org, sent_tasks: list[SentTask], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_email(org)
    ids = write_batch(notebooks(org, 3))
    monkeypatch.setattr(tasks, "BATCH_TIME_SHARE", 0)  # the deadline has passed once the first event is done

    assert tasks.deliver_notifications(ids)["notifications"] == 1

    assert calls(sent_tasks) == [(dispatch.DELIVER_TASK, (ids[1:],))]
    rows = Notification.objects.filter(event__in=ids).order_by("event_id")
    assert [row.email_status for row in rows] == [
        Delivery.SENT,
        Delivery.PENDING,
        Delivery.PENDING,
    ]  # all in the portal
    monkeypatch.setattr(tasks, "BATCH_TIME_SHARE", 1)
    assert tasks.deliver_notifications(*sent_tasks[0].args)["sent"] == 2
    assert len(mail.outbox) == 3


def delivery_queries(event_ids: list[int]) -> tuple[int, int]:
    """Queries of the delivery task for the batch, the first time and redelivered."""
    with CaptureQueriesContext(connection) as first:
        tasks.deliver_notifications(event_ids)
    with CaptureQueriesContext(connection) as again:
        tasks.deliver_notifications(event_ids)
    return len(first), len(again)


def test_a_batch_for_recipients_with_both_channels_off_costs_the_same_queries_as_one_event(org: Org) -> None:
    """The default: no email address, no webhook. Events with their workspaces, recipients, preferences, rows
    read, rows inserted, rows read back: 6 queries however many events (one event alone used to cost 11, its
    two claims and two retry checks among them), 4 when the rows exist."""
    [alone, *batch] = write_batch(notebooks(org, 21))
    assert len(batch) == 20

    assert delivery_queries([alone]) == (6, 4)
    assert delivery_queries(batch) == (6, 4)
    rows = Notification.objects.filter(event__in=batch)
    assert {(row.email_status, row.webhook_status) for row in rows} == {(Delivery.OFF, Delivery.OFF)}
    assert rows.count() == 20
