"""Serializers for the organisation endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal import access
from portal.models import Department, Membership, Team, User


class DepartmentSerializer(serializers.ModelSerializer[Department]):
    class Meta:
        model = Department
        fields = ("id", "name", "slug", "cost_centre")


class MemberSerializer(serializers.ModelSerializer[Membership]):
    username = serializers.CharField(source="user.username", read_only=True)
    full_name = serializers.CharField(source="user.get_full_name", read_only=True)

    class Meta:
        model = Membership
        fields = ("username", "full_name", "role")


class TeamSerializer(serializers.ModelSerializer[Team]):
    department = DepartmentSerializer(read_only=True)
    members = MemberSerializer(source="memberships", many=True, read_only=True)
    my_role = serializers.SerializerMethodField()
    can_manage = serializers.SerializerMethodField()

    class Meta:
        model = Team
        fields = ("id", "name", "slug", "description", "department", "my_role", "can_manage", "members")

    def get_my_role(self, team: Team) -> str | None:
        roles: dict[int, str] = self.context.get("my_roles", {})
        return roles.get(team.pk)

    def get_can_manage(self, team: Team) -> bool:
        return access.manages_with_role(self.context["request"].user, self.get_my_role(team))


class MembershipWriteSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class RoleSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class MyTeamSerializer(serializers.Serializer[Membership]):
    id = serializers.IntegerField(source="team.id")
    slug = serializers.CharField(source="team.slug")
    name = serializers.CharField(source="team.name")
    role = serializers.CharField()


class MeSerializer(serializers.ModelSerializer[User]):
    full_name = serializers.CharField(source="get_full_name")
    org_roles = serializers.SerializerMethodField()
    teams = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ("id", "username", "full_name", "email", "org_roles", "teams")

    def get_org_roles(self, user: User) -> list[str]:
        return sorted(user.org_roles())

    @extend_schema_field(MyTeamSerializer(many=True))
    def get_teams(self, user: User) -> list[dict[str, Any]]:
        memberships = user.memberships.select_related("team").order_by("team__name")
        return [MyTeamSerializer(membership).data for membership in memberships]
