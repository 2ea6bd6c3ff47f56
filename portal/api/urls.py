"""The /api/v1/ router. Each app registers its viewsets here."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from portal.api.viewsets import MeView, TeamViewSet
from workspaces.viewsets import ImageViewSet, OfferingViewSet, WorkspaceViewSet

app_name = "api"
router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")
router.register("workspaces", WorkspaceViewSet, basename="workspace")
router.register("offerings", OfferingViewSet, basename="offering")
router.register("images", ImageViewSet, basename="image")

urlpatterns = [
    path("me/", MeView.as_view(), name="api-me"),
    path("", include(router.urls)),
]
