"""Who may see scheduling objects: departments and their caps, the audit log.

Who may *change* quotas, caps, policies and member caps is checked by ``scheduling.quota.actions`` (pages and
API alike) with ``portal.access``; who may see a team is ``portal.access`` too.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from portal import access
from portal.models import AuditEvent, Department, Membership


def access_department_by_id(user: Any, department_id: int | str) -> Department:
    """Operators see every department; others those of their teams. Missing and not visible are both 404."""
    departments = Department.objects.all()
    if not access.is_operator(user):
        departments = departments.filter(teams__in=access.teams_visible_to(user)).distinct()
    try:
        department: Department = departments.get(pk=int(department_id))
    except (Department.DoesNotExist, ValueError, TypeError):
        raise Http404("No such department.") from None
    return department


def audit_events_visible_to(user: Any) -> QuerySet[AuditEvent]:
    """Operators read the whole audit log; leads read their teams' entries; others none."""
    events = AuditEvent.objects.select_related("actor", "team")
    if access.is_operator(user):
        return events
    led = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values("team_id")
    return events.filter(team_id__in=led)
