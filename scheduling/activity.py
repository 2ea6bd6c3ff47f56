"""What the pages and the API show of a workspace's telemetry: its latest figures and whether they are fresh,
its idle state (warning, reclaim time, keep-alive), its recent series, and per team and per GPU model the
GPU time held idle.

Reads only; a few set-based queries per page whatever the number of workspaces (no query per row).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import F, FloatField, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Cast

from scheduling.models import ActivitySample, TeamPolicy
from scheduling.quota.rules import idle_rules_for
from scheduling.telemetry.samples import IDLE_ACTIVITY
from workspaces.models import Workspace

SERIES_HOURS = 6  # the detail page's sparkline


@dataclass(frozen=True)
class Activity:
    """One running workspace's telemetry as its pages show it. ``stale``: say so, and judge nothing on it."""

    at: datetime | None
    gpu_active: float | None
    fb_used_mib: float | None
    fb_total_mib: float | None
    kernels: int | None
    busy_kernels: int | None
    connections: int | None
    last_activity: datetime | None
    stale: str  # why the figures cannot be trusted now ("" when fresh)
    idle_warned_at: datetime | None
    reclaim_at: datetime | None  # when an idle warning ripens into a reclaim
    kept_alive_until: datetime | None
    keep_alives_left: int
    flagged_stuck_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(self).items()}


def staleness(
    sample: ActivitySample | None, *, now: datetime, max_gap: timedelta, has_gpu: bool, notebook: bool
) -> str:
    """Why ``sample`` (the latest) does not describe the workspace now; "" when it does. The same test the
    idle rule applies: no figure older than ``max_gap``, no figure missing."""
    if sample is None:
        return "No telemetry yet."
    if now - sample.at > max_gap:
        return f"Telemetry is stale: last collected {int((now - sample.at).total_seconds())} s ago."
    if has_gpu and (
        sample.gpu_active is None or sample.gpu_observed_at is None or sample.at - sample.gpu_observed_at > max_gap
    ):
        return "GPU telemetry is stale or missing: idle reclaim is paused until it is back."
    if notebook and sample.kernels is None:
        return "The notebook's activity could not be read: idle reclaim is paused until it can."
    return ""


def _latest_samples(ids: Sequence[int]) -> dict[int, ActivitySample]:
    newest = ActivitySample.objects.filter(workspace=OuterRef("pk"), hourly=False).order_by("-at").values("pk")[:1]
    sample_ids = Workspace.objects.filter(pk__in=ids).annotate(latest=Subquery(newest)).values_list("latest", flat=True)
    return {s.workspace_id: s for s in ActivitySample.objects.filter(pk__in=[i for i in sample_ids if i])}


def latest(workspaces: Iterable[Workspace], now: datetime) -> dict[int, Activity]:
    """Running workspaces' current activity, by id (others have none)."""
    running = [w for w in workspaces if w.state == Workspace.State.RUNNING]
    if not running:
        return {}
    samples = _latest_samples([w.pk for w in running])
    rules = idle_rules_for({w.team_id for w in running})
    found = {}
    for w in running:
        sample, team = samples.get(w.pk), rules[w.team_id]
        notebook = w.kind == Workspace.Kind.NOTEBOOK
        found[w.pk] = Activity(
            at=sample.at if sample else None,
            gpu_active=sample.gpu_active if sample else None,
            fb_used_mib=sample.fb_used_mib if sample else None,
            fb_total_mib=sample.fb_total_mib if sample else None,
            kernels=sample.kernels if sample else None,
            busy_kernels=sample.busy_kernels if sample else None,
            connections=sample.connections if sample else None,
            last_activity=sample.last_activity if sample else None,
            stale=staleness(
                sample, now=now, max_gap=team.policy.max_gap, has_gpu=w.gpu_equivalents > 0, notebook=notebook
            ),
            idle_warned_at=w.idle_warned_at,
            reclaim_at=w.idle_warned_at + team.policy.grace if w.idle_warned_at else None,
            kept_alive_until=w.kept_alive_until if w.kept_alive_until and w.kept_alive_until > now else None,
            keep_alives_left=max(0, team.keep_alives_per_run - w.keep_alives_used) if notebook else 0,
            flagged_stuck_at=w.flagged_stuck_at,
        )
    return found


def version(running: Sequence[int], upto: datetime | None = None) -> tuple[Any, ...]:
    """What :func:`latest` answers for the ``running`` workspaces depends on besides their own columns and the
    clock: their newest sample (samples are only added) and the teams' idle policies. Two small queries, for
    conditional GETs; a telemetry pass changes only the answers that show a running workspace. ``upto``: the
    newest sample collected by then; at the start of the viewer's clock step, a pass changes the tag at the
    step's end, with the clock, rather than once more as soon as it lands (an answer built meanwhile shows
    the newest, so it is never older than the tag says)."""
    samples = ActivitySample.objects.filter(workspace_id__in=list(running))
    if upto is not None:
        samples = samples.filter(at__lte=upto)
    newest = samples.aggregate(newest=Max("pk"))["newest"]
    return newest, tuple(TeamPolicy.objects.order_by("pk").values_list())


@dataclass(frozen=True)
class Point:
    at: datetime
    gpu_active: float | None
    fb_used_mib: float | None


def series(workspace: Workspace, now: datetime, hours: int = SERIES_HOURS) -> list[Point]:
    """The workspace's raw samples of the last ``hours``, oldest first (its current run and earlier ones)."""
    rows = ActivitySample.objects.filter(
        workspace=workspace, hourly=False, at__gte=now - timedelta(hours=hours)
    ).values_list("at", "gpu_active", "fb_used_mib")
    return [Point(*row) for row in rows.order_by("at")]


def idle_offenders(team_id: int, now: datetime, days: Sequence[int] = (7, 30)) -> list[dict[str, Any]]:
    """Per member of the team, the GPU-hours their workspaces held with the GPU idle (below the idle test)
    over each of ``days``, beside the GPU-hours with a figure at all; most idle first. Raw and hourly rows
    alike, so 30 days reach past the raw day."""
    longest = max(days)
    base = ActivitySample.objects.filter(workspace__team_id=team_id, at__gte=now - timedelta(days=longest))
    figures: dict[str, Any] = {}
    for d in days:
        recent = Q(at__gte=now - timedelta(days=d))
        figures[f"idle_{d}d"] = Sum(
            Cast(F("idle_gpu_seconds"), FloatField()) * Cast(F("workspace__gpu_equivalents"), FloatField()),
            filter=recent,
        )
        figures[f"observed_{d}d"] = Sum(
            Cast(F("gpu_seconds"), FloatField()) * Cast(F("workspace__gpu_equivalents"), FloatField()),
            filter=recent,
        )
    rows = (
        base.values("workspace__owner__username")
        .annotate(**figures)
        .order_by(f"-idle_{days[0]}d", "workspace__owner__username")
    )
    out = []
    for row in rows:
        if not any(row[f"observed_{d}d"] for d in days):
            continue
        entry: dict[str, Any] = {"user": row["workspace__owner__username"]}
        for d in days:
            entry[f"idle_gpu_hours_{d}d"] = round((row[f"idle_{d}d"] or 0) / 3600, 3)
            entry[f"observed_gpu_hours_{d}d"] = round((row[f"observed_{d}d"] or 0) / 3600, 3)
        out.append(entry)
    return out


@dataclass
class ModelActivity:
    """One GPU model's running GPU-equivalents: allocated, active (weighed by GPU activity), held idle (below
    the idle test), and without a fresh figure (counted in neither)."""

    allocated: Decimal = Decimal(0)
    active: float = 0.0
    idle: Decimal = Decimal(0)
    unknown: Decimal = Decimal(0)


def active_by_model(now: datetime) -> dict[str, ModelActivity]:
    """Per GPU model (offering flavour), what running workspaces hold and how much of it works now."""
    running = list(
        Workspace.objects.filter(state=Workspace.State.RUNNING, gpu_equivalents__gt=0).select_related("offering")
    )
    samples = _latest_samples([w.pk for w in running])
    max_gap = timedelta(seconds=3 * settings.TELEMETRY_INTERVAL_SECONDS)
    found: dict[str, ModelActivity] = {}
    for w in running:
        entry = found.setdefault(w.offering.flavour, ModelActivity())
        entry.allocated += w.gpu_equivalents
        sample = samples.get(w.pk)
        if sample is None or sample.gpu_active is None or now - sample.at > max_gap:
            entry.unknown += w.gpu_equivalents
            continue
        entry.active += float(w.gpu_equivalents) * sample.gpu_active
        if sample.gpu_active < IDLE_ACTIVITY:
            entry.idle += w.gpu_equivalents
    return found
