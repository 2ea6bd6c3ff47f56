"""API for workspaces, offerings and images."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import ProtectedError, QuerySet
from django.http import HttpResponseBase
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from portal import conditional
from portal.access import is_operator
from portal.api.errors import Conflict, protected_reason
from scheduling import services
from workspaces import access, actions, freshness
from workspaces.models import GpuOffering, Image, Workspace
from workspaces.serializers import (
    ImageSerializer,
    OfferingSerializer,
    WorkspaceDetailSerializer,
    WorkspaceRequestSerializer,
    WorkspaceSerializer,
)
from workspaces.tokens import jupyter_token


class IsOperatorOrReadOnly(permissions.BasePermission):
    message = "Only operators can change the catalogue."

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return is_operator(request.user)


class CatalogueViewSet(viewsets.ModelViewSet[Any]):
    """Catalogue entries by slug: everyone reads the enabled ones, operators see and manage all."""

    permission_classes = (IsOperatorOrReadOnly,)
    lookup_field = "slug"
    catalogue: models.Manager[Any]  # the model's default manager

    def get_queryset(self) -> QuerySet[Any]:
        queryset: QuerySet[Any] = self.catalogue.all()
        if not is_operator(self.request.user):
            queryset = queryset.filter(enabled=True)
        return queryset

    def perform_destroy(self, instance: Any) -> None:
        try:
            instance.delete()
        except ProtectedError as exc:
            # Workspaces keep their offering for their record and cost; withdrawing an entry is disabling it.
            raise Conflict(
                detail=f"{instance.display_name} ({instance.slug}): {protected_reason(exc)} "
                'Disable it instead ({"enabled": false}) so nobody can choose it any more.',
                code="protected",
            ) from exc


class OfferingViewSet(CatalogueViewSet):
    """GPU shapes users may ask for, with how many could start now. Operators manage them."""

    serializer_class = OfferingSerializer
    catalogue = GpuOffering.objects

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().list(request, *args, **kwargs)
        offerings = self.get_queryset()
        free = services.free_units(offerings)
        for item in response.data["results"]:
            item["free_now"] = free.get(item["slug"])
        return response


class ImageViewSet(CatalogueViewSet):
    """The image catalogue. Operators manage it."""

    serializer_class = ImageSerializer
    catalogue = Image.objects


class ExtendSerializer(serializers.Serializer[dict[str, Any]]):
    hours = serializers.IntegerField(min_value=1)


class WorkspaceViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet[Workspace],
):
    """Workspaces of the caller's teams. Create queues a request and answers 202."""

    def get_queryset(self) -> QuerySet[Workspace]:
        queryset: QuerySet[Workspace] = access.workspaces_visible_to(self.request.user)
        params = self.request.query_params
        if params.get("mine") in ("1", "true"):
            queryset = queryset.filter(owner_id=self.request.user.pk)
        if team := params.get("team"):
            queryset = queryset.filter(team__slug=team)
        if state := params.get("state"):
            queryset = queryset.filter(state__in=state.split(","))
        elif self.action == "list" and params.get("all") not in ("1", "true"):
            queryset = queryset.exclude(state=Workspace.State.DELETED)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events")
        return queryset

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "create":
            return WorkspaceRequestSerializer
        if self.action == "retrieve":
            return WorkspaceDetailSerializer
        return WorkspaceSerializer

    def get_object(self) -> Workspace:
        return access.access_workspace_by_id(self.request.user, self.kwargs["pk"])

    @extend_schema(
        parameters=[
            OpenApiParameter("mine", bool),
            OpenApiParameter("team", str),
            OpenApiParameter("state", str, description="Comma-separated states."),
        ]
    )
    # A 304 is Django's HttpResponseNotModified, not a DRF Response.
    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:  # type: ignore[override]
        """Answers 304 to an ``If-None-Match`` naming the page as it still is (``workspaces/freshness.py``)."""
        queryset = self.filter_queryset(self.get_queryset())
        paginator = self.paginator
        assert isinstance(paginator, LimitOffsetPagination)  # the project's (settings.REST_FRAMEWORK)
        limit, offset = paginator.get_limit(request) or 0, paginator.get_offset(request)
        shown = freshness.shown(queryset[offset : offset + limit])
        as_of = freshness.as_of(request)
        tag = freshness.tag(request, shown, queryset.count(), request.build_absolute_uri(), activity_as_of=as_of)
        return conditional.answer(request._request, tag, lambda: self._list(queryset))

    def _list(self, queryset: QuerySet[Workspace]) -> Response:
        page = self.paginate_queryset(queryset)
        rows = list(page if page is not None else queryset)
        context = self.get_serializer_context() | {"activity": services.workspace_activity(rows, timezone.now())}
        data = WorkspaceSerializer(rows, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:  # type: ignore[override]
        """Answers 304 to an ``If-None-Match`` naming the workspace as it still is (the page polls it)."""
        workspace = self.get_object()
        tag = freshness.detail_tag(request, workspace)
        return conditional.answer(request._request, tag, lambda: self._retrieve(workspace))

    def _retrieve(self, workspace: Workspace) -> Response:
        context = {"activity": services.workspace_activity([workspace], timezone.now())}
        data = dict(WorkspaceDetailSerializer(workspace, context=context).data)
        owner_notebook = workspace.owner_id == self.request.user.pk and workspace.kind == Workspace.Kind.NOTEBOOK
        if owner_notebook and workspace.state == Workspace.State.RUNNING:
            # Only the owner ever sees the Jupyter token.
            data["notebook_url"] = services.notebook_url(workspace, jupyter_token(workspace))
        return Response(data)

    @extend_schema(request=WorkspaceRequestSerializer, responses={202: WorkspaceSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = WorkspaceRequestSerializer(data=request.data, context={"request": request})
        payload.is_valid(raise_exception=True)
        workspace = actions.do_request_workspace(request.user, payload.validated_data)
        return Response(WorkspaceSerializer(workspace).data, status=status.HTTP_202_ACCEPTED)

    def _act(self, change: Any, *args: Any) -> Response:
        workspace = access.access_workspace_for_change(self.request.user, self.kwargs["pk"])
        workspace = change(self.request.user, workspace, *args)
        return Response(WorkspaceSerializer(workspace).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: WorkspaceSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, pk: str) -> Response:
        return self._act(actions.do_stop)

    @extend_schema(request=None, responses={202: WorkspaceSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        return self._act(actions.do_resume)

    @extend_schema(request=ExtendSerializer, responses={202: WorkspaceSerializer})
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, pk: str) -> Response:
        payload = ExtendSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return self._act(actions.do_extend, payload.validated_data["hours"])

    @extend_schema(request=None, responses={202: WorkspaceSerializer})
    @action(detail=True, methods=["post"], url_path="keep-alive")
    def keep_alive(self, request: Request, pk: str) -> Response:
        """Keep a running notebook from idle reclaim for the team's keep-alive length (owner only)."""
        return self._act(actions.do_keep_alive)

    @extend_schema(request=None, responses={202: WorkspaceSerializer})
    def destroy(self, request: Request, pk: str) -> Response:
        return self._act(actions.do_delete)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str) -> Response:
        workspace = self.get_object()
        return Response({"lines": services.recent_logs(workspace).splitlines()[-200:]})

    @extend_schema(parameters=[OpenApiParameter("hours", int, description="1-24, default 6.")], responses={200: dict})
    @action(detail=True, methods=["get"])
    def activity(self, request: Request, pk: str) -> Response:
        """The workspace's GPU activity (0-1) and memory used (MiB) per collection, oldest first; null where
        no figure was read."""
        workspace = self.get_object()
        raw = request.query_params.get("hours", "6")
        if not raw.isdigit() or not 1 <= int(raw) <= 24:
            raise serializers.ValidationError({"hours": "A whole number of hours from 1 to 24."})
        points = services.workspace_series(workspace, timezone.now(), int(raw))
        return Response(
            {
                "hours": int(raw),
                "points": [
                    {"at": p.at.isoformat(), "gpu_active": p.gpu_active, "fb_used_mib": p.fb_used_mib} for p in points
                ],
            }
        )

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="cluster-events")
    def cluster_events(self, request: Request, pk: str) -> Response:
        workspace = self.get_object()
        return Response({"events": services.cluster_events(workspace)})
