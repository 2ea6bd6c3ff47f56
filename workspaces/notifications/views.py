"""The signed-in person's notifications and their settings. Every query goes through ``visible_to``."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from portal.alerts.access import sees_alerts
from portal.http import AuthenticatedRequest
from workspaces.notifications.forms import PreferenceForm
from workspaces.notifications.models import LIST_RELATED, Notification, NotificationPreference

LIST_LIMIT = 200  # the newest; the API pages through all


@login_required
def notification_list(request: AuthenticatedRequest) -> HttpResponse:
    mine = Notification.objects.visible_to(request.user)
    rows = mine.select_related(*LIST_RELATED)[:LIST_LIMIT]
    return render(request, "notifications/list.html", {"notifications": rows, "unread": mine.unread().exists()})


@require_POST
@login_required
def mark_all_read(request: AuthenticatedRequest) -> HttpResponse:
    marked = Notification.objects.visible_to(request.user).unread().update(read_at=timezone.now())
    if marked:
        messages.success(request, f"Marked {marked} notification{'s' if marked != 1 else ''} read.")
    return redirect("notifications")


@login_required
def notification_settings(request: AuthenticatedRequest) -> HttpResponse:
    preference = NotificationPreference.for_user(request.user)
    # Bound on every POST, even an empty one (all boxes unticked, no URL): that is a choice too.
    form = PreferenceForm(
        request.POST if request.method == "POST" else None, instance=preference, ops=sees_alerts(request.user)
    )
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Notification settings saved.")
            return redirect("notification-settings")
        return render(request, "notifications/settings.html", {"form": form}, status=400)
    return render(request, "notifications/settings.html", {"form": form})
