"""Organisation endpoints: who am I, and the teams I may see (leads manage their members)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import access, actions
from portal.api.serializers import (
    MemberSerializer,
    MembershipWriteSerializer,
    MeSerializer,
    RoleSerializer,
    TeamSerializer,
)
from portal.models import Membership, Team, User


class MeView(APIView):
    """The caller: name, organisation roles and teams with their role in each."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        assert isinstance(request.user, User)  # IsAuthenticated ran first
        return Response(MeSerializer(request.user).data)


class TeamViewSet(viewsets.ReadOnlyModelViewSet[Team]):
    """Teams the caller may see. Members see their own teams; finance and operators see all."""

    serializer_class = TeamSerializer

    def get_queryset(self) -> QuerySet[Team]:
        members = Prefetch("memberships", queryset=Membership.objects.select_related("user"))
        queryset: QuerySet[Team] = access.teams_visible_to(self.request.user).prefetch_related(members)
        return queryset

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        user = self.request.user
        context["my_roles"] = (
            dict(Membership.objects.filter(user=user).values_list("team_id", "role")) if user.is_authenticated else {}
        )
        return context

    def _managed_team(self) -> Team:
        return access.access_team_for_management(self.request.user, self.kwargs["pk"])

    @extend_schema(request=MembershipWriteSerializer, responses={201: MemberSerializer})
    @action(detail=True, methods=["post"], url_path="members")
    def add_member(self, request: Request, pk: str) -> Response:
        team = self._managed_team()
        payload = MembershipWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        membership = actions.do_add_member(request.user, team, **payload.validated_data)
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(methods=["patch"], request=RoleSerializer, responses=MemberSerializer)
    @extend_schema(methods=["delete"], request=None, responses={204: None})
    @action(detail=True, methods=["patch", "delete"], url_path=r"members/(?P<username>[\w.@+-]+)")
    def member(self, request: Request, pk: str, username: str) -> Response:
        team = self._managed_team()
        if request.method == "DELETE":
            actions.do_remove_member(request.user, team, username)
            return Response(status=status.HTTP_204_NO_CONTENT)
        payload = RoleSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        membership = actions.do_change_member_role(request.user, team, username, payload.validated_data["role"])
        return Response(MemberSerializer(membership).data)
