from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from portal import health, views
from portal.alerts import views as alerts_views
from portal.billing import views as billing_views
from portal.metrics import views as metrics_views
from portal.sso import views as sso_views
from scheduling import views as scheduling_views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", sso_views.LoginView.as_view(), name="login"),
    path("logout/", sso_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("portal.sso.urls")),
    path("teams/", views.team_list, name="teams"),
    path("teams/<int:team_id>/", views.team_detail, name="team-detail"),
    path("teams/<int:team_id>/members/", views.team_members, name="team-members"),
    path("workspaces/", include("workspaces.urls")),
    path("notifications/", include("workspaces.notifications.urls")),
    path("queue/", scheduling_views.queue_page, name="queue"),
    path("teams/<int:team_id>/quota/", scheduling_views.team_quota_page, name="team-quota"),
    path("teams/<int:team_id>/costs/", billing_views.team_costs, name="team-costs"),
    path("chargeback/", billing_views.chargeback_page, name="chargeback"),
    path("chargeback/export/<str:fmt>/", billing_views.chargeback_export, name="chargeback-export"),
    path("chargeback/close/", billing_views.close_month, name="chargeback-close"),
    path("chargeback/rates/", billing_views.rates_page, name="chargeback-rates"),
    path("chargeback/budgets/", billing_views.budgets_page, name="chargeback-budgets"),
    path("cluster/", scheduling_views.cluster_page, name="cluster"),
    path("cluster/utilisation/", scheduling_views.utilisation_page, name="utilisation"),
    path("alerts/", alerts_views.alerts_page, name="alerts"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_views.metrics, name="metrics"),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
