"""What researchers ask for: GPU offerings, images, workspaces and their event timeline."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from portal.models import Team, slug_validator


class WorkspaceQuerySet(models.QuerySet["Workspace"]):
    def visible_to(self, user: Any) -> WorkspaceQuerySet:
        """A researcher sees their teams' workspaces; finance and operators see all."""
        if not getattr(user, "is_authenticated", False) or not user.is_active:
            return self.none()
        if user.is_finance or user.is_operator:
            return self.all()
        return self.filter(team__memberships__user=user)

    def active(self) -> WorkspaceQuerySet:
        return self.filter(state__in=Workspace.ACTIVE_STATES)


class GpuOffering(models.Model):
    """One shape a user may ask for, as the cluster expresses it (managed by operators).

    ``resource_name`` is the device plugin's extended resource; ``node_selector`` holds the GPU Feature
    Discovery labels that pick nodes with it. ``gpu_equivalents`` weighs one unit for quota and cost:
    a whole GPU is 1, a MIG slice its share of compute and memory, a time-sliced replica 1/replicas.
    """

    class Kind(models.TextChoices):
        WHOLE = "whole", "Whole GPU"
        MIG = "mig", "MIG slice"
        SHARED = "shared", "Shared GPU (time-sliced)"
        CPU = "cpu", "CPU only"

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    display_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    gpu_model = models.CharField(max_length=64, blank=True, help_text="Catalogue key, e.g. H100-80GB-HBM3.")
    mig_profile = models.CharField(max_length=32, blank=True)
    replicas = models.PositiveSmallIntegerField(default=1, help_text="Time-slicing replicas per GPU.")
    resource_name = models.CharField(max_length=100, blank=True, help_text="e.g. nvidia.com/mig-1g.10gb")
    node_selector = models.JSONField(default=dict, blank=True)
    gpu_equivalents = models.DecimalField(max_digits=7, decimal_places=4, default=Decimal(0))
    allowed_counts = models.JSONField(default=list, help_text="GPU counts a request may ask for, e.g. [1, 2, 4, 8].")
    cpu_millis_default = models.PositiveIntegerField(default=4000)
    cpu_millis_max = models.PositiveIntegerField(default=32000)
    memory_mib_default = models.PositiveIntegerField(default=16384)
    memory_mib_max = models.PositiveIntegerField(default=262144)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ("kind", "gpu_model", "slug")

    def __str__(self) -> str:
        return self.display_name

    @property
    def flavour(self) -> str:
        """The quota flavour: the GPU model (CPU-only offerings have none)."""
        return self.gpu_model

    @property
    def isolation_note(self) -> str:
        if self.kind == self.Kind.SHARED:
            return "Shared GPU: no memory or fault isolation from the other workspaces on the same GPU."
        if self.kind == self.Kind.MIG:
            return "MIG slice: hardware-isolated memory and compute."
        return ""


class Image(models.Model):
    """A container image from the operators' catalogue."""

    class Kind(models.TextChoices):
        NOTEBOOK = "notebook", "Notebook"
        JOB = "job", "Training job"

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    display_name = models.CharField(max_length=100)
    reference = models.CharField(max_length=255, help_text="Registry/repository:tag or @digest.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ("kind", "display_name")

    def __str__(self) -> str:
        return self.display_name


class AllowedRegistry(models.Model):
    """A registry prefix from which users may run custom images, e.g. ``nvcr.io/nvidia/``."""

    prefix = models.CharField(max_length=200, unique=True)

    class Meta:
        ordering = ("prefix",)
        verbose_name_plural = "allowed registries"

    def __str__(self) -> str:
        return self.prefix


def kind_problems(kind: str, *, workers: int, command: list[str]) -> dict[str, str]:
    """What a workspace of ``kind`` may not be, by field: a notebook has one worker and runs the image's
    Jupyter server; a training job says what to run."""
    if kind == Workspace.Kind.NOTEBOOK:
        problems = {}
        if workers != 1:
            problems["workers"] = "A notebook has exactly one worker."
        if command:
            problems["command"] = "Notebooks run the image's Jupyter server; a command is only for training jobs."
        return problems
    if not command:
        return {"command": 'A training job needs a command, e.g. ["python", "train.py"].'}
    return {}


class Workspace(models.Model):
    """A researcher's notebook or training job, from request to its end."""

    class Kind(models.TextChoices):
        NOTEBOOK = "notebook", "Notebook"
        JOB = "job", "Training job"

    class Priority(models.TextChoices):
        """How urgent; the Kubernetes PriorityClass values live in ``scheduling.priorities``."""

        INTERACTIVE = "interactive", "Interactive (notebooks)"
        HIGH = "high", "High"
        NORMAL = "normal", "Normal"
        BATCH = "batch", "Batch (preemptible first)"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        ADMITTED = "admitted", "Admitted"
        PROVISIONING = "provisioning", "Provisioning"
        RUNNING = "running", "Running"
        STOPPING = "stopping", "Stopping"
        STOPPED = "stopped", "Stopped"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        PREEMPTED = "preempted", "Preempted"
        EXPIRED = "expired", "Expired"
        CANCELLED = "cancelled", "Cancelled"
        REJECTED = "rejected", "Rejected"
        DELETED = "deleted", "Deleted"

    # Holding cluster resources (and quota): what admission counts and reconcile watches.
    ACTIVE_STATES = (State.ADMITTED, State.PROVISIONING, State.RUNNING, State.STOPPING)
    # Nothing runs and nothing will unless the user resumes.
    FINAL_STATES = (
        State.STOPPED,
        State.SUCCEEDED,
        State.FAILED,
        State.PREEMPTED,
        State.EXPIRED,
        State.CANCELLED,
        State.REJECTED,
        State.DELETED,
    )
    RESUMABLE_STATES = (State.STOPPED, State.PREEMPTED, State.EXPIRED, State.FAILED)

    name = models.CharField(
        max_length=40,
        validators=[RegexValidator(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", "Use lower-case letters, digits and hyphens.")],
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="workspaces")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workspaces")
    offering = models.ForeignKey(GpuOffering, on_delete=models.PROTECT, related_name="workspaces")
    gpu_count = models.PositiveSmallIntegerField(default=1)
    workers = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(16)])
    image = models.CharField(max_length=255)
    command = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    cpu_millis = models.PositiveIntegerField()
    memory_mib = models.PositiveIntegerField()
    max_runtime_seconds = models.PositiveIntegerField()
    home_volume_gib = models.PositiveSmallIntegerField(default=10)
    gpu_equivalents = models.DecimalField(max_digits=8, decimal_places=4, help_text="Weight for quota, all workers.")

    priority = models.CharField(max_length=16, choices=Priority.choices, default=Priority.NORMAL)
    borrowing = models.BooleanField(default=False, help_text="Admitted beyond the team's guarantee (preemptible).")
    preempt_at = models.DateTimeField(null=True, blank=True, help_text="End of the notice before preemption.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    reason = models.CharField(max_length=500, blank=True, help_text="Why it is in its state, in plain words.")
    node_name = models.CharField(max_length=253, blank=True)
    pinned_node = models.CharField(
        max_length=253, blank=True, help_text="The node the placement engine chose; its pods are pinned there."
    )
    token_salt = models.CharField(max_length=32, blank=True)
    teardown_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        db_index=True,
        help_text="Set while removing its cluster objects is owed; the reconcile loop finishes a lost teardown.",
    )

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("team", "state"))]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()}, {self.state})"

    def clean(self) -> None:
        errors = kind_problems(self.kind, workers=self.workers, command=self.command)
        if self.kind == self.Kind.NOTEBOOK and self.priority != self.Priority.INTERACTIVE:
            errors["priority"] = "Notebooks are interactive: they run within guarantee and are never preempted."
        if self.offering_id and (self.offering.kind == GpuOffering.Kind.CPU) != (self.gpu_count == 0):
            errors["gpu_count"] = "CPU-only offerings have no GPUs; GPU offerings need at least one."
        if errors:
            raise ValidationError(errors)

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES


class WorkspaceEvent(models.Model):
    """One transition or notable happening, with a reason a person can read."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, blank=True)
    reason = models.CharField(max_length=500)
    source = models.CharField(max_length=32, default="portal")
    details: models.JSONField[Any, Any] = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("at", "id")

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.from_state}->{self.to_state}: {self.reason}"
