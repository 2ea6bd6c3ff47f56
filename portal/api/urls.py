"""The /api/v1/ router. Each app registers its viewsets here."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from portal.api.viewsets import MeView, TeamViewSet
from scheduling import api as scheduling_api
from workspaces.notifications.api import NotificationViewSet
from workspaces.viewsets import ImageViewSet, OfferingViewSet, WorkspaceViewSet

app_name = "api"
router = DefaultRouter()
router.register("teams", TeamViewSet, basename="team")
router.register("workspaces", WorkspaceViewSet, basename="workspace")
router.register("offerings", OfferingViewSet, basename="offering")
router.register("images", ImageViewSet, basename="image")
router.register("notifications", NotificationViewSet, basename="notification")

urlpatterns = [
    path("me/", MeView.as_view(), name="api-me"),
    path("quotas/", scheduling_api.QuotasView.as_view(), name="quotas"),
    path("queue/", scheduling_api.QueueView.as_view(), name="queue"),
    path("audit/", scheduling_api.AuditView.as_view(), name="audit"),
    path("teams/<int:team_id>/policy/", scheduling_api.TeamPolicyView.as_view(), name="team-policy"),
    path("teams/<int:team_id>/idle-policy/", scheduling_api.TeamIdlePolicyView.as_view(), name="team-idle-policy"),
    path(
        "teams/<int:team_id>/idle-offenders/",
        scheduling_api.TeamIdleOffendersView.as_view(),
        name="team-idle-offenders",
    ),
    path("cluster/activity/", scheduling_api.ClusterActivityView.as_view(), name="cluster-activity"),
    path("teams/<int:team_id>/member-caps/", scheduling_api.MemberCapsView.as_view(), name="team-member-caps"),
    path("departments/<int:department_id>/caps/", scheduling_api.DepartmentCapsView.as_view(), name="department-caps"),
    path("", include(router.urls)),
]
