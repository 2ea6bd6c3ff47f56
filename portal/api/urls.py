"""The /api/v1/ router. Each app registers its viewsets here."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from portal.api.viewsets import MeView, TeamViewSet
from portal.billing import api as billing_api
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
    path("chargeback/", billing_api.ChargebackView.as_view(), name="chargeback"),
    path("chargeback/close/", billing_api.CloseMonthView.as_view(), name="chargeback-close"),
    path("prices/", billing_api.PricesView.as_view(), name="prices"),
    path("prices/<int:entry_id>/", billing_api.PriceView.as_view(), name="price"),
    path("budgets/", billing_api.BudgetsView.as_view(), name="budgets"),
    path("teams/<int:team_id>/budget/", billing_api.TeamBudgetView.as_view(), name="team-budget"),
    path("teams/<int:team_id>/costs/", billing_api.TeamCostsView.as_view(), name="team-costs"),
    path("", include(router.urls)),
]
