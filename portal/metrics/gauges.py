"""What the portal holds right now, read from the database (and the broker) at scrape time: a few
grouped queries, none per workspace.

- The queue per GPU model and team: requests and the age of the oldest (since it last entered the queue).
- Requests waiting *within quota*: their team's guaranteed GPU-equivalents of the model cover what the team
  holds plus the request, so capacity, not quota, holds them back (what an operator must act on).
- Demand (held plus queued GPU-equivalents) per model, against the fleet's capacity: contention.
- Allocated GPU-equivalents per model and team (the pods the usage ledger sees running) and active ones
  (the same weighted by each workspace's latest GPU activity sample); borrowed ones (beyond guarantee).
- Budgets: the share of each team's monthly budget spent.
- The loops (passes, seconds, last success) and failed Kubernetes API calls, as the workers recorded them.
- Celery's queues: messages waiting in the broker.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import OuterRef, Subquery, Sum

from portal.billing import budgets
from portal.billing.models import CapacityInterval, UsageInterval
from portal.celery import app as celery_app
from portal.metrics.events import model_label, queued_since
from portal.metrics.figures import Waiting
from portal.models import Team
from portal.queue import portal_queues
from scheduling.models import ActivitySample, KubeApiErrorCount, LoopStat, TeamQuota
from workspaces.models import Workspace

Queued = tuple[int, str | None, Decimal, datetime]  # team id, gpu_model, GPU-equivalents, queued since


@dataclass(frozen=True)
class Queue:
    per_team: dict[tuple[str, str], Waiting]  # (gpu_model label, team slug): everything queued
    within: dict[tuple[str, int], Waiting]  # (gpu_model, team id): queued within the team's guarantee
    demand: dict[str, float]  # gpu_model label: queued GPU-equivalents

    def within_per_model(self) -> dict[str, Waiting]:
        merged: dict[str, Waiting] = {}
        for (gpu_model, _team), waiting in self.within.items():
            have = merged.get(gpu_model, Waiting(0, 0.0))
            merged[gpu_model] = Waiting(
                have.requests + waiting.requests, max(have.oldest_seconds, waiting.oldest_seconds)
            )
        return merged


def within_quota(
    queued: Iterable[Queued],
    held: Mapping[tuple[int, str], Decimal],
    guaranteed: Mapping[tuple[int, str], Decimal],
    now: datetime,
) -> dict[tuple[str, int], Waiting]:
    """Per (gpu_model, team): the queued requests that fit the team's guarantee on top of what it holds
    (each on its own: capacity, not quota, holds it back). Pure."""
    ages: dict[tuple[str, int], list[float]] = defaultdict(list)
    for team_id, gpu_model, amount, since in queued:
        room = guaranteed.get((team_id, gpu_model or ""), Decimal(0)) - held.get((team_id, gpu_model or ""), Decimal(0))
        if gpu_model and amount <= room:
            ages[(gpu_model, team_id)].append(max(0.0, (now - since).total_seconds()))
    return {key: Waiting(len(found), max(found)) for key, found in ages.items()}


def queue(now: datetime) -> Queue:
    """The queue now: three grouped queries."""
    rows = list(
        Workspace.objects.filter(state=Workspace.State.QUEUED)
        .annotate(since=queued_since(of_event=False))
        .values_list("team_id", "team__slug", "offering__gpu_model", "gpu_equivalents", "since")
    )
    held = {
        (team_id, gpu_model): amount or Decimal(0)
        for team_id, gpu_model, amount in Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES)
        .values("team_id", "offering__gpu_model")
        .annotate(amount=Sum("gpu_equivalents"))
        .values_list("team_id", "offering__gpu_model", "amount")
    }
    guaranteed = {(q.team_id, q.flavour): q.guaranteed for q in TeamQuota.objects.all()}
    per_team: dict[tuple[str, str], list[float]] = defaultdict(list)
    demand: dict[str, float] = defaultdict(float)
    for _team_id, team_slug, gpu_model, amount, since in rows:
        per_team[(model_label(gpu_model), team_slug)].append(max(0.0, (now - since).total_seconds()))
        demand[model_label(gpu_model)] += float(amount)
    within = within_quota(((t, m, a, since) for t, _slug, m, a, since in rows), held, guaranteed, now)
    return Queue({key: Waiting(len(ages), max(ages)) for key, ages in per_team.items()}, within, dict(demand))


def held(now: datetime) -> dict[str, dict[tuple[str, str], float]]:
    """Per (gpu_model, team): GPU-equivalents ``allocated``, ``measured`` (of pods with a recent GPU sample:
    missing telemetry must not look idle), ``active`` (those weighted by their activity) and ``borrowed``."""
    fresh = now - timedelta(seconds=3 * settings.TELEMETRY_INTERVAL_SECONDS)
    latest = (
        ActivitySample.objects.filter(workspace=OuterRef("workspace_id"), hourly=False, at__gte=fresh)
        .exclude(gpu_active=None)
        .order_by("-at")
        .values("gpu_active")[:1]
    )
    figures: dict[str, dict[tuple[str, str], float]] = {"allocated": {}, "measured": {}, "active": {}, "borrowed": {}}
    rows = (
        UsageInterval.objects.filter(ended_at__isnull=True)
        .annotate(activity=Subquery(latest))
        .values_list("gpu_model", "team__slug", "gpu_equivalents", "activity", "workspace__borrowing")
    )
    for gpu_model, team, amount, activity, borrowing in rows:
        key = (gpu_model, team)
        figures["allocated"][key] = figures["allocated"].get(key, 0.0) + float(amount)
        if activity is not None:
            figures["measured"][key] = figures["measured"].get(key, 0.0) + float(amount)
            figures["active"][key] = figures["active"].get(key, 0.0) + float(amount) * activity
        if borrowing:
            figures["borrowed"][key] = figures["borrowed"].get(key, 0.0) + float(amount)
    return figures


def capacity() -> dict[str, int]:
    return dict(CapacityInterval.objects.filter(ended_at__isnull=True).values_list("gpu_model", "gpus"))


def budget_shares(now: datetime) -> dict[str, float]:
    """Per team slug: the share of its monthly budget spent so far (1.0 = exhausted)."""
    statuses = budgets.statuses(now)
    slugs = dict(Team.objects.filter(pk__in=statuses).values_list("pk", "slug"))
    return {slugs[team_id]: status.share for team_id, status in statuses.items() if team_id in slugs}


def loops() -> list[LoopStat]:
    return list(LoopStat.objects.order_by("loop"))


def api_errors() -> dict[str, int]:
    return dict(KubeApiErrorCount.objects.values_list("status", "count"))


def broker_queues() -> dict[str, int | None]:
    """Messages waiting in each of the portal's Celery queues (None: the broker did not answer)."""
    names = portal_queues(settings.CELERY_TASK_DEFAULT_QUEUE)
    depths: dict[str, int | None] = {}
    try:
        with celery_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=celery_app.conf.broker_connection_timeout)
            channel = conn.channel()
            try:
                for name in names:
                    try:
                        declared = channel.queue_declare(queue=name, passive=True)  # type: ignore[attr-defined]
                        depths[name] = int(declared.message_count)
                    except Exception:  # a queue nobody declared yet holds nothing
                        depths[name] = 0
            finally:
                channel.close()
    except Exception:  # the broker down is a figure (absent), not a failed scrape
        return dict.fromkeys(names)
    return depths
