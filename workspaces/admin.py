"""Admin pages for the catalogue and workspaces, for operators only.

The admin is a window, not a second way to change things: what the portal's actions check and audit
(lifecycle, quotas, policies, catalogue shapes) is read-only here, and the page says where to change it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from portal.access import is_operator
from workspaces.models import AllowedRegistry, GpuOffering, Image, Workspace, WorkspaceEvent


class OperatorAdmin(admin.ModelAdmin[Any]):
    """Only operators see these pages (``portal.access.is_operator``), superusers who are not included.

    ``editable``: whether operators may change rows here at all; ``readonly_fields`` say which fields."""

    editable = False

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_operator(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_operator(request.user)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.editable and is_operator(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline[Any, Any]):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_operator(request.user)


class WorkspaceEventInline(ReadOnlyInline):
    model = WorkspaceEvent
    fields = ("at", "from_state", "to_state", "reason", "source")
    readonly_fields = fields
    ordering = ("at", "id")


LIFECYCLE_WHY = (
    "Read-only: the scheduling cycle and the reconcile loop own a workspace's state. Changing it here would "
    "bypass them (pods would keep running, quota stay held, nothing audited). Stop, resume, extend or delete "
    "it on its page or through the API."
)

REQUEST_FIELDS = (
    "name", "kind", "team", "owner", "offering", "gpu_count", "workers", "image", "command", "env", "cpu_millis",
    "memory_mib", "max_runtime_seconds", "home_volume_gib", "gpu_equivalents", "priority",
)  # fmt: skip
LIFECYCLE_FIELDS = (
    "state", "reason", "borrowing", "preempt_at", "node_name", "pinned_node", "teardown_requested_at",
    "created_at", "admitted_at", "started_at", "finished_at",
)  # fmt: skip


@admin.register(Workspace)
class WorkspaceAdmin(OperatorAdmin):
    list_display = ("name", "kind", "team", "owner", "offering", "gpu_count", "state", "priority", "node_name",
                    "created_at")  # fmt: skip
    list_filter = ("state", "kind", "priority", "borrowing", "team", "offering")
    search_fields = ("name", "owner__username", "team__name", "team__slug", "node_name", "image")
    date_hierarchy = "created_at"
    list_select_related = ("team", "owner", "offering")
    inlines = (WorkspaceEventInline,)
    fieldsets = (
        ("Request", {"fields": REQUEST_FIELDS}),
        ("Lifecycle", {"description": LIFECYCLE_WHY, "fields": LIFECYCLE_FIELDS}),
    )
    # Everything: the request was admitted against quota as it stands, and its lifecycle is the controller's.
    readonly_fields = REQUEST_FIELDS + LIFECYCLE_FIELDS


CATALOGUE_WHY = (
    "Shapes are read-only here: new offerings come from `manage.py discover_offerings --apply` or the "
    "validated API (/api/v1/offerings/, /api/v1/images/); names, descriptions and whether it is offered can "
    "be changed here."
)


@admin.register(GpuOffering)
class GpuOfferingAdmin(OperatorAdmin):
    editable = True
    list_display = ("display_name", "slug", "kind", "gpu_model", "mig_profile", "replicas", "gpu_equivalents",
                    "enabled")  # fmt: skip
    list_filter = ("kind", "enabled", "gpu_model")
    search_fields = ("slug", "display_name", "gpu_model", "resource_name")
    readonly_fields = ("slug", "kind", "gpu_model", "mig_profile", "replicas", "memory_cap_mib",
                       "active_thread_percentage", "resource_name", "device_class", "device_selector",
                       "node_selector", "gpu_equivalents",
                       "allowed_counts", "cpu_millis_default", "cpu_millis_max", "memory_mib_default",
                       "memory_mib_max")  # fmt: skip
    fieldsets = (
        (None, {"fields": ("display_name", "description", "enabled")}),
        ("Shape", {"description": CATALOGUE_WHY, "fields": readonly_fields}),
    )


@admin.register(Image)
class ImageAdmin(OperatorAdmin):
    editable = True
    list_display = ("display_name", "slug", "kind", "reference", "enabled")
    list_filter = ("kind", "enabled")
    search_fields = ("slug", "display_name", "reference")
    readonly_fields = ("slug", "kind", "reference")
    fieldsets = (
        (None, {"fields": ("display_name", "description", "enabled")}),
        ("Image", {"description": CATALOGUE_WHY, "fields": readonly_fields}),
    )


@admin.register(AllowedRegistry)
class AllowedRegistryAdmin(OperatorAdmin):
    list_display = ("prefix",)
    search_fields = ("prefix",)
