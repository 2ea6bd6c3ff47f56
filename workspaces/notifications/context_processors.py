"""The unread count beside the menu on every page: one indexed COUNT, only for signed-in people."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from workspaces.notifications.models import Notification


def unread_notifications(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False):
        return {}
    # Lazy: counted only if the template shows the badge (not on the login page, not on JSON answers).
    return {"unread_notifications": lambda: Notification.objects.visible_to(user).unread().count()}
