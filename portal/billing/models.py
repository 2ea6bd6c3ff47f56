"""Billing rows: the rate card, the usage ledger (pods and capacity), closed months and budgets.

Loaded with the organisation's models (end of ``portal/models.py``). The ledger is written only by
:mod:`portal.billing.ledger` from what the reconcile loop observed in the cluster; reports read it.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


def _money(help_text: str) -> models.DecimalField[Decimal, Decimal]:
    return models.DecimalField(
        max_digits=14, decimal_places=6, validators=[MinValueValidator(Decimal(0))], help_text=help_text
    )


class RateCardEntry(models.Model):
    """One effective-dated hourly price for a GPU model.

    ``shape`` empty: the price of one whole GPU of the model; every shape without a price of its own costs
    its GPU-equivalents times this (a 1g.10gb slice of an A100 1/7, a share of four time-sliced GPUs 1/4).
    Otherwise the shape's own price for one unit: ``whole``, ``mig-<profile>`` (``mig-1g.10gb``) or
    ``shared-<replicas>`` (``shared-4``: one of four time-sliced replicas). Prices apply from
    ``effective_from`` until the next entry for the same model and shape; entries are never edited, a new
    one supersedes (``portal/billing/actions.py``).
    """

    gpu_model = models.CharField(max_length=64, help_text="Catalogue key, e.g. H100-80GB-HBM3.")
    shape = models.CharField(max_length=40, blank=True, help_text="Empty for the per-GPU price of the model.")
    hourly_price = _money(help_text="Price of one unit for one hour, in BILLING_CURRENCY.")
    effective_from = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ("gpu_model", "shape", "effective_from")
        constraints = [
            models.UniqueConstraint(fields=("gpu_model", "shape", "effective_from"), name="one_rate_per_shape_instant")
        ]

    def __str__(self) -> str:
        return f"{self.gpu_model} {self.shape or 'per GPU'}: {self.hourly_price}/h from {self.effective_from:%Y-%m-%d}"


class LedgerCursor(models.Model):
    """When the ledger last recorded an observation, per stream (``pods``, ``capacity``). Its row is the
    lock that serialises ledger passes; a pass older than the cursor is stale and changes nothing."""

    stream = models.CharField(max_length=16, unique=True)
    observed_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.stream} at {self.observed_at}"


class UsageInterval(models.Model):
    """One pod holding GPUs from ``started_at`` to ``ended_at`` at one rate, within one month.

    Opened when the reconcile loop first sees the pod running, extended (``last_seen_at``) each pass that
    sees it again, closed when it is gone; split at rate changes and month boundaries. Who and what are
    copied in at opening, so a closed month keeps its figures when a team later moves department.
    """

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.PROTECT, related_name="usage")
    pod_uid = models.CharField(max_length=64)
    pod_name = models.CharField(max_length=253)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    team = models.ForeignKey("portal.Team", on_delete=models.PROTECT, related_name="usage")
    department = models.ForeignKey("portal.Department", on_delete=models.PROTECT, related_name="usage")
    cost_centre = models.CharField(max_length=32)
    offering = models.ForeignKey("workspaces.GpuOffering", on_delete=models.PROTECT, related_name="usage")
    offering_kind = models.CharField(max_length=16)
    gpu_model = models.CharField(max_length=64)
    shape = models.CharField(max_length=40)
    units = models.PositiveSmallIntegerField(help_text="GPUs, MIG slices or replicas this pod holds.")
    gpu_equivalents = models.DecimalField(max_digits=8, decimal_places=4, help_text="What this pod holds.")
    rate = _money(help_text="This pod's price per hour.")
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    period = models.DateField(help_text="First day of the month the interval is charged in.")
    adjusts = models.DateField(
        null=True,
        blank=True,
        help_text="The closed month this late usage belongs to; it is booked in ``period`` as an adjustment.",
    )
    # What telemetry saw while it was open, in GPU-equivalent seconds (loops/telemetry.py adds each
    # collection to the workspace's open intervals): with a GPU figure at all, weighted by GPU activity
    # (used), and below the idle test (idle). Held time without a figure is unmeasured, never idle.
    measured_gpu_seconds = models.FloatField(default=0.0)
    used_gpu_seconds = models.FloatField(default=0.0)
    idle_gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ("started_at", "id")
        constraints = [
            models.UniqueConstraint(fields=("pod_uid",), condition=Q(ended_at__isnull=True), name="one_open_per_pod"),
            models.CheckConstraint(condition=Q(last_seen_at__gte=models.F("started_at")), name="usage_forward"),
        ]
        indexes = [
            models.Index(fields=("period", "team"), name="usage_period_team"),
            models.Index(fields=("workspace", "started_at"), name="usage_workspace"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_name} {self.started_at:%Y-%m-%d %H:%M}-{self.ended_at or 'open'}"


class CapacityInterval(models.Model):
    """The fleet: ``gpus`` GPUs of one model in the cluster (GFD's count, broken or cordoned included:
    what the organisation pays for) from ``started_at`` to ``ended_at``, within one month, at one per-GPU
    price. Recorded like pods, from the nodes the reconcile loop lists."""

    gpu_model = models.CharField(max_length=64)
    gpus = models.PositiveIntegerField()
    rate = _money(help_text="The model's price of one whole GPU for one hour.")
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    period = models.DateField()

    class Meta:
        ordering = ("started_at", "id")
        constraints = [
            models.UniqueConstraint(
                fields=("gpu_model",), condition=Q(ended_at__isnull=True), name="one_open_capacity_per_model"
            ),
            models.CheckConstraint(condition=Q(last_seen_at__gte=models.F("started_at")), name="capacity_forward"),
        ]
        indexes = [models.Index(fields=("period", "gpu_model"), name="capacity_period_model")]

    def __str__(self) -> str:
        return f"{self.gpus} x {self.gpu_model} from {self.started_at:%Y-%m-%d %H:%M}"


class ClosedMonth(models.Model):
    """A month finance closed: its report as it stood then (``data``: the ledger's finest sums, labels and the
    fleet, see ``portal/billing/closing.py``), which every later export of the month is made from. The ledger
    never changes a closed month's rows: usage that arrives late is booked in the next open month."""

    period = models.DateField(unique=True)
    closed_at = models.DateTimeField()
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    data = models.JSONField()

    class Meta:
        ordering = ("-period",)

    def __str__(self) -> str:
        return f"{self.period:%Y-%m} closed {self.closed_at:%Y-%m-%d}"


class Budget(models.Model):
    """A team's monthly budget, in money or GPU-hours, set by finance or operators (leads see it).

    At 50, 80 and 100 % of it the team's leads are told (at 100 % its members too); at 100 % the policy
    decides what new requests meet: nothing (warn only), a refusal for training jobs, or for everything."""

    class Unit(models.TextChoices):
        MONEY = "money", "Money"
        GPU_HOURS = "gpu_hours", "GPU-hours"

    class Policy(models.TextChoices):
        WARN = "warn", "Warn only"
        BLOCK_BATCH = "block_batch", "Refuse new training jobs at 100 %"
        BLOCK_ALL = "block_all", "Refuse every new request at 100 %"

    team = models.OneToOneField("portal.Team", on_delete=models.CASCADE, related_name="budget")
    amount = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))])
    unit = models.CharField(max_length=16, choices=Unit.choices, default=Unit.MONEY)
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.BLOCK_BATCH)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ("team__name",)
        constraints = [models.CheckConstraint(condition=Q(amount__gt=0), name="budget_positive")]

    def __str__(self) -> str:
        return f"{self.team}: {self.amount} {self.unit} a month"


class BudgetAlert(models.Model):
    """A threshold of a team's budget crossed in a month: made once (the constraint), notified once."""

    team = models.ForeignKey("portal.Team", on_delete=models.CASCADE, related_name="budget_alerts")
    period = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    spent = models.DecimalField(max_digits=16, decimal_places=4)
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    unit = models.CharField(max_length=16, choices=Budget.Unit.choices)

    class Meta:
        ordering = ("-at",)
        constraints = [
            models.UniqueConstraint(fields=("team", "period", "threshold"), name="one_alert_per_threshold_month")
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.period:%Y-%m}: {self.threshold} %"
