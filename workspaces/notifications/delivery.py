"""What the delivery tasks do for one event, one budget alert or one operations alert's notice: a row per
recipient, then email and webhook per their choices.

Idempotent per (event or alert, recipient, channel): the row is unique per event (alert) and recipient, and
each channel is
claimed with a compare-and-set (``pending``/``failed`` -> ``sending``) before anything is sent, so a
redelivered or retried task never sends a channel that went out. A channel that fails is logged and marked
``failed`` with the error, and tried again by the task's bounded retries (``NOTIFY_MAX_ATTEMPTS`` in all).
Nothing here raises for an SMTP server or webhook that is down.
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import F, QuerySet
from django.urls import reverse
from django.utils import timezone

from portal.alerts.conditions import duration
from portal.alerts.kinds import KINDS as ALERT_KINDS
from portal.alerts.models import OpsAlertNotice
from portal.billing.budgets import BudgetStatus, forecast
from portal.billing.models import Budget, BudgetAlert
from portal.models import Membership, OrgRole, User
from workspaces.models import WorkspaceEvent
from workspaces.notifications.kinds import BUDGET_MEMBERS_FROM, LEADS_TOO, Kind, classify, ops_kind
from workspaces.notifications.messages import Message, compose, compose_budget, compose_ops_alert, webhook_payload
from workspaces.notifications.models import Delivery, Notification, NotificationPreference

log = logging.getLogger(__name__)

EMAIL, WEBHOOK = "email", "webhook"
ERROR_LIMIT = 300  # Notification.email_error / webhook_error


@dataclass
class Outcome:
    notifications: int = 0
    sent: int = 0
    failed: int = 0
    retry: bool = False  # a channel failed and has attempts left

    def as_dict(self) -> dict[str, Any]:
        return {"notifications": self.notifications, "sent": self.sent, "failed": self.failed, "retry": self.retry}


def recipients(event: WorkspaceEvent, kind: str) -> list[User]:
    """The owner; for a possibly stuck job the team's leads too. Only people who can still sign in."""
    workspace = event.workspace
    ids = {workspace.owner_id}
    if kind in LEADS_TOO:
        leads = Membership.objects.filter(team_id=workspace.team_id, role=Membership.Role.LEAD)
        ids.update(leads.values_list("user_id", flat=True))
    return list(User.objects.filter(pk__in=ids, is_active=True).order_by("pk"))


def budget_recipients(alert: BudgetAlert) -> list[User]:
    """The team's leads; from 100 % on every member too. Only people who can still sign in."""
    memberships = Membership.objects.filter(team_id=alert.team_id)
    if alert.threshold < BUDGET_MEMBERS_FROM:
        memberships = memberships.filter(role=Membership.Role.LEAD)
    return list(User.objects.filter(pk__in=memberships.values("user_id"), is_active=True).order_by("pk"))


def ops_recipients(notice: OpsAlertNotice) -> list[User]:
    """Per the alert's kind (``portal.alerts.kinds``): the operators, and for a team's alert its leads. Only
    people who can still sign in."""
    alert = notice.alert
    kind = ALERT_KINDS[alert.kind]
    ids: set[int] = set()
    if kind.operators:
        ids.update(OrgRole.objects.filter(role=OrgRole.Role.OPERATOR).values_list("user_id", flat=True))
    if kind.leads and alert.team_id is not None:
        leads = Membership.objects.filter(team_id=alert.team_id, role=Membership.Role.LEAD)
        ids.update(leads.values_list("user_id", flat=True))
    return list(User.objects.filter(pk__in=ids, is_active=True).order_by("pk"))


def absolute(path: str) -> str:
    return str(settings.PORTAL_BASE_URL).rstrip("/") + path


def deliver(event_id: int) -> Outcome:
    event = WorkspaceEvent.objects.select_related("workspace").filter(pk=event_id).first()
    kind = classify(event) if event is not None else None
    if event is None or kind is None:
        return Outcome()  # the workspace was deleted meanwhile, or nothing to tell
    link = absolute(reverse("workspace-detail", args=[event.workspace_id]))
    message = compose(
        kind,
        workspace_name=event.workspace.name,
        reason=event.reason,
        link=link,
        settings_link=absolute(reverse("notification-settings")),
    )
    return _deliver(
        recipients(event, kind), kind, message, link, of={"event": event}, extra={"workspace_id": event.workspace_id}
    )


def deliver_budget_alert(alert_id: int) -> Outcome:
    """Tell a team's leads (and from 100 % its members) that its budget crossed the alert's threshold."""
    alert = BudgetAlert.objects.select_related("team").filter(pk=alert_id).first()
    if alert is None:
        return Outcome()  # the team was deleted meanwhile
    budget = Budget.objects.filter(team_id=alert.team_id).first()
    policy = budget.policy if budget is not None else None
    # Written as the budget pages write them; the figures are the alert's, from when it was recorded.
    status = BudgetStatus(
        alert.team_id,
        alert.period,
        alert.amount,
        alert.unit,
        policy or "",
        alert.spent,
        forecast(alert.spent, alert.at),
    )
    link = absolute(reverse("team-costs", args=[alert.team_id]))
    message = compose_budget(
        team_name=alert.team.name,
        threshold=alert.threshold,
        month=alert.period,
        spent=status.describe(status.spent),
        amount=status.describe(status.amount),
        forecast=status.describe(status.forecast) if status.forecast is not None else None,
        policy=policy,
        link=link,
        settings_link=absolute(reverse("notification-settings")),
    )
    return _deliver(budget_recipients(alert), Kind.BUDGET, message, link, of={"budget_alert": alert})


def deliver_ops_alert(notice_id: int) -> Outcome:
    """Tell an alert's recipients that it fired (or resolved), in the words and figures of the notice."""
    notice = OpsAlertNotice.objects.select_related("alert__team").filter(pk=notice_id).first()
    if notice is None:
        return Outcome()  # the alert (its team) was deleted meanwhile
    alert = notice.alert
    link = absolute(reverse("alerts"))
    message = compose_ops_alert(
        label=ALERT_KINDS[alert.kind].label,
        severity=alert.severity,
        change=notice.change,
        message=notice.message,
        scope=alert.team.name if alert.team is not None else None,
        firing_for=duration((notice.at - notice.episode).total_seconds()),
        link=link,
        settings_link=absolute(reverse("notification-settings")),
    )
    outcome = _deliver(ops_recipients(notice), ops_kind(alert.severity), message, link, of={"ops_notice": notice})
    # The rows are made: the check need not enqueue this notice again (failed channels retry on their own).
    OpsAlertNotice.objects.filter(pk=notice.pk, delivered_at__isnull=True).update(delivered_at=timezone.now())
    return outcome


def _deliver(
    users: list[User],
    kind: str,
    message: Message,
    link: str,
    *,
    of: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Outcome:
    """A row per recipient for the thing ``of`` names (``{"event": ...}``, ``{"budget_alert": ...}`` or
    ``{"ops_notice": ...}``), then
    each channel owed; ``retry`` says whether a failed channel of any of its rows has attempts left."""
    outcome = Outcome()
    for user in users:
        notification = _row(of, kind, message, user, extra or {})
        outcome.notifications += 1
        if _claim(notification, EMAIL):
            _finish(notification, EMAIL, _send_email(message, user.email), outcome)
        if _claim(notification, WEBHOOK):
            prefs = NotificationPreference.for_user(user)
            _finish(notification, WEBHOOK, _post_webhook(prefs.webhook_url, webhook_payload(message, link)), outcome)
    outcome.retry = _attempts_left(Notification.objects.filter(**of))
    return outcome


def _row(of: dict[str, Any], kind: str, message: Message, user: User, extra: dict[str, Any]) -> Notification:
    """The recipient's row for the event (alert), made once: the channels wanted are fixed when it is made."""
    prefs = NotificationPreference.for_user(user)
    email = Delivery.PENDING if prefs.wants_email(kind) and user.email else Delivery.OFF
    webhook = Delivery.PENDING if prefs.wants_webhook(kind) else Delivery.OFF
    notification, _ = Notification.objects.get_or_create(
        **of,
        recipient=user,
        defaults={**extra, "kind": kind, "text": message.text, "email_status": email, "webhook_status": webhook},
    )
    return notification


def _claim(notification: Notification, channel: str) -> bool:
    """Take the channel for sending, if it is owed and has attempts left; False if it went or someone has it."""
    status, attempts = f"{channel}_status", f"{channel}_attempts"
    claimed = Notification.objects.filter(
        pk=notification.pk,
        **{f"{status}__in": (Delivery.PENDING, Delivery.FAILED), f"{attempts}__lt": settings.NOTIFY_MAX_ATTEMPTS},
    ).update(**{status: Delivery.SENDING, attempts: F(attempts) + 1})
    return claimed == 1


def _finish(notification: Notification, channel: str, error: str, outcome: Outcome) -> None:
    status = Delivery.FAILED if error else Delivery.SENT
    Notification.objects.filter(pk=notification.pk).update(
        **{f"{channel}_status": status, f"{channel}_error": error[:ERROR_LIMIT]}
    )
    if error:
        outcome.failed += 1
        log.warning("notification %s: %s delivery failed: %s", notification.pk, channel, error)
    else:
        outcome.sent += 1


def _attempts_left(rows: QuerySet[Notification]) -> bool:
    email = rows.filter(email_status=Delivery.FAILED, email_attempts__lt=settings.NOTIFY_MAX_ATTEMPTS)
    webhook = rows.filter(webhook_status=Delivery.FAILED, webhook_attempts__lt=settings.NOTIFY_MAX_ATTEMPTS)
    return email.exists() or webhook.exists()


def _send_email(message: Message, address: str) -> str:
    """Send; answer the error in words, or "" when the server took it."""
    email = EmailMessage(message.subject, message.body, settings.DEFAULT_FROM_EMAIL, [address])
    try:
        email.send(fail_silently=False)
    except (smtplib.SMTPException, OSError) as exc:  # refused, timed out, TLS, authentication, rejected
        return f"{type(exc).__name__}: {exc}"
    return ""


def _post_webhook(url: str, payload: dict[str, str]) -> str:
    if not url:
        return "No webhook URL any more."
    try:
        # No redirects: the URL the person saved is the only one the worker posts to.
        response = requests.post(
            url, json=payload, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_SECONDS, allow_redirects=False
        )
    except requests.RequestException as exc:
        return f"{type(exc).__name__}: {exc}"
    if not 200 <= response.status_code < 300:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return ""
