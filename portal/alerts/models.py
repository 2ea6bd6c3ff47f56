"""The alerts' state and what was told. Loaded with the portal's models (end of ``portal/models.py``)."""

from __future__ import annotations

from django.db import models

from portal.alerts.conditions import duration
from portal.alerts.kinds import CRITICAL, KINDS, WARNING
from portal.alerts.states import FIRED, RESOLVED

KIND_CHOICES = [(k.name, k.label) for k in KINDS.values()]
SEVERITY_CHOICES = [(CRITICAL, "Critical"), (WARNING, "Warning")]


class OpsAlert(models.Model):
    """One alert key's state (``portal.alerts.states.AlertState``): kept across checks so that ``for`` holds
    as Prometheus holds it. A row is made the first time its condition holds (the API alert's at once, for
    its counter) and kept: it carries the last firing."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=32, choices=KIND_CHOICES)
    severity = models.CharField(max_length=16, choices=SEVERITY_CHOICES)
    team = models.ForeignKey(
        "portal.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="ops_alerts"
    )  # the scope: None for the whole portal
    pending_since = models.DateTimeField(null=True, blank=True)
    firing_since = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    checked_at = models.DateTimeField()

    class Meta:
        ordering = ("key",)

    def __str__(self) -> str:
        return self.key

    @property
    def firing(self) -> bool:
        return self.firing_since is not None and self.resolved_at is None


class OpsAlertNotice(models.Model):
    """An alert's firing started, or ended: made once (the constraint), told once per recipient
    (``Notification.ops_notice``)."""

    CHANGE_CHOICES = [(FIRED, "Fired"), (RESOLVED, "Resolved")]

    alert = models.ForeignKey(OpsAlert, on_delete=models.CASCADE, related_name="notices")
    change = models.CharField(max_length=16, choices=CHANGE_CHOICES)
    episode = models.DateTimeField(help_text="When the firing started.")
    at = models.DateTimeField()
    value = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=500)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-at", "-id")
        constraints = [
            models.UniqueConstraint(fields=("alert", "episode", "change"), name="one_notice_per_firing_and_change")
        ]

    def __str__(self) -> str:
        return f"{self.alert.key} {self.change} {self.at:%Y-%m-%d %H:%M}"

    @property
    def lasted(self) -> str:
        """How long the firing lasted (for a resolution), in words."""
        return duration((self.at - self.episode).total_seconds())
