"""Quotas and team policies: what each team is guaranteed per GPU flavour, what it may borrow, and the
rules its lead sets within the bounds operators allow."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.fields import NOT_PROVIDED

from portal.models import Department, Team


def _units(*, default: Decimal | None = None, help_text: str = "") -> models.DecimalField[Decimal, Decimal]:
    """GPU-equivalents, four decimals (a MIG 1g slice weighs 0.1429)."""
    return models.DecimalField(
        max_digits=8,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0))],
        default=NOT_PROVIDED if default is None else default,
        help_text=help_text,
    )


# Callables, so migrations do not freeze the values of the settings they come from.
def default_runtime_hours() -> int:
    return int(settings.WORKSPACE_DEFAULT_RUNTIME_HOURS)


def max_runtime_hours() -> int:
    return int(settings.WORKSPACE_MAX_RUNTIME_HOURS)


class TeamQuota(models.Model):
    """A team's guaranteed GPU-equivalents of one flavour (GPU model, e.g. ``H100-80GB-HBM3``), and how
    much more its batch jobs may borrow from idle capacity.

    Admission locks this row (``select_for_update``) while it counts the team's use, so concurrent
    requests cannot both take the last unit.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    flavour = models.CharField(max_length=64, help_text="GPU model key; quota is counted per model.")
    guaranteed = _units(default=Decimal(0))
    borrow_limit = _units(default=Decimal(0), help_text="How far above the guarantee batch jobs may borrow.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("team__name", "flavour")
        constraints = [models.UniqueConstraint(fields=("team", "flavour"), name="one_quota_per_team_flavour")]

    def __str__(self) -> str:
        return f"{self.team}: {self.guaranteed} x {self.flavour}"


class DepartmentCap(models.Model):
    """The most GPU-equivalents of one flavour a department's teams may be guaranteed together."""

    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="caps")
    flavour = models.CharField(max_length=64)
    cap = _units()

    class Meta:
        ordering = ("department__name", "flavour")
        constraints = [models.UniqueConstraint(fields=("department", "flavour"), name="one_cap_per_department_flavour")]

    def __str__(self) -> str:
        return f"{self.department}: at most {self.cap} x {self.flavour}"


class TeamPolicy(models.Model):
    """Rules a lead sets for their team, within the portal-wide bounds (settings.WORKSPACE_*)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="policy")
    default_runtime_hours = models.PositiveSmallIntegerField(default=default_runtime_hours)
    max_runtime_hours = models.PositiveSmallIntegerField(default=max_runtime_hours)
    allowed_offerings = models.ManyToManyField(
        "workspaces.GpuOffering", blank=True, related_name="+", help_text="Empty: every enabled offering."
    )
    # Idle reclaim (scheduling/telemetry/idle_rule.py), within the operators' IDLE_* bounds.
    idle_threshold_percent = models.PositiveSmallIntegerField(default=5, help_text="GPU activity below this is idle.")
    idle_window_minutes = models.PositiveSmallIntegerField(default=60)
    idle_grace_minutes = models.PositiveSmallIntegerField(default=15, help_text="From the warning to the reclaim.")
    keep_alive_hours = models.PositiveSmallIntegerField(default=4, help_text="How long one keep-alive lasts.")
    keep_alives_per_run = models.PositiveSmallIntegerField(default=2, help_text="Keep-alives per start or resume.")
    stuck_window_minutes = models.PositiveSmallIntegerField(default=120, help_text="Training jobs: flag after this.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "team policies"

    def __str__(self) -> str:
        return f"Policy of {self.team}"


class MemberCap(models.Model):
    """A lead's limit on one member's share of the team's quota of one flavour."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="member_caps")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    flavour = models.CharField(max_length=64)
    cap = _units()

    class Meta:
        ordering = ("team__name", "user__username", "flavour")
        constraints = [models.UniqueConstraint(fields=("team", "user", "flavour"), name="one_cap_per_member_flavour")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}: at most {self.cap} x {self.flavour}"


class DecayedUsage(models.Model):
    """A team's time-decayed use of one flavour, the fair-share input of queue ordering, carried from one
    scheduling cycle to the next (``scheduling/quota/fair_share.py``). In admission units (thousandths of a
    GPU-equivalent)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="decayed_usage")
    flavour = models.CharField(max_length=64)
    usage = models.FloatField(default=0.0)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=("team", "flavour"), name="one_decayed_usage_per_flavour")]

    def __str__(self) -> str:
        return f"{self.team} {self.flavour}: {self.usage:.0f}"


class ActivitySample(models.Model):
    """What one running workspace did over one collection interval (``scheduling/loops/telemetry.py``):
    its GPUs' engine activity and memory, and for notebooks the kernels and the last user activity.

    A figure that could not be read is NULL, never 0: missing telemetry must not look idle. ``seconds`` is
    the span the row stands for and ``gpu_seconds`` the part of it with a GPU figure, so activity-weighted
    GPU-hours are ``sum(gpu_active * gpu_seconds) / 3600`` times the workspace's GPU-equivalents, for raw
    rows and hourly ones alike (``scheduling/loops/telemetry_retention.py``). ``idle_gpu_seconds`` is the part
    of ``gpu_seconds`` whose activity was below the idle test (``IDLE_ACTIVITY``): GPU time held idle."""

    class Source(models.TextChoices):
        PROMETHEUS = "prometheus"
        SCRAPE = "scrape"
        NONE = "none", "no GPU telemetry"

    workspace = models.ForeignKey("workspaces.Workspace", on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()  # when the collection ran
    seconds = models.PositiveIntegerField()
    gpu_seconds = models.PositiveIntegerField(default=0)
    idle_gpu_seconds = models.PositiveIntegerField(default=0)
    hourly = models.BooleanField(default=False)  # one row for the hour from ``at``, compacted from raw ones
    source = models.CharField(max_length=10, choices=Source.choices)
    gpu_active = models.FloatField(null=True)  # mean GR engine activity of its devices, 0-1
    gpu_observed_at = models.DateTimeField(null=True)  # how fresh the GPU figures are
    fb_used_mib = models.FloatField(null=True)
    fb_total_mib = models.FloatField(null=True)
    kernels = models.PositiveSmallIntegerField(null=True)  # notebooks only
    busy_kernels = models.PositiveSmallIntegerField(null=True)
    connections = models.PositiveSmallIntegerField(null=True)
    last_activity = models.DateTimeField(null=True)  # Jupyter's latest user or kernel activity

    class Meta:
        indexes = [
            models.Index(fields=("workspace", "at"), name="sample_workspace_at"),
            models.Index(fields=("hourly", "at"), name="sample_hourly_at"),  # what compaction picks
        ]
        ordering = ("workspace", "at")

    def __str__(self) -> str:
        return f"workspace {self.workspace_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class LoopStat(models.Model):
    """How the periodic loops run, whichever process ran them: passes, their seconds (cumulative counts
    per ``scheduling.loops.passes.BUCKETS`` bound, as a Prometheus histogram keeps them) and when the last
    one ended. ``/metrics`` reads these rows, so the figures do not depend on which worker is scraped."""

    loop = models.CharField(max_length=32, primary_key=True)
    passes = models.PositiveBigIntegerField(default=0)
    failures = models.PositiveBigIntegerField(default=0)
    seconds_total = models.FloatField(default=0.0)
    buckets: models.JSONField[list[int], list[int]] = models.JSONField(default=list)
    last_finished_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.loop}: {self.passes} passes"


class KubeApiErrorCount(models.Model):
    """Failed Kubernetes API calls by status ("500", "409", "connection"...), added up from every process
    (``scheduling.loops.passes.flush_api_errors``)."""

    status = models.CharField(max_length=16, primary_key=True)
    count = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.status}: {self.count}"
