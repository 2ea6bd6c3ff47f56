from django.urls import path

from workspaces.notifications import views

urlpatterns = [
    path("", views.notification_list, name="notifications"),
    path("read/", views.mark_all_read, name="notifications-read"),
    path("settings/", views.notification_settings, name="notification-settings"),
]
