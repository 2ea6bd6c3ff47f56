"""What the delivery tasks do for one event (or a batch of events written together), one budget alert or one
operations alert's notice: a row per recipient, then email and webhook per their choices.

Idempotent per (event or alert, recipient, channel): the row is unique per event (alert) and recipient, and
each channel is
claimed with a compare-and-set (``pending``/``failed`` -> ``sending``) before anything is sent, so a
redelivered or retried task never sends a channel that went out. A channel that fails is logged and marked
``failed`` with the error, and tried again by the task's bounded retries (``NOTIFY_MAX_ATTEMPTS`` in all).
Nothing here raises for an SMTP server or webhook that is down.

A batch costs a few queries in all for its events, recipients, preferences and rows, not a few per event: most
recipients want neither email nor webhook, and their rows then need nothing more.
"""

from __future__ import annotations

import logging
import smtplib
import time
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import requests
from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import F, Q
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
OWED = (Delivery.PENDING, Delivery.FAILED)  # a channel in one of these is sent (again) while it has attempts left


@dataclass
class Outcome:
    notifications: int = 0
    sent: int = 0
    failed: int = 0
    retry: bool = False  # a channel failed and has attempts left
    rest: list[int] = field(default_factory=list)  # a batch's events not reached before its deadline

    def as_dict(self) -> dict[str, Any]:
        return {"notifications": self.notifications, "sent": self.sent, "failed": self.failed, "retry": self.retry}


@dataclass
class Notice:
    """One notifiable thing and who hears of it. ``of`` names it as its rows do (``{"event": ...}``,
    ``{"budget_alert": ...}`` or ``{"ops_notice": ...}``); ``extra`` is more for its rows."""

    of: dict[str, Any]
    kind: str
    message: Message
    link: str
    users: list[User]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> int:
        [thing] = self.of.values()
        return int(thing.pk)


def recipients(event: WorkspaceEvent, kind: str) -> list[User]:
    """The owner; for a possibly stuck job the team's leads too. Only people who can still sign in."""
    return recipients_of([(event, kind)])[event.pk]


def recipients_of(events: Collection[tuple[WorkspaceEvent, str]]) -> dict[int, list[User]]:
    """:func:`recipients` of each (event, kind) of a batch, by event id, in two queries for all of them."""
    lead_teams = {event.workspace.team_id for event, kind in events if kind in LEADS_TOO}
    leads: defaultdict[int, set[int]] = defaultdict(set)
    if lead_teams:
        rows = Membership.objects.filter(team_id__in=lead_teams, role=Membership.Role.LEAD)
        for team_id, user_id in rows.values_list("team_id", "user_id"):
            leads[team_id].add(user_id)
    wanted = {
        event.pk: {event.workspace.owner_id} | (leads[event.workspace.team_id] if kind in LEADS_TOO else set())
        for event, kind in events
    }
    active = User.objects.filter(is_active=True).in_bulk({pk for ids in wanted.values() for pk in ids})
    return {event_id: [active[pk] for pk in sorted(ids) if pk in active] for event_id, ids in wanted.items()}


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
    return deliver_many([event_id])


def deliver_many(event_ids: Collection[int], *, deadline: float | None = None) -> Outcome:
    """:func:`deliver` for the events of a batch, read together with their workspaces, recipients and rows.
    Past ``deadline`` (``time.monotonic()``) the events not reached are left in ``rest``, their rows made."""
    found = WorkspaceEvent.objects.select_related("workspace").filter(pk__in=event_ids).order_by("pk")
    # An event gone (its workspace deleted meanwhile) or with nothing to tell is skipped.
    events = [(event, kind) for event in found if (kind := classify(event)) is not None]
    users = recipients_of(events)
    settings_link = absolute(reverse("notification-settings"))
    return _deliver([_event_notice(event, kind, users[event.pk], settings_link) for event, kind in events], deadline)


def _event_notice(event: WorkspaceEvent, kind: str, users: list[User], settings_link: str) -> Notice:
    link = absolute(reverse("workspace-detail", args=[event.workspace_id]))
    message = compose(
        kind, workspace_name=event.workspace.name, reason=event.reason, link=link, settings_link=settings_link
    )
    return Notice({"event": event}, kind, message, link, users, extra={"workspace_id": event.workspace_id})


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
    return _deliver([Notice({"budget_alert": alert}, Kind.BUDGET, message, link, budget_recipients(alert))])


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
    kind = ops_kind(alert.severity)
    outcome = _deliver([Notice({"ops_notice": notice}, kind, message, link, ops_recipients(notice))])
    # The rows are made: the check need not enqueue this notice again (failed channels retry on their own).
    OpsAlertNotice.objects.filter(pk=notice.pk, delivered_at__isnull=True).update(delivered_at=timezone.now())
    return outcome


def _deliver(notices: list[Notice], deadline: float | None = None) -> Outcome:
    """A row per recipient of each notice, then each channel owed; ``retry`` says whether a failed channel of
    the rows handled has attempts left. Past ``deadline`` (looked at between notices, after the first) the
    notices not reached are left in ``rest``: their rows are made, their channels wait for the next task."""
    outcome = Outcome()
    if not notices:
        return outcome
    prefs = _preferences({user.pk for notice in notices for user in notice.users})
    rows = _rows(notices, prefs)
    handled: list[Notification] = []
    for done, notice in enumerate(notices):
        if done and deadline is not None and time.monotonic() > deadline:
            outcome.rest = [later.key for later in notices[done:]]
            break
        for user in notice.users:
            row = rows[notice.key, user.pk]
            handled.append(row)
            outcome.notifications += 1
            if _claim(row, EMAIL):
                _finish(row, EMAIL, _send_email(notice.message, user.email), outcome)
            if _claim(row, WEBHOOK):
                payload = webhook_payload(notice.message, notice.link)
                _finish(row, WEBHOOK, _post_webhook(prefs[user.pk].webhook_url, payload), outcome)
    outcome.retry = _attempts_left(handled, outcome)
    return outcome


def _preferences(user_ids: Collection[int]) -> dict[int, NotificationPreference]:
    """Each person's saved choices, or the defaults (unsaved), as ``NotificationPreference.for_user`` gives
    them, in one query for all."""
    saved = {prefs.user_id: prefs for prefs in NotificationPreference.objects.filter(user_id__in=user_ids)}
    return {pk: saved.get(pk) or NotificationPreference(user_id=pk) for pk in user_ids}


def _rows(notices: list[Notice], prefs: dict[int, NotificationPreference]) -> dict[tuple[int, int], Notification]:
    """Each recipient's row for each notice, by (thing, recipient id), made once: the channels wanted are fixed
    when it is made. The missing ones are inserted together; a row a concurrent delivery made meanwhile is
    kept (unique per thing and recipient) and read back with the others."""
    rows = _read_rows(notices)
    missing = [
        _new_row(notice, user, prefs[user.pk])
        for notice in notices
        for user in notice.users
        if (notice.key, user.pk) not in rows
    ]
    if missing:
        Notification.objects.bulk_create(missing, ignore_conflicts=True)  # which gives the rows no ids
        rows = _read_rows(notices)
    return rows


def _read_rows(notices: list[Notice]) -> dict[tuple[int, int], Notification]:
    [name] = notices[0].of  # one kind of thing per call
    found = Notification.objects.filter(**{f"{name}__in": [notice.key for notice in notices]})
    return {(getattr(row, f"{name}_id"), row.recipient_id): row for row in found}


def _new_row(notice: Notice, user: User, prefs: NotificationPreference) -> Notification:
    email = Delivery.PENDING if prefs.wants_email(notice.kind) and user.email else Delivery.OFF
    webhook = Delivery.PENDING if prefs.wants_webhook(notice.kind) else Delivery.OFF
    return Notification(
        **notice.of,
        **notice.extra,
        recipient=user,
        kind=notice.kind,
        text=notice.message.text,
        email_status=email,
        webhook_status=webhook,
    )


def _claim(notification: Notification, channel: str) -> bool:
    """Take the channel for sending, if it is owed and has attempts left; False if it went or someone has it.
    The row as read already says no without an UPDATE: ``off`` and ``sent`` are final, one ``sending`` is
    another task's (which retries it if it fails), and attempts only grow. Otherwise the UPDATE decides."""
    status, attempts = f"{channel}_status", f"{channel}_attempts"
    if getattr(notification, status) not in OWED or getattr(notification, attempts) >= settings.NOTIFY_MAX_ATTEMPTS:
        return False
    claimed = Notification.objects.filter(
        pk=notification.pk, **{f"{status}__in": OWED, f"{attempts}__lt": settings.NOTIFY_MAX_ATTEMPTS}
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


def _attempts_left(rows: list[Notification], outcome: Outcome) -> bool:
    """Whether a failed channel of these rows has attempts left. Only a channel that failed in this run or was
    ``failed`` as read can be (one a concurrent delivery failed meanwhile is that one's to retry): without
    either, no query."""
    if not outcome.failed and not any(Delivery.FAILED in (row.email_status, row.webhook_status) for row in rows):
        return False
    max_attempts = settings.NOTIFY_MAX_ATTEMPTS
    left = Q(email_status=Delivery.FAILED, email_attempts__lt=max_attempts) | Q(
        webhook_status=Delivery.FAILED, webhook_attempts__lt=max_attempts
    )
    return Notification.objects.filter(left, pk__in=[row.pk for row in rows]).exists()


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
