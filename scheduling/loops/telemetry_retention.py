"""Keeping samples compact: raw rows for ``TELEMETRY_RAW_HOURS`` (24 h: the idle window, the detail page's
sparkline), then one row per workspace and hour, kept ``TELEMETRY_RETENTION_DAYS`` (90 d: the team page's
7- and 30-day figures, the usage ledger's weighting).

An hourly row keeps what the ledger and the pages need: ``seconds``, ``gpu_seconds`` and ``idle_gpu_seconds``
summed, GPU activity as the mean weighted by ``gpu_seconds`` (so hours with no figure do not dilute it), the
highest memory and kernel figures, the latest activity. Both steps are set-based: one aggregate query, one
delete, one insert.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, FloatField, Max, Sum
from django.db.models.functions import Cast, TruncHour

from scheduling.models import ActivitySample


def compact(now: datetime) -> int:
    """Replace the raw rows of every hour that ended more than ``TELEMETRY_RAW_HOURS`` ago by one hourly row
    per workspace; answers how many raw rows went. Hours are whole (the cut-off is on the hour) and the
    collector only writes the present, so an hour is compacted once, however late the task runs."""
    cutoff = (now - timedelta(hours=settings.TELEMETRY_RAW_HOURS)).replace(minute=0, second=0, microsecond=0)
    raw = ActivitySample.objects.filter(hourly=False, at__lt=cutoff)
    with transaction.atomic():
        buckets = list(
            raw.annotate(hour=TruncHour("at", tzinfo=UTC))  # whole UTC hours, whatever TIME_ZONE
            .values("workspace_id", "hour")
            .annotate(
                seconds_sum=Sum("seconds"),
                gpu_seconds_sum=Sum("gpu_seconds"),
                idle_sum=Sum("idle_gpu_seconds"),
                weighted=Sum(F("gpu_active") * Cast("gpu_seconds", FloatField())),
                source_max=Max("source"),
                observed=Max("gpu_observed_at"),
                fb_used=Max("fb_used_mib"),
                fb_total=Max("fb_total_mib"),
                kernels_max=Max("kernels"),
                busy=Max("busy_kernels"),
                connections_max=Max("connections"),
                last=Max("last_activity"),
            )
            .order_by()
        )
        if not buckets:
            return 0
        gone, _ = raw.delete()
        ActivitySample.objects.bulk_create(
            [
                ActivitySample(
                    workspace_id=b["workspace_id"],
                    at=b["hour"],
                    hourly=True,
                    seconds=b["seconds_sum"],
                    gpu_seconds=b["gpu_seconds_sum"],
                    idle_gpu_seconds=b["idle_sum"],
                    source=b["source_max"],
                    gpu_active=b["weighted"] / b["gpu_seconds_sum"] if b["gpu_seconds_sum"] else None,
                    gpu_observed_at=b["observed"],
                    fb_used_mib=b["fb_used"],
                    fb_total_mib=b["fb_total"],
                    kernels=b["kernels_max"],
                    busy_kernels=b["busy"],
                    connections=b["connections_max"],
                    last_activity=b["last"],
                )
                for b in buckets
            ],
            batch_size=1000,
        )
    return gone


def expire(now: datetime) -> int:
    """Delete samples older than ``TELEMETRY_RETENTION_DAYS``; answers how many."""
    cutoff = now - timedelta(days=settings.TELEMETRY_RETENTION_DAYS)
    deleted, _ = ActivitySample.objects.filter(at__lt=cutoff).delete()
    return deleted
