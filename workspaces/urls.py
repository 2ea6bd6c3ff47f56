from django.urls import path

from workspaces import views

urlpatterns = [
    path("", views.workspace_list, name="workspaces"),
    path("new/", views.workspace_new, name="workspace-new"),
    path("<int:workspace_id>/", views.workspace_detail, name="workspace-detail"),
    path("<int:workspace_id>/<str:verb>/", views.workspace_action, name="workspace-action"),
]
