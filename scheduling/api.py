"""API for quotas, department caps, team policies, member caps, the queue and the audit log.

Reads are scoped by ``portal.access``; every change goes through ``scheduling.quota.actions``, which checks
the caller's role and the bounds above it and writes the audit log.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import access
from portal.models import AuditEvent, Department
from scheduling.models import DepartmentCap, MemberCap, TeamQuota
from scheduling.queue_view import queue_entries
from scheduling.quota import actions as quota_actions
from scheduling.quota import rules as quota


def _units(*, allow_null: bool = False) -> serializers.DecimalField:
    """GPU-equivalents as the models store them."""
    return serializers.DecimalField(max_digits=8, decimal_places=4, min_value=Decimal(0), allow_null=allow_null)


class QuotaSerializer(serializers.Serializer[TeamQuota]):
    team = serializers.SlugField(source="team.slug")
    flavour = serializers.CharField(max_length=64)
    guaranteed = _units()
    borrow_limit = _units()


class QuotasView(APIView):
    """Quotas of the teams the caller may see, with what is in use. Operators set them (PUT)."""

    @extend_schema(responses=QuotaSerializer(many=True))
    def get(self, request: Request) -> Response:
        teams = {team.pk: team.slug for team in access.teams_visible_to(request.user)}
        summary = quota.quota_summaries(teams)
        rows = [
            {"team": teams[team_id], "flavour": flavour, **{k: str(v) for k, v in numbers.items()}}
            for (team_id, flavour), numbers in sorted(summary.items(), key=lambda kv: (teams[kv[0][0]], kv[0][1]))
        ]
        return Response({"results": rows})

    @extend_schema(request=QuotaSerializer, responses=QuotaSerializer)
    def put(self, request: Request) -> Response:
        if not getattr(request.user, "is_operator", False):
            raise PermissionDenied("Only operators can change team quotas.")
        payload = QuotaSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        team = access.teams_visible_to(request.user).filter(slug=data["team"]["slug"]).first()
        if team is None:
            raise serializers.ValidationError({"team": f"No team called {data['team']['slug']!r}."})
        row = quota_actions.do_set_team_quota(
            request.user, team, data["flavour"], data["guaranteed"], data["borrow_limit"]
        )
        return Response(QuotaSerializer(row).data)


class DepartmentCapSerializer(serializers.Serializer[DepartmentCap]):
    flavour = serializers.CharField(max_length=64)
    cap = _units()


class DepartmentCapsView(APIView):
    """A department's caps per flavour. Operators set them."""

    def _department(self, request: Request, department_id: int) -> Department:
        department = Department.objects.filter(pk=department_id).first()
        visible = access.teams_visible_to(request.user).filter(department_id=department_id).exists()
        if department is None or not (visible or getattr(request.user, "is_operator", False)):
            raise Http404("No such department.")
        return department

    @extend_schema(responses=DepartmentCapSerializer(many=True))
    def get(self, request: Request, department_id: int) -> Response:
        department = self._department(request, department_id)
        return Response({"results": [DepartmentCapSerializer(cap).data for cap in department.caps.all()]})

    @extend_schema(request=DepartmentCapSerializer, responses=DepartmentCapSerializer)
    def put(self, request: Request, department_id: int) -> Response:
        department = self._department(request, department_id)
        payload = DepartmentCapSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        row = quota_actions.do_set_department_cap(request.user, department, **payload.validated_data)
        return Response(DepartmentCapSerializer(row).data)


class PolicySerializer(serializers.Serializer[Any]):
    default_runtime_hours = serializers.IntegerField(min_value=1)
    max_runtime_hours = serializers.IntegerField(min_value=1)
    allowed_offerings = serializers.ListField(child=serializers.SlugField(), default=list)


class TeamPolicyView(APIView):
    """A team's policy: default and longest runtime, the offerings its members may use. Leads set it."""

    @extend_schema(responses=PolicySerializer)
    def get(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        rules = quota.team_rules(team.pk)
        return Response(
            {
                "default_runtime_hours": rules.default_runtime_hours,
                "max_runtime_hours": rules.max_runtime_hours,
                "allowed_offerings": sorted(rules.allowed_offerings),
            }
        )

    @extend_schema(request=PolicySerializer, responses=PolicySerializer)
    def put(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        payload = PolicySerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        quota_actions.do_set_team_policy(request.user, team, **payload.validated_data)
        return self.get(request, team_id)


class MemberCapSerializer(serializers.Serializer[MemberCap]):
    username = serializers.CharField(source="user.username", max_length=150)
    flavour = serializers.CharField(max_length=64)
    cap = _units(allow_null=True)


class MemberCapsView(APIView):
    """Per-member caps of a team. Leads set them within the team's quota; null removes one."""

    @extend_schema(responses=MemberCapSerializer(many=True))
    def get(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        caps = MemberCap.objects.filter(team=team).select_related("user")
        return Response({"results": [MemberCapSerializer(cap).data for cap in caps]})

    @extend_schema(request=MemberCapSerializer, responses=MemberCapSerializer)
    def put(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        payload = MemberCapSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        quota_actions.do_set_member_cap(request.user, team, data["user"]["username"], data["flavour"], data["cap"])
        return Response({"username": data["user"]["username"], "flavour": data["flavour"],
                         "cap": None if data["cap"] is None else str(data["cap"])})  # fmt: skip


class QueueView(APIView):
    """Queued workspaces the caller may see: position per GPU flavour, the reason they wait, an estimate."""

    def get(self, request: Request) -> Response:
        return Response({"results": queue_entries(request.user)})


class AuditSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor.username", default=None)
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AuditEvent
        fields = ("at", "actor", "action", "target_type", "target_id", "team", "before", "after")


class AuditView(APIView):
    """The audit log: operators see all of it; leads see their teams'."""

    @extend_schema(responses=AuditSerializer(many=True))
    def get(self, request: Request) -> Response:
        events: QuerySet[AuditEvent] = AuditEvent.objects.select_related("actor", "team")
        if not getattr(request.user, "is_operator", False):
            led = [t.pk for t in access.teams_visible_to(request.user) if access.can_manage_team(request.user, t)]
            events = events.filter(team_id__in=led)
        return Response({"results": [AuditSerializer(event).data for event in events[:500]]})
