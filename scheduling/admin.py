"""Admin pages for quotas, caps and team policies: read-only, for operators only.

Their changes go through ``scheduling.quota.actions`` (the API and the team's quota page), which check the
department cap and the portal's bounds and write the audit log; an admin form would skip both.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from scheduling.models import DecayedUsage, DepartmentCap, MemberCap, TeamPolicy, TeamQuota
from workspaces.admin import OperatorAdmin

QUOTA_WHY = (
    "Read-only: change quotas and caps with PUT /api/v1/quotas/ and /api/v1/departments/{id}/caps/, member "
    "caps and policies on the team's quota page, so that the bounds are checked and the change is audited."
)


@admin.register(TeamQuota)
class TeamQuotaAdmin(OperatorAdmin):
    list_display = ("team", "flavour", "guaranteed", "borrow_limit", "updated_at")
    list_filter = ("flavour", "team__department", "team")
    search_fields = ("team__name", "team__slug", "flavour")
    list_select_related = ("team",)
    fieldsets = ((None, {"description": QUOTA_WHY, "fields": ("team", "flavour", "guaranteed", "borrow_limit",
                                                                "updated_at")}),)  # fmt: skip
    readonly_fields = ("team", "flavour", "guaranteed", "borrow_limit", "updated_at")


@admin.register(DepartmentCap)
class DepartmentCapAdmin(OperatorAdmin):
    list_display = ("department", "flavour", "cap")
    list_filter = ("flavour", "department")
    search_fields = ("department__name", "flavour")
    fieldsets = ((None, {"description": QUOTA_WHY, "fields": ("department", "flavour", "cap")}),)
    readonly_fields = ("department", "flavour", "cap")


@admin.register(MemberCap)
class MemberCapAdmin(OperatorAdmin):
    list_display = ("team", "user", "flavour", "cap")
    list_filter = ("flavour", "team")
    search_fields = ("team__name", "user__username", "flavour")
    list_select_related = ("team", "user")
    fieldsets = ((None, {"description": QUOTA_WHY, "fields": ("team", "user", "flavour", "cap")}),)
    readonly_fields = ("team", "user", "flavour", "cap")


@admin.register(TeamPolicy)
class TeamPolicyAdmin(OperatorAdmin):
    list_display = ("team", "default_runtime_hours", "max_runtime_hours", "offerings", "updated_at")
    list_filter = ("team__department",)
    search_fields = ("team__name", "team__slug")
    list_select_related = ("team",)
    fieldsets = ((None, {"description": QUOTA_WHY, "fields": ("team", "default_runtime_hours", "max_runtime_hours",
                                                                "allowed_offerings", "updated_at")}),)  # fmt: skip
    readonly_fields = ("team", "default_runtime_hours", "max_runtime_hours", "allowed_offerings", "updated_at")

    @admin.display(description="allowed offerings")
    def offerings(self, policy: TeamPolicy) -> str:
        return ", ".join(o.slug for o in policy.allowed_offerings.all()) or "all"

    def get_queryset(self, request: HttpRequest) -> QuerySet[TeamPolicy]:
        queryset: QuerySet[TeamPolicy] = super().get_queryset(request).prefetch_related("allowed_offerings")
        return queryset


@admin.register(DecayedUsage)
class DecayedUsageAdmin(OperatorAdmin):
    list_display = ("team", "flavour", "usage", "updated_at")
    list_filter = ("flavour",)
    search_fields = ("team__name",)
    readonly_fields = ("team", "flavour", "usage", "updated_at")
