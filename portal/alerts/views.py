"""``/alerts/``: the alerts firing now and the firings resolved lately, for operators (all) and leads (their
teams'); for operators also the control loops stalled right now, computed at request time (the check that
records alerts runs on the worker, so a dead worker would never report itself)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from portal.access import is_operator
from portal.alerts import access
from portal.alerts.conditions import Stall, stalled_loops
from portal.alerts.states import RESOLVED
from portal.http import AuthenticatedRequest
from portal.metrics import gauges
from portal.metrics.rules import Thresholds

RESOLVED_DAYS = 7
RESOLVED_LIMIT = 100


def live_stalls() -> list[Stall]:
    """The control loops stalled now (one small query): what the cluster and alerts pages show operators."""
    last = {stat.loop: stat.last_finished_at for stat in gauges.loops()}
    return stalled_loops(last, Thresholds.from_settings(settings), timezone.now())


@login_required
def alerts_page(request: AuthenticatedRequest) -> HttpResponse:
    access.require_alerts(request.user)
    now = timezone.now()
    visible = access.alerts_visible_to(request.user).select_related("team")
    firing = list(visible.filter(firing_since__isnull=False, resolved_at__isnull=True))
    firing.sort(key=lambda a: (a.severity != "critical", a.firing_since))
    resolved = (
        access.notices_visible_to(request.user)
        .filter(change=RESOLVED, at__gte=now - timedelta(days=RESOLVED_DAYS))
        .select_related("alert__team")[:RESOLVED_LIMIT]
    )
    context = {
        "firing": firing,
        "resolved": resolved,
        "resolved_days": RESOLVED_DAYS,
        "check_seconds": settings.ALERT_CHECK_SECONDS,
        "operator": is_operator(request.user),
        "stalls": live_stalls() if is_operator(request.user) else [],
    }
    return render(request, "alerts/list.html", context)
