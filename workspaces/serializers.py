"""API shapes for workspaces, offerings and images. Request validation lives here, for page and API alike."""

from __future__ import annotations

from copy import copy
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import serializers

from portal.models import Membership, Team
from workspaces import policy
from workspaces.deadlines import workspace_deadline
from workspaces.models import GpuOffering, Image, Workspace, WorkspaceEvent, elastic_problems, kind_problems


class ModelCleanSerializer(serializers.ModelSerializer[Any]):
    """Runs the model's own validation (field validators and ``clean``) on the instance as it would be saved,
    so the API refuses exactly what the admin refuses, with the same field-by-field messages."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model: type[models.Model] = self.Meta.model
        candidate = copy(self.instance) if self.instance is not None else model()
        for name, value in attrs.items():
            setattr(candidate, name, value)
        try:
            candidate.full_clean(validate_unique=False)  # the serializer's unique validators ran already
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return attrs


class OfferingSerializer(ModelCleanSerializer):
    isolation_note = serializers.CharField(read_only=True)
    memory_cap_note = serializers.CharField(read_only=True)

    class Meta:
        model = GpuOffering
        fields = (
            "slug",
            "display_name",
            "kind",
            "gpu_model",
            "mig_profile",
            "replicas",
            "memory_cap_mib",
            "active_thread_percentage",
            "resource_name",
            "device_class",
            "device_selector",
            "gpu_equivalents",
            "allowed_counts",
            "cpu_millis_default",
            "memory_mib_default",
            "description",
            "enabled",
            "isolation_note",
            "memory_cap_note",
        )


class ImageSerializer(ModelCleanSerializer):
    class Meta:
        model = Image
        fields = ("slug", "display_name", "reference", "kind", "description", "enabled")


class EventSerializer(serializers.ModelSerializer[WorkspaceEvent]):
    class Meta:
        model = WorkspaceEvent
        fields = ("at", "from_state", "to_state", "reason", "source")


class WorkspaceSerializer(serializers.ModelSerializer[Workspace]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    offering: serializers.SlugRelatedField[GpuOffering] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    offering_name = serializers.CharField(source="offering.display_name", read_only=True)
    deadline = serializers.SerializerMethodField()
    activity = serializers.SerializerMethodField(help_text="A running workspace's telemetry and idle state.")

    class Meta:
        model = Workspace
        fields: tuple[str, ...] = (
            "id",
            "name",
            "kind",
            "team",
            "owner",
            "offering",
            "offering_name",
            "gpu_count",
            "workers",
            "min_workers",
            "max_workers",
            "image",
            "command",
            "state",
            "reason",
            "node_name",
            "gpu_equivalents",
            "priority",
            "borrowing",
            "preempt_at",
            "max_runtime_seconds",
            "home_volume_gib",
            "created_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "deadline",
            "activity",
        )
        read_only_fields: tuple[str, ...] = fields

    def get_activity(self, workspace: Workspace) -> dict[str, Any] | None:
        """From the view's context: it reads every row's activity in a few queries, not one per row."""
        found = self.context.get("activity", {}).get(workspace.pk)
        return found.as_dict() if found is not None else None

    def get_deadline(self, workspace: Workspace) -> str | None:
        if workspace.is_final:
            return None
        deadline = workspace_deadline(workspace)
        return deadline.isoformat() if deadline else None


class WorkspaceDetailSerializer(WorkspaceSerializer):
    events = EventSerializer(many=True, read_only=True)

    class Meta(WorkspaceSerializer.Meta):
        fields: tuple[str, ...] = (*WorkspaceSerializer.Meta.fields, "events")
        read_only_fields: tuple[str, ...] = fields


class WorkspaceRequestSerializer(serializers.Serializer[dict[str, Any]]):
    """The shape of a request, checked against the portal's limits and the chosen offering.

    Rules that depend on the team (its lead's policy, its quota) or on the image catalogue are checked by
    ``actions.do_request_workspace``, which both the page and the API call next."""

    kind = serializers.ChoiceField(choices=Workspace.Kind.choices)
    name = serializers.RegexField(
        r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
        max_length=40,
        error_messages={
            "invalid": "Use lower-case letters, digits and hyphens, starting and ending with a letter or digit."
        },
    )
    team = serializers.SlugField(max_length=40)
    offering = serializers.SlugField(max_length=40)
    gpu_count = serializers.IntegerField(min_value=0, max_value=8, default=1)
    image = serializers.CharField(max_length=255)
    command = serializers.ListField(
        child=serializers.CharField(max_length=4096), max_length=64, required=False, default=list
    )
    workers = serializers.IntegerField(min_value=1, default=1)
    min_workers = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="Elastic jobs: the fewest workers; ``workers`` is then the most it grows to on idle capacity.",
    )
    env = serializers.DictField(
        child=serializers.CharField(max_length=4096, allow_blank=True), required=False, default=dict
    )
    max_runtime_hours = serializers.IntegerField(min_value=1, required=False)
    home_volume_gib = serializers.IntegerField(min_value=1, default=10)
    priority = serializers.ChoiceField(
        choices=[p for p in Workspace.Priority.choices if p[0] != Workspace.Priority.INTERACTIVE], required=False
    )
    cpu_millis = serializers.IntegerField(min_value=100, required=False)
    memory_mib = serializers.IntegerField(min_value=256, required=False)

    def validate_team(self, slug: str) -> Team:
        user = self.context["request"].user
        membership = Membership.objects.filter(team__slug=slug, user=user).select_related("team").first()
        if membership is None:
            raise serializers.ValidationError(f"You are not a member of a team called {slug!r}.")
        return membership.team

    def validate_offering(self, slug: str) -> GpuOffering:
        offering = GpuOffering.objects.filter(slug=slug, enabled=True).first()
        if offering is None:
            raise serializers.ValidationError(f"There is no GPU offering called {slug!r}.")
        return offering

    def validate_env(self, env: dict[str, str]) -> dict[str, str]:
        limits = policy.limits()
        if len(env) > limits.max_env_vars:
            raise serializers.ValidationError(f"At most {limits.max_env_vars} environment variables.")
        problems = [problem for name in env if (problem := policy.env_problem(name))]
        if problems:
            raise serializers.ValidationError(problems)
        return env

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        limits = policy.limits()
        offering: GpuOffering = data["offering"]
        kind = data["kind"]
        errors: dict[str, str] = {}
        allowed = offering.allowed_counts or [1]
        if offering.kind == GpuOffering.Kind.CPU:
            data["gpu_count"] = 0
        elif data["gpu_count"] not in allowed:
            errors["gpu_count"] = f"{offering.display_name} comes in counts of {', '.join(map(str, allowed))} per pod."
        errors |= kind_problems(kind, workers=data["workers"], command=data["command"])
        errors |= elastic_problems(kind, offering, min_workers=data["min_workers"], max_workers=data["workers"])
        if kind == Workspace.Kind.NOTEBOOK:
            if data.get("priority"):
                errors["priority"] = "Notebooks are interactive: they run within guarantee and are never preempted."
            data["priority"] = Workspace.Priority.INTERACTIVE
        else:
            data.setdefault("priority", Workspace.Priority.NORMAL)
            if data["workers"] > limits.max_workers:
                errors["workers"] = f"At most {limits.max_workers} workers."
        if data["home_volume_gib"] > limits.max_home_volume_gib:
            errors["home_volume_gib"] = f"At most {limits.max_home_volume_gib} GiB."
        cpu = data.get("cpu_millis") or offering.cpu_millis_default
        memory = data.get("memory_mib") or offering.memory_mib_default
        if cpu > offering.cpu_millis_max:
            errors["cpu_millis"] = f"{offering.display_name} allows at most {offering.cpu_millis_max} millicores."
        if memory > offering.memory_mib_max:
            errors["memory_mib"] = f"{offering.display_name} allows at most {offering.memory_mib_max} MiB."
        if errors:
            raise serializers.ValidationError(errors)
        data["cpu_millis"] = cpu
        data["memory_mib"] = memory
        # An elastic job starts at its minimum: that is what it asks the quota for.
        units = data["gpu_count"] * (data["min_workers"] or data["workers"])
        data["gpu_equivalents"] = (offering.gpu_equivalents * units).quantize(Decimal("0.0001"))
        return data
