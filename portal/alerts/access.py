"""Who sees which alerts: operators every one; a team's leads their team's (none of the portal-wide ones);
nobody else any. The page and the menu ask here."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from portal.access import is_operator
from portal.alerts.models import OpsAlert, OpsAlertNotice
from portal.models import Membership


def _led_teams(user: Any) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(user_id=user.pk, role=Membership.Role.LEAD).values("team_id")


def sees_alerts(user: Any) -> bool:
    if is_operator(user):
        return True
    return bool(getattr(user, "is_authenticated", False) and user.is_active and _led_teams(user).exists())


def require_alerts(user: Any) -> None:
    if not sees_alerts(user):
        raise PermissionDenied("Only operators and team leads see alerts.")


def alerts_visible_to(user: Any) -> QuerySet[OpsAlert]:
    if is_operator(user):
        return OpsAlert.objects.all()
    if not sees_alerts(user):
        return OpsAlert.objects.none()
    return OpsAlert.objects.filter(team_id__in=_led_teams(user))


def notices_visible_to(user: Any) -> QuerySet[OpsAlertNotice]:
    return OpsAlertNotice.objects.filter(alert__in=alerts_visible_to(user))
