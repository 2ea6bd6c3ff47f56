"""What researchers ask for: GPU offerings, images, workspaces and their event timeline."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

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


# The OCI distribution reference grammar ([domain[:port]/]path[:tag][@algorithm:hex]), ASCII only; matched
# whole (fullmatch), so no whitespace, control character or trailing newline gets through.
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}"
OCI_REFERENCE = re.compile(
    rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_GPUS_PER_POD = 8  # what a request may ask for (WorkspaceRequestSerializer.gpu_count)


def validate_image_reference(value: str) -> None:
    """A pullable image reference with a tag or digest, e.g. ``nvcr.io/nvidia/pytorch:25.05-py3``."""
    match = OCI_REFERENCE.fullmatch(value)
    if match is None:
        raise ValidationError(
            f"{value!r} is not an image reference like registry.example.org/team/image:tag (lower-case path, "
            "no spaces or control characters).",
            code="invalid_reference",
        )
    if not (match["tag"] or match["digest"]):
        raise ValidationError(f"{value!r} names no tag or digest; add one, e.g. :1.0.", code="invalid_reference")


def validate_no_control_characters(value: str) -> None:
    if _CONTROL.search(value):
        raise ValidationError("Control characters (tabs, line breaks, NUL, ...) are not allowed here.", code="control")


def validate_node_selector(value: Any) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValidationError('A node selector maps label names to values, e.g. {"nvidia.com/gpu.product": "..."}.')
    if any(_CONTROL.search(text) for item in value.items() for text in item):
        raise ValidationError("Node selector labels may not contain control characters.")


def validate_allowed_counts(value: Any) -> None:
    counts_ok = isinstance(value, list) and all(type(n) is int for n in value)
    if not counts_ok or len(set(value)) != len(value):
        raise ValidationError("Allowed counts are a list of distinct whole numbers, e.g. [1, 2, 4, 8].")
    if any(n < 0 or n > MAX_GPUS_PER_POD for n in value):
        raise ValidationError(f"Each allowed count is between 1 and {MAX_GPUS_PER_POD} GPUs per pod.")


def mib_text(mib: int) -> str:
    """MiB as people read them: 10240 -> "10 GiB", 20389 -> "19.9 GiB", 512 -> "512 MiB"."""
    if mib < 1024:
        return f"{mib} MiB"
    gib = Decimal(mib) / 1024
    return f"{gib.quantize(Decimal('0.1')).normalize():f} GiB"


def _in_use_error(what: str, old_slug: str, users: int) -> ValidationError:
    return ValidationError(
        {
            "slug": (
                f"{what} {old_slug!r} is used by {users} workspace{'s' if users != 1 else ''}, whose records and "
                "links name it: its slug cannot change. Add a new entry and disable this one instead."
            )
        },
        code="in_use",
    )


class GpuOffering(models.Model):
    """One shape a user may ask for, as the cluster expresses it (managed by operators).

    ``resource_name`` is the device plugin's extended resource; ``node_selector`` holds the GPU Feature
    Discovery labels that pick nodes with it. ``gpu_equivalents`` weighs one unit for quota and cost:
    a whole GPU is 1, a MIG slice its share of compute and memory, a time-sliced or MPS replica 1/replicas.

    An MPS share (device plugin ``sharing.mps``, GPU-ON-KUBERNETES.md 1.3) caps each client at 1/replicas of
    the GPU's memory and compute: ``memory_cap_mib`` is the GPU's memory (GFD ``nvidia.com/gpu.memory``, MiB)
    divided by the replicas, ``active_thread_percentage`` 100/replicas. The device plugin's MPS control
    daemon enforces both; the pod asks for one replica and carries nothing else.
    """

    class Kind(models.TextChoices):
        WHOLE = "whole", "Whole GPU"
        MIG = "mig", "MIG slice"
        SHARED = "shared", "Shared GPU (time-sliced)"
        MPS = "mps", "Shared GPU (MPS, memory-capped)"
        CPU = "cpu", "CPU only"

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    display_name = models.CharField(max_length=100, validators=[validate_no_control_characters])
    kind = models.CharField(max_length=16, choices=Kind.choices)
    gpu_model = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_no_control_characters],
        help_text="Catalogue key, e.g. H100-80GB-HBM3.",
    )
    mig_profile = models.CharField(max_length=32, blank=True, validators=[validate_no_control_characters])
    replicas = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)], help_text="Time-slicing or MPS replicas per GPU."
    )
    memory_cap_mib = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="MPS shares only: GPU memory each workspace may pin, in MiB; the device plugin sets the GPU's "
        "memory / replicas (e.g. 40960 / 4 = 10240).",
    )
    active_thread_percentage = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="MPS shares only: share of the GPU's compute each workspace may use; the device plugin sets "
        "100 / replicas.",
    )
    resource_name = models.CharField(
        max_length=100,
        blank=True,
        validators=[RegexValidator(r"\A([a-z0-9.-]+/[A-Za-z0-9._-]+)?\Z", "An extended resource like nvidia.com/gpu.")],
        help_text="e.g. nvidia.com/mig-1g.10gb",
    )
    node_selector = models.JSONField(default=dict, blank=True, validators=[validate_node_selector])
    # Dynamic Resource Allocation (scheduling/dra.py): set, pods ask with a ResourceClaim of this DeviceClass and
    # selector instead of the extended resource, which then names the shape the claim stands for in quota,
    # placement and cost (nvidia.com/gpu for a whole GPU, nvidia.com/mig-<profile> for a MIG device).
    device_class = models.CharField(
        max_length=253,
        blank=True,
        validators=[
            RegexValidator(
                r"\A([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?\Z",
                "A DeviceClass name like gpu.nvidia.com.",
            )
        ],
        help_text="DRA only: the DeviceClass claims name (gpu.nvidia.com, mig.nvidia.com); blank: the device plugin.",
    )
    device_selector = models.TextField(
        blank=True,
        max_length=10240,  # the API's limit on a CEL selector
        help_text='DRA only: a CEL selector, e.g. device.attributes["gpu.nvidia.com"].profile == "1g.10gb".',
    )
    # Weighs one unit against quota: at most one whole GPU, and never below nothing (a negative weight let a team
    # hold more GPUs than its guarantee).
    gpu_equivalents = models.DecimalField(
        max_digits=7,
        decimal_places=4,
        default=Decimal(0),
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(1))],
        help_text="Weight of one unit: 1 for a whole GPU, its share for a MIG slice or replica, 0 for CPU only.",
    )
    allowed_counts = models.JSONField(
        default=list,
        validators=[validate_allowed_counts],
        help_text="GPU counts a request may ask for, e.g. [1, 2, 4, 8].",
    )
    cpu_millis_default = models.PositiveIntegerField(default=4000, validators=[MinValueValidator(100)])
    cpu_millis_max = models.PositiveIntegerField(default=32000, validators=[MinValueValidator(100)])
    memory_mib_default = models.PositiveIntegerField(default=16384, validators=[MinValueValidator(256)])
    memory_mib_max = models.PositiveIntegerField(default=262144, validators=[MinValueValidator(256)])
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ("kind", "gpu_model", "slug")
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="cpu") & Q(gpu_equivalents=0))
                | (~Q(kind="cpu") & Q(gpu_equivalents__gt=0, gpu_equivalents__lte=1)),
                name="offering_gpu_equivalents_in_range",
                violation_error_message="GPU-equivalents are 0 for CPU-only offerings, else above 0 and at most 1.",
            ),
            models.CheckConstraint(
                condition=Q(replicas__gte=1),
                name="offering_replicas_positive",
                violation_error_message="An offering has at least one replica per GPU.",
            ),
            models.CheckConstraint(
                condition=Q(cpu_millis_default__lte=F("cpu_millis_max"), memory_mib_default__lte=F("memory_mib_max")),
                name="offering_defaults_within_max",
                violation_error_message="The default CPU and memory may not exceed their maximum.",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        counts = self.allowed_counts if isinstance(self.allowed_counts, list) else []
        if self.kind == self.Kind.CPU:
            if self.gpu_equivalents not in (None, 0):
                errors["gpu_equivalents"] = "A CPU-only offering weighs 0 GPU-equivalents."
            if any(n != 0 for n in counts):
                errors["allowed_counts"] = "A CPU-only offering has no GPUs: leave the counts empty or [0]."
        else:
            if self.gpu_equivalents is not None and self.gpu_equivalents <= 0:
                errors["gpu_equivalents"] = "A GPU offering weighs more than 0 GPU-equivalents (1 for a whole GPU)."
            if not counts or 0 in counts:
                errors["allowed_counts"] = f"A GPU offering allows counts between 1 and {MAX_GPUS_PER_POD}, e.g. [1]."
        errors.update(self._mps_problems(counts))
        errors.update(self._dra_problems())
        if self.cpu_millis_default > self.cpu_millis_max:
            errors["cpu_millis_default"] = f"At most the maximum, {self.cpu_millis_max} millicores."
        if self.memory_mib_default > self.memory_mib_max:
            errors["memory_mib_default"] = f"At most the maximum, {self.memory_mib_max} MiB."
        if errors:
            raise ValidationError(errors)
        if self.pk:
            old_slug = GpuOffering.objects.filter(pk=self.pk).values_list("slug", flat=True).first()
            if old_slug is not None and old_slug != self.slug and (users := self.workspaces.count()):
                raise _in_use_error("Offering", old_slug, users)

    def _dra_problems(self) -> dict[str, str]:
        if not self.device_class:
            return {"device_selector": "A selector needs a DeviceClass."} if self.device_selector else {}
        if self.kind not in (self.Kind.WHOLE, self.Kind.MIG):
            # Pods share a GPU under DRA by naming one claim; the portal does not pool shared claims yet.
            return {"device_class": "DRA offerings are whole GPUs or MIG devices (one claim per pod)."}
        if not self.resource_name:
            return {"resource_name": "The shape a DRA claim stands for, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb."}
        return {}

    @property
    def uses_dra(self) -> bool:
        return bool(self.device_class)

    def _mps_problems(self, counts: list[int]) -> dict[str, str]:
        if self.kind != self.Kind.MPS:
            return {
                name: "Only MPS shares have a per-workspace memory cap and thread percentage."
                for name in ("memory_cap_mib", "active_thread_percentage")
                if getattr(self, name) is not None
            }
        errors = {}
        if self.replicas < 2:
            errors["replicas"] = "An MPS share splits a GPU between at least 2 workspaces."
        if not self.memory_cap_mib:
            errors["memory_cap_mib"] = "An MPS share caps each workspace's GPU memory: the GPU's memory / replicas."
        if not self.active_thread_percentage:
            errors["active_thread_percentage"] = "An MPS share caps each workspace's compute: 100 / replicas."
        if counts and counts != [1]:
            # failRequestsGreaterThanOne defaults to true for MPS: the kubelet refuses more (GPU doc 1.3).
            errors["allowed_counts"] = "An MPS share comes in a count of [1]: one replica per pod."
        return errors

    @property
    def flavour(self) -> str:
        """The quota flavour: the GPU model (CPU-only offerings have none)."""
        return self.gpu_model

    @property
    def isolation_note(self) -> str:
        if self.kind == self.Kind.SHARED:
            return "Shared GPU: no memory or fault isolation from the other workspaces on the same GPU."
        if self.kind == self.Kind.MPS:
            return (
                "MPS share: GPU memory and compute are capped per workspace, but all workspaces on the GPU "
                "share one fault domain (a GPU fault in one can stop the others)."
            )
        if self.kind == self.Kind.MIG:
            return "MIG slice: hardware-isolated memory and compute."
        return ""

    @property
    def memory_cap_note(self) -> str:
        """The MPS memory cap as the request form states it, e.g. "GPU memory cap: 10 GiB per workspace"."""
        if self.kind != self.Kind.MPS or not self.memory_cap_mib:
            return ""
        return f"GPU memory cap: {mib_text(self.memory_cap_mib)} per workspace"


class Image(models.Model):
    """A container image from the operators' catalogue."""

    class Kind(models.TextChoices):
        NOTEBOOK = "notebook", "Notebook"
        JOB = "job", "Training job"

    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    display_name = models.CharField(max_length=100, validators=[validate_no_control_characters])
    reference = models.CharField(
        max_length=255, validators=[validate_image_reference], help_text="Registry/repository:tag or @digest."
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ("kind", "display_name")

    def __str__(self) -> str:
        return self.display_name

    def clean(self) -> None:
        if not self.pk:
            return
        old = Image.objects.filter(pk=self.pk).values_list("slug", "reference").first()
        if old is None or old[0] == self.slug:
            return
        # Workspaces keep the reference they run, so that is what ties them to this entry.
        if users := Workspace.objects.filter(image=old[1]).count():
            raise _in_use_error("Image", old[0], users)


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


# Timeline events (``details["event"]``) of an elastic job's size: a change made, and a shrink under notice.
ELASTIC_SIZE_EVENT = "elastic_size"
SHRINK_NOTICE_EVENT = "shrink_notice"


def elastic_problems(kind: str, offering: GpuOffering, *, min_workers: int | None, max_workers: int) -> dict[str, str]:
    """What an elastic request (``min_workers`` set; ``max_workers`` its most workers) may not be, by field:
    only training jobs on whole GPUs scale, from at least one worker up to their maximum."""
    if min_workers is None:
        return {}
    if kind != Workspace.Kind.JOB:
        return {"min_workers": "Only training jobs are elastic."}
    if offering.kind != GpuOffering.Kind.WHOLE:
        return {"min_workers": "Elastic jobs run on whole GPUs."}
    if not 1 <= min_workers <= max_workers:
        return {"min_workers": f"Between 1 and the most workers ({max_workers})."}
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
        RECLAIMED = "reclaimed", "Reclaimed (idle)"
        CANCELLED = "cancelled", "Cancelled"
        REJECTED = "rejected", "Rejected"
        DELETED = "deleted", "Deleted"

    # The reason of a request no scheduling cycle has looked at yet.
    FIRST_REASON = "Waiting for the scheduler."
    # Holding cluster resources (and quota): what admission counts and reconcile watches.
    ACTIVE_STATES = (State.ADMITTED, State.PROVISIONING, State.RUNNING, State.STOPPING)
    # Nothing runs and nothing will unless the user resumes.
    FINAL_STATES = (
        State.STOPPED,
        State.SUCCEEDED,
        State.FAILED,
        State.PREEMPTED,
        State.EXPIRED,
        State.RECLAIMED,
        State.CANCELLED,
        State.REJECTED,
        State.DELETED,
    )
    RESUMABLE_STATES = (State.STOPPED, State.PREEMPTED, State.EXPIRED, State.RECLAIMED, State.FAILED)

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
    # Elastic training jobs (docs/elastic-jobs.md): both set, or neither. ``workers`` is then the size the job
    # holds now (what quota, placement and the Job's parallelism follow), between the two; it starts at the
    # minimum, grows into idle capacity and shrinks back when a lender needs its quota.
    min_workers = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Elastic jobs: the fewest workers it runs with (its guaranteed part)."
    )
    max_workers = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Elastic jobs: the most workers it grows to on idle capacity."
    )
    # A shrink under notice: the job keeps ``workers`` (and their quota) until ``shrink_at``, then goes to
    # ``shrink_to`` (scheduling/loops/elastic.py).
    shrink_to = models.PositiveSmallIntegerField(null=True, blank=True)
    shrink_at = models.DateTimeField(null=True, blank=True)

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
    # The owner's keep-alive against idle reclaim (actions.do_keep_alive), and how many this run has used.
    kept_alive_until = models.DateTimeField(null=True, blank=True)
    keep_alives_used = models.PositiveSmallIntegerField(default=0)
    # The idle rule's marks (scheduling/loops/idle.py): when the current idle warning was given, and when a
    # training job was flagged as possibly stuck.
    idle_warned_at = models.DateTimeField(null=True, blank=True)
    flagged_stuck_at = models.DateTimeField(null=True, blank=True)
    # When the owner was told the runtime limit is near (scheduling/loops/runtime_warning.py): once per run;
    # cleared by a resume or an extension, and older than ``started_at`` after a restart.
    runtime_warned_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)  # the queue's recent runtimes

    objects = WorkspaceQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("team", "state"))]
        constraints = [
            models.CheckConstraint(
                condition=(Q(min_workers__isnull=True) & Q(max_workers__isnull=True) & Q(shrink_to__isnull=True))
                | (
                    Q(min_workers__gte=1, min_workers__lte=F("workers"), max_workers__gte=F("workers"))
                    & (Q(shrink_to__isnull=True) | Q(shrink_to__gte=F("min_workers"), shrink_to__lt=F("workers")))
                ),
                name="workspace_elastic_range",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()}, {self.state})"

    @property
    def is_elastic(self) -> bool:
        return self.max_workers is not None

    def gpu_equivalents_for(self, workers: int) -> Decimal:
        """The quota weight of ``workers`` of this workspace's workers (``gpu_equivalents`` at that size)."""
        return (self.offering.gpu_equivalents * self.gpu_count * workers).quantize(Decimal("0.0001"))

    def elastic_restart_fields(self) -> dict[str, Any]:
        """The fields that send an elastic job back to its minimum when it queues again (none otherwise)."""
        if self.min_workers is None:
            return {}
        return {
            "workers": self.min_workers,
            "gpu_equivalents": self.gpu_equivalents_for(self.min_workers),
            "shrink_to": None,
            "shrink_at": None,
        }

    def size_history(self) -> list[tuple[Any, int, str]]:
        """An elastic job's size over time, from its timeline: (when, workers, why), oldest first, starting
        from its minimum when it was admitted; the sizes it was told it will shrink to are included."""
        if self.min_workers is None:
            return []
        kinds = (ELASTIC_SIZE_EVENT, SHRINK_NOTICE_EVENT)
        out: list[tuple[Any, int, str]] = []
        for event in self.events.order_by("at", "id"):
            if event.to_state == self.State.ADMITTED and event.from_state != event.to_state:
                out.append((event.at, self.min_workers, "Admitted at its minimum."))
            elif event.details.get("event") in kinds:
                out.append((event.at, int(event.details["workers"]), event.reason))
        return out

    def clean(self) -> None:
        errors = kind_problems(self.kind, workers=self.workers, command=self.command)
        if self.offering_id and (self.min_workers is None) != (self.max_workers is None):
            errors["min_workers"] = "An elastic job has both a minimum and a maximum of workers."
        elif self.offering_id and self.max_workers is not None:
            errors |= elastic_problems(
                self.kind, self.offering, min_workers=self.min_workers, max_workers=self.max_workers
            )
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


# Notification models live in their own package; imported here so Django registers them with this app.
from workspaces.notifications.models import Notification as Notification  # noqa: E402
from workspaces.notifications.models import NotificationPreference as NotificationPreference  # noqa: E402
