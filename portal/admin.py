from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from portal.models import AuditEvent, Department, Membership, OrgRole, Team, User


class OrgRoleInline(admin.TabularInline[OrgRole, User]):
    model = OrgRole
    extra = 0


class MembershipInline(admin.TabularInline[Membership, Team]):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(User)
class PortalUserAdmin(UserAdmin[User]):
    inlines = (OrgRoleInline,)


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin[Department]):
    list_display = ("name", "slug", "cost_centre")
    search_fields = ("name", "cost_centre")


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    list_display = ("name", "slug", "department")
    list_filter = ("department",)
    search_fields = ("name", "slug")
    inlines = (MembershipInline,)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ("team", "user", "role")
    list_filter = ("role", "team")
    autocomplete_fields = ("user", "team")


@admin.register(OrgRole)
class OrgRoleAdmin(admin.ModelAdmin[OrgRole]):
    list_display = ("user", "role")
    list_filter = ("role",)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin[AuditEvent]):
    list_display = ("at", "actor", "action", "target_type", "target_id", "team")
    list_filter = ("action", "team")
    readonly_fields = ("at", "actor", "action", "target_type", "target_id", "team", "before", "after")

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False  # append-only for everyone, operators and superusers included
