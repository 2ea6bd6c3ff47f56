"""The /api/v1/ router. Each app registers its viewsets here."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from portal.api.viewsets import MeView, TeamViewSet

app_name = "api"
router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")

urlpatterns = [
    path("me/", MeView.as_view(), name="api-me"),
    path("", include(router.urls)),
]
