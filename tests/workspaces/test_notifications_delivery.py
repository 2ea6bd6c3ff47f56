"""Delivery: timeline event -> on_commit -> task -> Notification rows, an email received by a real SMTP server
(aiosmtpd on loopback) and a webhook post received by a local HTTP receiver, per each person's choices."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from portal.models import Membership
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from tests.stack_fixtures import wait_for
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications import delivery
from workspaces.notifications.models import Delivery, Notification, NotificationPreference
from workspaces.transitions import State, note, transition


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Inbox:
    """aiosmtpd handler: keeps every message the server accepted."""

    def __init__(self) -> None:
        self.messages: list[Envelope] = []

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.messages.append(envelope)
        return "250 Message accepted for delivery"

    def texts(self) -> list[str]:
        return [m.content.decode() if isinstance(m.content, bytes) else str(m.content) for m in self.messages]


@pytest.fixture
def smtp_server() -> Iterator[tuple[Inbox, int]]:
    inbox, port = Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
def mail_to_smtp(settings: Any, smtp_server: tuple[Inbox, int]) -> Inbox:
    """Django's SMTP backend pointed at the local server (pytest-django swaps in the in-memory one)."""
    inbox, port = smtp_server
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.PORTAL_BASE_URL = "https://gpu.example.org"
    return inbox


class Receiver(ThreadingHTTPServer):
    received: list[dict[str, Any]]
    answer: int


class _Hook(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append({"json": json.loads(body), "type": self.headers["Content-Type"]})
        self.send_response(self.server.answer)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    server = Receiver(("127.0.0.1", 0), _Hook)
    server.received, server.answer = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def hook_url(receiver: Receiver) -> str:
    return f"http://127.0.0.1:{receiver.server_address[1]}/services/T000/B000/XXX"


@pytest.fixture
def notebook(org: Org) -> Workspace:
    org.member.email = "alice@example.org"
    org.member.save(update_fields=["email"])
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(org.alpha, org.member, offering, name="seg-tests", state="running")


def idle_warning(workspace: Workspace) -> WorkspaceEvent:
    note(
        workspace,
        "Idle warning. GPU below 5 % for 60 min. It will be reclaimed at 14:30 UTC.",
        source="idle",
        details={"event": "idle_warning", "reclaim_at": "2026-01-01T14:30:00+00:00"},
    )
    return WorkspaceEvent.objects.filter(workspace=workspace).latest("id")


def test_a_notifiable_event_enqueues_delivery_after_commit_and_others_do_not(
    notebook: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        note(notebook, "Extended by 1 h by alice; runtime is now 2 h.")
    assert callbacks == []
    with django_capture_on_commit_callbacks() as callbacks:
        idle_warning(notebook)
    assert len(callbacks) == 1


def test_email_and_webhook_reach_their_servers(notebook: Workspace, mail_to_smtp: Inbox, webhook: Receiver) -> None:
    NotificationPreference.objects.create(user=notebook.owner, webhook_url=hook_url(webhook))
    event = idle_warning(notebook)

    outcome = delivery.deliver(event.pk)

    assert outcome.as_dict() == {"notifications": 1, "sent": 2, "failed": 0, "retry": False}
    notification = Notification.objects.get(event=event)
    assert (notification.recipient, notification.workspace, notification.kind) == (
        notebook.owner,
        notebook,
        "idle_warning",
    )
    assert notification.read_at is None
    assert (notification.email_status, notification.webhook_status) == (Delivery.SENT, Delivery.SENT)
    [envelope] = mail_to_smtp.messages
    assert envelope.rcpt_tos == ["alice@example.org"]
    [text] = mail_to_smtp.texts()
    assert "Subject: [GPU portal] seg-tests: Idle warning" in text
    assert "GPU below 5 % for 60 min." in text
    assert f"https://gpu.example.org/workspaces/{notebook.pk}/" in text
    [post] = webhook.received
    assert post["type"] == "application/json"
    assert post["json"] == {"text": f"{notification.text} https://gpu.example.org/workspaces/{notebook.pk}/"}


def test_a_second_run_of_the_task_sends_nothing_again(
    notebook: Workspace, mail_to_smtp: Inbox, webhook: Receiver
) -> None:
    NotificationPreference.objects.create(user=notebook.owner, webhook_url=hook_url(webhook))
    event = idle_warning(notebook)
    delivery.deliver(event.pk)

    again = delivery.deliver(event.pk)

    assert (again.sent, again.failed) == (0, 0)
    assert Notification.objects.filter(event=event).count() == 1
    assert len(mail_to_smtp.messages) == 1
    assert len(webhook.received) == 1


def test_email_off_sends_no_mail(notebook: Workspace, mail_to_smtp: Inbox, webhook: Receiver) -> None:
    NotificationPreference.objects.create(
        user=notebook.owner, email_kinds=["failed"], webhook_url=hook_url(webhook), webhook_kinds=[]
    )
    event = idle_warning(notebook)

    delivery.deliver(event.pk)

    notification = Notification.objects.get(event=event)  # in the portal all the same
    assert (notification.email_status, notification.webhook_status) == (Delivery.OFF, Delivery.OFF)
    assert mail_to_smtp.messages == []
    assert webhook.received == []


def test_a_start_is_in_the_portal_only_by_default(notebook: Workspace, mail_to_smtp: Inbox) -> None:
    Workspace.objects.filter(pk=notebook.pk).update(state=State.PROVISIONING)
    notebook.refresh_from_db()
    assert transition(notebook, State.RUNNING, "Running on node gpu-1.", source="reconcile")
    event = WorkspaceEvent.objects.filter(workspace=notebook).latest("id")

    delivery.deliver(event.pk)

    assert Notification.objects.get(event=event).kind == "started"
    assert mail_to_smtp.messages == []


def test_no_email_address_means_no_mail(org: Org, notebook: Workspace, mail_to_smtp: Inbox) -> None:
    org.member.email = ""
    org.member.save(update_fields=["email"])
    delivery.deliver(idle_warning(notebook).pk)
    assert Notification.objects.get(workspace=notebook).email_status == Delivery.OFF
    assert mail_to_smtp.messages == []


def test_a_possibly_stuck_job_tells_the_owner_and_the_team_leads(org: Org, notebook: Workspace) -> None:
    note(notebook, "Possibly stuck: GPUs idle for 120 min.", source="idle", details={"event": "possibly_stuck"})
    event = WorkspaceEvent.objects.filter(workspace=notebook).latest("id")

    delivery.deliver(event.pk)

    leads = set(Membership.objects.filter(team=org.alpha, role="lead").values_list("user", flat=True))
    assert leads == {org.lead.pk}
    assert set(Notification.objects.filter(event=event).values_list("recipient", flat=True)) == {
        org.member.pk,
        org.lead.pk,
    }


def test_smtp_down_is_logged_and_recorded_and_retried_a_bounded_number_of_times(
    notebook: Workspace, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2  # nobody there
    settings.NOTIFY_MAX_ATTEMPTS = 2
    event = idle_warning(notebook)

    with caplog.at_level(logging.WARNING, logger="workspaces.notifications.delivery"):
        outcome = delivery.deliver(event.pk)  # no exception

    assert (outcome.failed, outcome.retry) == (1, True)
    notification = Notification.objects.get(event=event)
    assert notification.email_status == Delivery.FAILED
    assert "Connection" in notification.email_error or "refused" in notification.email_error.lower()
    assert any("email delivery failed" in record.getMessage() for record in caplog.records)
    second = delivery.deliver(event.pk)
    assert (second.failed, second.retry) == (1, False)  # the last attempt
    third = delivery.deliver(event.pk)
    assert (third.sent, third.failed, third.retry) == (0, 0, False)
    notification.refresh_from_db()
    assert (notification.email_status, notification.email_attempts) == (Delivery.FAILED, 2)


def test_a_webhook_that_answers_an_error_is_marked_failed(notebook: Workspace, webhook: Receiver) -> None:
    webhook.answer = 500
    NotificationPreference.objects.create(user=notebook.owner, email_kinds=[], webhook_url=hook_url(webhook))
    outcome = delivery.deliver(idle_warning(notebook).pk)
    assert outcome.failed == 1
    notification = Notification.objects.get(workspace=notebook)
    assert notification.webhook_status == Delivery.FAILED
    assert notification.webhook_error.startswith("HTTP 500")


def test_an_event_gone_with_its_workspace_is_nothing_to_do(notebook: Workspace) -> None:
    event_id = idle_warning(notebook).pk
    WorkspaceEvent.objects.filter(pk=event_id).delete()
    assert delivery.deliver(event_id).notifications == 0


@pytest.mark.slow
def test_the_worker_delivers_a_failure_by_email_and_webhook(
    dedicated_worker: Any, smtp_server: tuple[Inbox, int], webhook: Receiver, org: Org
) -> None:
    """The full path, with a real Celery worker (its own process, on PostgreSQL and Redis): the transition
    commits, its on_commit enqueues the task, the worker makes the row and sends both."""
    inbox, port = smtp_server
    dedicated_worker(
        EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port), EMAIL_USE_TLS="false", PORTAL_BASE_URL="https://gpu.example.org"
    )
    org.member.email = "alice@example.org"
    org.member.save(update_fields=["email"])
    NotificationPreference.objects.create(user=org.member, webhook_url=hook_url(webhook))
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    workspace = make_workspace(org.alpha, org.member, offering, name="doomed")  # queued: the loops leave it be

    assert transition(workspace, State.FAILED, "The image could not be pulled.", source="reconcile")

    notification = wait_for(
        lambda: Notification.objects.filter(
            workspace=workspace, email_status=Delivery.SENT, webhook_status=Delivery.SENT
        ).first(),
        timeout=60,
        what="the worker to deliver the notification",
    )
    assert notification.kind == "failed"
    assert [m.rcpt_tos for m in inbox.messages] == [["alice@example.org"]]
    assert "Subject: [GPU portal] doomed: Failed" in inbox.texts()[0]
    assert [p["json"]["text"] for p in webhook.received] == [
        f"{notification.text} https://gpu.example.org/workspaces/{workspace.pk}/"
    ]
