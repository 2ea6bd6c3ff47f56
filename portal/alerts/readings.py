"""The figures one alert check needs, read through the metrics' own functions (``portal.metrics.gauges``,
``events``), so the portal's alerts see what ``/metrics`` shows: a few grouped queries, none per workspace."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from portal.alerts.conditions import Readings
from portal.metrics import events, gauges
from portal.models import Team
from workspaces.models import WorkspaceEvent

WAIT_WINDOW = timedelta(hours=1)  # the rule's rate(...[1h])


def admission_waits(now: datetime) -> dict[str, tuple[list[int], int]]:
    """Per GPU model, the admission-wait histogram of the last hour (up to the settling margin): the event
    counter run from the last event before the hour."""
    cutoff = now - timedelta(seconds=settings.METRICS_EVENT_SETTLE_SECONDS)
    # Newest first by id: only the hour's events are scanned to find the one before it.
    before = WorkspaceEvent.objects.filter(at__lt=cutoff - WAIT_WINDOW).order_by("-id").values_list("id", flat=True)
    totals = events.count_since(events.Totals(upto=before.first() or 0), cutoff)
    per_model: dict[str, tuple[list[int], int]] = {}
    for (gpu_model, _kind, _priority), hist in totals.waits.items():
        buckets, count = per_model.get(gpu_model, ([0] * len(events.WAIT_BUCKETS), 0))
        per_model[gpu_model] = ([a + b for a, b in zip(buckets, hist.buckets, strict=True)], count + hist.count)
    return per_model


def read(now: datetime) -> Readings:
    queue = gauges.queue(now)
    held = gauges.held(now)
    slugs = dict(Team.objects.values_list("slug", "pk"))
    demand = dict(queue.demand)
    for (gpu_model, _team), amount in held["allocated"].items():
        demand[gpu_model] = demand.get(gpu_model, 0.0) + amount

    def by_id(figures: dict[tuple[str, str], float]) -> dict[tuple[str, int], float]:
        return {(model, slugs[slug]): v for (model, slug), v in figures.items() if slug in slugs}

    return Readings(
        within_quota=queue.within,
        demand=demand,
        capacity=gauges.capacity(),
        measured=by_id(held["measured"]),
        active=by_id(held["active"]),
        waits=admission_waits(now),
        wait_bounds=events.WAIT_BUCKETS,
        loops={stat.loop: stat.last_finished_at for stat in gauges.loops()},
        api_errors=gauges.api_errors(),
        team_names=dict(Team.objects.values_list("pk", "name")),
    )
