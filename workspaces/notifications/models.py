"""Notification rows and each person's choices. Loaded with the app's models (end of ``workspaces/models.py``)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse

from workspaces.notifications.kinds import DEFAULT_EMAIL_KINDS, DEFAULT_WEBHOOK_KINDS, Kind, valid_kinds

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Delivery(models.TextChoices):
    """One channel of one notification. ``sending`` is claimed by a task: a retried task skips it rather than
    send twice (at most once per channel; a worker lost mid-send leaves it there, see docs/notifications.md)."""

    OFF = "off", "Not wanted"
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class NotificationQuerySet(models.QuerySet["Notification"]):
    def visible_to(self, user: Any) -> NotificationQuerySet:
        """The one access rule: a person sees their own notifications, nobody else's (operators included)."""
        if not getattr(user, "is_authenticated", False) or not user.is_active:
            return self.none()
        return self.filter(recipient_id=user.pk)

    def unread(self) -> NotificationQuerySet:
        return self.filter(read_at__isnull=True)


# What a listing of notifications joins so that each row's name, team and link cost no query of their own.
LIST_RELATED = ("workspace__team", "budget_alert__team", "ops_notice__alert__team")


class Notification(models.Model):
    """One notifiable thing for one recipient, with how its email and webhook went: a workspace event
    (``event`` and its ``workspace``), a team budget's threshold crossed (``budget_alert``) or an operations
    alert fired or resolved (``ops_notice``): exactly one of them."""

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    workspace = models.ForeignKey(
        "workspaces.Workspace", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.ForeignKey(
        "workspaces.WorkspaceEvent", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    budget_alert = models.ForeignKey(
        "portal.BudgetAlert", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    ops_notice = models.ForeignKey(
        "portal.OpsAlertNotice", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    text = models.CharField(max_length=600)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    email_status = models.CharField(max_length=16, choices=Delivery.choices, default=Delivery.OFF)
    email_attempts = models.PositiveSmallIntegerField(default=0)
    email_error = models.CharField(max_length=300, blank=True)
    webhook_status = models.CharField(max_length=16, choices=Delivery.choices, default=Delivery.OFF)
    webhook_attempts = models.PositiveSmallIntegerField(default=0)
    webhook_error = models.CharField(max_length=300, blank=True)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            # A retried delivery task finds the row it made before instead of making a second one.
            models.UniqueConstraint(fields=("event", "recipient"), name="one_notification_per_event_and_recipient"),
            models.UniqueConstraint(
                fields=("budget_alert", "recipient"),
                condition=Q(budget_alert__isnull=False),
                name="one_notification_per_budget_alert_and_recipient",
            ),
            models.UniqueConstraint(
                fields=("ops_notice", "recipient"),
                condition=Q(ops_notice__isnull=False),
                name="one_notification_per_ops_notice_and_recipient",
            ),
            models.CheckConstraint(
                condition=Q(event__isnull=False, budget_alert__isnull=True, ops_notice__isnull=True)
                | Q(event__isnull=True, budget_alert__isnull=False, ops_notice__isnull=True)
                | Q(event__isnull=True, budget_alert__isnull=True, ops_notice__isnull=False),
                name="notification_of_one_event_budget_alert_or_ops_notice",
            ),
        ]
        indexes = [
            # The unread badge on every page counts these.
            models.Index(fields=("recipient",), condition=Q(read_at__isnull=True), name="notification_unread"),
            models.Index(fields=("recipient", "-created_at"), name="notification_recipient_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id}: {self.text[:60]}"

    @property
    def team(self) -> Any:
        """The team it concerns: the budget's, or the workspace's (select_related ``workspace__team`` and
        ``budget_alert__team`` to read it without a query per row); an operations alert's team, if it has one."""
        if self.ops_notice_id is not None:
            return self.ops_notice.alert.team if self.ops_notice is not None else None
        if self.budget_alert_id is not None:
            return self.budget_alert.team if self.budget_alert is not None else None
        return self.workspace.team if self.workspace is not None else None

    @property
    def subject_name(self) -> str:
        """What it is about, in a word: the workspace's name, or for a budget the team's; for an operations
        alert its team's, or "Portal"."""
        if self.workspace is not None:
            return str(self.workspace.name)
        if self.ops_notice_id is not None and self.team is None:
            return "Portal"
        team = self.team
        return str(team.name) if team is not None else ""

    @property
    def link_path(self) -> str:
        """Where it leads in the portal: the workspace, for a budget the team's cost page, for an operations
        alert the alerts page."""
        if self.ops_notice_id is not None:
            return reverse("alerts")
        if self.budget_alert is not None:
            return reverse("team-costs", args=[self.budget_alert.team_id])
        if self.workspace_id is not None:
            return reverse("workspace-detail", args=[self.workspace_id])
        return reverse("notifications")


def validate_no_control_characters(value: str) -> None:
    if _CONTROL.search(value):
        raise ValidationError("Control characters (tabs, line breaks, NUL, ...) are not allowed here.", code="control")


def validate_kinds(value: Any) -> None:
    if not valid_kinds(value):
        raise ValidationError(f"A list of notification kinds, each one of: {', '.join(Kind.values)}.")


def default_email_kinds() -> list[str]:
    return list(DEFAULT_EMAIL_KINDS)


def default_webhook_kinds() -> list[str]:
    return list(DEFAULT_WEBHOOK_KINDS)


class NotificationPreference(models.Model):
    """Which kinds a person gets by email and by webhook (in the portal: always all). Without a row, the
    defaults hold (``for_user``)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_kinds = models.JSONField(default=default_email_kinds, blank=True, validators=[validate_kinds])
    webhook_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_no_control_characters, URLValidator(schemes=["http", "https"])],
        help_text="A Slack or Microsoft Teams incoming webhook (https://...); empty: none.",
    )
    webhook_kinds = models.JSONField(default=default_webhook_kinds, blank=True, validators=[validate_kinds])
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"notification preferences of {self.user_id}"

    @classmethod
    def for_user(cls, user: Any) -> NotificationPreference:
        """The person's saved choices, or the defaults (unsaved)."""
        found = cls.objects.filter(user_id=user.pk).first()
        return found if found is not None else cls(user_id=user.pk)

    def wants_email(self, kind: str) -> bool:
        return kind in self.email_kinds

    def wants_webhook(self, kind: str) -> bool:
        return bool(self.webhook_url) and kind in self.webhook_kinds
