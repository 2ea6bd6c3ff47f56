"""API for quotas, department caps, team policies, member caps, the queue and the audit log.

DRF generic views: lists are paginated like every list of the API (``count``, ``next``, ``previous``,
``results``; ``?limit=&offset=``) and errors take the project's shape (``portal.api.errors``). Reads are scoped
by ``portal.access`` and ``scheduling.access``; every change goes through ``scheduling.quota.actions``, which
checks the caller's role and the bounds above it and writes the audit log.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from portal import access
from portal.models import AuditEvent, Department
from scheduling import access as scheduling_access
from scheduling import activity
from scheduling.models import DepartmentCap, MemberCap, TeamPolicy, TeamQuota
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


class QuotaUseSerializer(QuotaSerializer):
    used = _units()


class QuotasView(generics.ListAPIView[Any]):
    """Quotas of the teams the caller may see, with what is in use. Operators set them (PUT)."""

    serializer_class = QuotaUseSerializer

    def get_queryset(self) -> list[dict[str, Any]]:  # type: ignore[override] # rows computed in two queries
        teams = {team.pk: team.slug for team in access.teams_visible_to(self.request.user)}
        summary = quota.quota_summaries(teams)
        return [
            {"team": {"slug": teams[team_id]}, "flavour": flavour, **numbers}
            for (team_id, flavour), numbers in sorted(summary.items(), key=lambda kv: (teams[kv[0][0]], kv[0][1]))
        ]

    @extend_schema(request=QuotaSerializer, responses=QuotaSerializer)
    def put(self, request: Request) -> Response:
        access.require_operator(request.user, "change team quotas")
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


class DepartmentCapsView(generics.ListAPIView[DepartmentCap]):
    """A department's caps per flavour. Operators set them."""

    serializer_class = DepartmentCapSerializer

    def get_queryset(self) -> QuerySet[DepartmentCap]:
        department = scheduling_access.access_department_by_id(self.request.user, self.kwargs["department_id"])
        return department.caps.order_by("flavour")

    @extend_schema(request=DepartmentCapSerializer, responses=DepartmentCapSerializer)
    def put(self, request: Request, department_id: int) -> Response:
        department: Department = scheduling_access.access_department_by_id(request.user, department_id)
        payload = DepartmentCapSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        row = quota_actions.do_set_department_cap(request.user, department, **payload.validated_data)
        return Response(DepartmentCapSerializer(row).data)


class PolicySerializer(serializers.Serializer[Any]):
    default_runtime_hours = serializers.IntegerField(min_value=1)
    max_runtime_hours = serializers.IntegerField(min_value=1)
    allowed_offerings = serializers.ListField(child=serializers.SlugField(), default=list)


def _put_team_setting(view: Any, request: Request, team_id: int, change: Any) -> Response:
    """PUT of a team's settings: the team as the asker may see it, the body checked by the view's serializer,
    the change made (and refused) by its quota action, the result as GET answers it."""
    team = access.access_team_by_id(request.user, team_id)
    payload = view.get_serializer(data=request.data)
    payload.is_valid(raise_exception=True)
    change(request.user, team, **payload.validated_data)
    return view.get(request, team_id)  # type: ignore[no-any-return]


class TeamPolicyView(generics.GenericAPIView[Any]):
    """A team's policy: default and longest runtime, the offerings its members may use. Leads set it."""

    serializer_class = PolicySerializer

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

    def put(self, request: Request, team_id: int) -> Response:
        return _put_team_setting(self, request, team_id, quota_actions.do_set_team_policy)


class IdlePolicySerializer(serializers.Serializer[Any]):
    """Each optional on PUT: what is left out stays as it was. Bounds: the operators' (IDLE_* settings)."""

    idle_threshold_percent = serializers.IntegerField(required=False)
    idle_window_minutes = serializers.IntegerField(required=False)
    idle_grace_minutes = serializers.IntegerField(required=False)
    keep_alive_hours = serializers.IntegerField(required=False)
    keep_alives_per_run = serializers.IntegerField(required=False)
    stuck_window_minutes = serializers.IntegerField(required=False)


class TeamIdlePolicyView(generics.GenericAPIView[Any]):
    """A team's idle rules: when a notebook counts as idle, the grace before it is reclaimed, how long and
    how often its owner may keep it alive, when a training job is flagged as possibly stuck. Leads set it."""

    serializer_class = IdlePolicySerializer

    def get(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        policy = TeamPolicy.objects.filter(team=team).first() or TeamPolicy()
        return Response({field: getattr(policy, field) for field in quota_actions.IDLE_FIELDS})

    def put(self, request: Request, team_id: int) -> Response:
        return _put_team_setting(self, request, team_id, quota_actions.do_set_idle_policy)


class MemberCapSerializer(serializers.Serializer[MemberCap]):
    username = serializers.CharField(source="user.username", max_length=150)
    flavour = serializers.CharField(max_length=64)
    cap = _units(allow_null=True)


class MemberCapsView(generics.ListAPIView[MemberCap]):
    """Per-member caps of a team. Leads set them within the team's quota; null removes one."""

    serializer_class = MemberCapSerializer

    def get_queryset(self) -> QuerySet[MemberCap]:
        team = access.access_team_by_id(self.request.user, self.kwargs["team_id"])
        return MemberCap.objects.filter(team=team).select_related("user").order_by("user__username", "flavour")

    @extend_schema(request=MemberCapSerializer, responses=MemberCapSerializer)
    def put(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        payload = MemberCapSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        quota_actions.do_set_member_cap(request.user, team, data["user"]["username"], data["flavour"], data["cap"])
        return Response({"username": data["user"]["username"], "flavour": data["flavour"],
                         "cap": None if data["cap"] is None else str(data["cap"])})  # fmt: skip


class QueueEntrySerializer(serializers.Serializer[Any]):
    """One queued workspace as ``scheduling.queue_view`` explains it (read only)."""

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class QueueView(generics.ListAPIView[Any]):
    """Queued workspaces the caller may see: position per GPU flavour, the reason they wait, an estimate."""

    serializer_class = QueueEntrySerializer

    def get_queryset(self) -> list[dict[str, Any]]:  # type: ignore[override] # computed, in queue order
        return queue_entries(self.request.user)


class AuditSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor.username", default=None)
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AuditEvent
        fields = ("at", "actor", "action", "target_type", "target_id", "team", "before", "after")


class AuditView(generics.ListAPIView[AuditEvent]):
    """The audit log, newest first: operators see all of it; leads see their teams'."""

    serializer_class = AuditSerializer

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return scheduling_access.audit_events_visible_to(self.request.user)


class TeamIdleOffendersView(generics.GenericAPIView[Any]):
    """Per member, the GPU-equivalent hours their workspaces held with the GPU idle (below 5 % activity) over
    the last 7 and 30 days, beside the hours with a GPU figure; most idle first. The team's leads and
    operators only."""

    serializer_class = serializers.Serializer

    def get(self, request: Request, team_id: int) -> Response:
        team = access.access_team_by_id(request.user, team_id)
        if not access.can_manage_team(request.user, team):
            raise PermissionDenied("Only this team's leads and operators see its members' idle GPU time.")
        return Response({"team": team.slug, "members": activity.idle_offenders(team.pk, timezone.now())})


class ClusterActivityView(generics.GenericAPIView[Any]):
    """Operators: per GPU model, GPU-equivalents allocated to running workspaces, how much of them is active
    (weighed by the latest GPU activity), held idle, and without a fresh figure."""

    serializer_class = serializers.Serializer

    def get(self, request: Request) -> Response:
        access.require_operator(request.user, "see the cluster's activity")
        found = activity.active_by_model(timezone.now())
        return Response(
            {
                "models": [
                    {
                        "flavour": flavour,
                        "allocated": str(a.allocated),
                        "active": round(a.active, 3),
                        "idle": str(a.idle),
                        "unknown": str(a.unknown),
                    }
                    for flavour, a in sorted(found.items())
                ]
            }
        )
