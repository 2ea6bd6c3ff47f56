"""``/api/v1/notifications/``: the caller's own notifications, and marking them read."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from workspaces.notifications.models import LIST_RELATED, Notification

MAX_IDS = 1000  # per request; "all" needs no list


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    """``workspace`` and ``workspace_name`` are null for a team budget's notification; ``team`` is the team it
    concerns (the workspace's or the budget's) and ``link`` where it leads (the workspace or the team's costs)."""

    workspace_name = serializers.CharField(source="workspace.name", read_only=True, allow_null=True, default=None)
    team = serializers.SerializerMethodField()
    team_name = serializers.SerializerMethodField()
    link = serializers.SerializerMethodField()

    def get_team(self, notification: Notification) -> int | None:
        team = notification.team
        return team.pk if team is not None else None

    def get_team_name(self, notification: Notification) -> str | None:
        team = notification.team
        return str(team.name) if team is not None else None

    def get_link(self, notification: Notification) -> str:
        """An absolute URL when answering a request, else the path."""
        request = self.context.get("request")
        path = notification.link_path
        return request.build_absolute_uri(path) if request is not None else path

    class Meta:
        model = Notification
        fields = (
            "id",
            "kind",
            "text",
            "workspace",
            "workspace_name",
            "team",
            "team_name",
            "link",
            "created_at",
            "read_at",
            "email_status",
            "webhook_status",
        )
        read_only_fields = fields


class MarkReadSerializer(serializers.Serializer[dict[str, Any]]):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        max_length=MAX_IDS,
        help_text="Notifications to mark read; leave out to mark all of yours read.",
    )


class NotificationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[Notification]):
    """The caller's notifications, newest first (nobody sees anyone else's)."""

    serializer_class = NotificationSerializer

    def get_queryset(self) -> QuerySet[Notification]:
        queryset = Notification.objects.visible_to(self.request.user).select_related(*LIST_RELATED)
        if self.request.query_params.get("unread") in ("1", "true"):
            queryset = queryset.unread()
        return queryset

    @extend_schema(parameters=[OpenApiParameter("unread", bool, description="Only the unread ones.")])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=MarkReadSerializer,
        responses={200: inline_serializer("MarkedRead", {"marked": serializers.IntegerField()})},
    )
    @action(detail=False, methods=["post"])
    def read(self, request: Request) -> Response:
        """Mark the given notifications (or all) read; ids that are not the caller's are ignored."""
        payload = MarkReadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        mine = Notification.objects.visible_to(request.user).unread()
        if "ids" in payload.validated_data:
            mine = mine.filter(pk__in=payload.validated_data["ids"])
        return Response({"marked": mine.update(read_at=timezone.now())})
