"""The demo catalogue: images, allowed registries and team quotas (offerings come from the cluster), a
week of history for a new demo, and the telemetry of its billing history's last week."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction

from portal.billing.models import UsageInterval
from portal.models import Team, User
from scheduling.models import ActivitySample, TeamPolicy, TeamQuota
from workspaces.models import AllowedRegistry, GpuOffering, Image, Workspace

IMAGES = (
    ("scipy-notebook", "Jupyter SciPy", "quay.io/jupyter/scipy-notebook:2025-06-02", Image.Kind.NOTEBOOK),
    (
        "pytorch-notebook",
        "Jupyter PyTorch (CUDA 12)",
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02",
        Image.Kind.NOTEBOOK,
    ),
    ("pytorch", "NVIDIA PyTorch 25.05", "nvcr.io/nvidia/pytorch:25.05-py3", Image.Kind.JOB),
    ("cuda-base", "CUDA 12.8 base", "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", Image.Kind.JOB),
)
REGISTRIES = ("nvcr.io/nvidia/", "quay.io/jupyter/", "ghcr.io/example-org/")
# Guaranteed GPU-equivalents per team and GPU model.
QUOTAS = {
    "vision": {"H100-80GB-HBM3": 8, "A100-SXM4-80GB": 4, "H200-141GB": 2, "L40S": 2},
    "language": {"H100-80GB-HBM3": 8, "A100-SXM4-80GB": 2, "H200-141GB": 2, "L40S": 1},
    "platform-ml": {"H100-80GB-HBM3": 4, "A100-SXM4-80GB": 2, "H200-141GB": 4, "L40S": 1},
}


@transaction.atomic
def seed_demo_catalogue() -> None:
    for slug, name, reference, kind in IMAGES:
        Image.objects.update_or_create(slug=slug, defaults={"display_name": name, "reference": reference, "kind": kind})
    for prefix in REGISTRIES:
        AllowedRegistry.objects.get_or_create(prefix=prefix)
    for team_slug, flavours in QUOTAS.items():
        team = Team.objects.filter(slug=team_slug).first()
        if team is None:
            continue
        for flavour, amount in flavours.items():
            TeamQuota.objects.update_or_create(team=team, flavour=flavour, defaults={"guaranteed": Decimal(amount)})
    # Vision's lead chose the shortest idle rules operators allow, so that reclaim shows within minutes: at
    # the demo's ten-times-faster idle clock (IDLE_POLICY_MINUTE_SECONDS) 30 min idle are 3, grace 5 min 30 s.
    vision = Team.objects.filter(slug="vision").first()
    if vision is not None:
        TeamPolicy.objects.update_or_create(team=vision, defaults={"idle_window_minutes": 30, "idle_grace_minutes": 5})


# A week of finished work, so that the quota charts and the what-if have something to show on a new demo:
# (team, owner, kind, offering slug, GPUs, hours a day it ran, first hour of the day, borrowing).
HISTORY = (
    ("vision", "alice", Workspace.Kind.NOTEBOOK, "h100-80gb-hbm3", 2, 6, 9, False),
    ("vision", "carol", Workspace.Kind.NOTEBOOK, "a100-sxm4-80gb-1g-10gb", 1, 8, 10, False),
    ("language", "bob", Workspace.Kind.JOB, "h100-80gb-hbm3", 8, 10, 20, False),
    # Nights: language borrows the H100s vision leaves idle (vision's chart shows them lent).
    ("language", "bob", Workspace.Kind.JOB, "h100-80gb-hbm3", 4, 8, 22, True),
    ("platform-ml", "oscar", Workspace.Kind.JOB, "h200-141gb-1g-18gb", 4, 12, 6, False),
)
BORROW_LIMITS = {"language": {"H100-80GB-HBM3": 8}}


@transaction.atomic
def seed_demo_history(now: datetime, days: int = 7) -> int:
    """Add ``days`` days of finished workspaces to a demo with none yet (needs the offerings); returns how many."""
    if Workspace.objects.exists():
        return 0
    for team_slug, flavours in BORROW_LIMITS.items():
        for flavour, amount in flavours.items():
            TeamQuota.objects.filter(team__slug=team_slug, flavour=flavour).update(borrow_limit=Decimal(amount))
    teams = {t.slug: t for t in Team.objects.all()}
    users = {u.username: u for u in User.objects.all()}
    offerings = {o.slug: o for o in GpuOffering.objects.all()}
    images = {kind: Image.objects.filter(kind=kind).first() for kind in Image.Kind}
    made = 0
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    # Night runs of the last day end after midnight: before they would have ended, the week ends a day earlier.
    overrun = max(hour + hours for *_, hours, hour, _borrowing in HISTORY) - 24
    if now < midnight + timedelta(hours=overrun):
        midnight -= timedelta(days=1)
    for day in range(days, 0, -1):
        for i, (team, owner, kind, slug, gpus, hours, hour, borrowing) in enumerate(HISTORY):
            image = images[Image.Kind.NOTEBOOK if kind == Workspace.Kind.NOTEBOOK else Image.Kind.JOB]
            if team not in teams or owner not in users or slug not in offerings or image is None:
                continue
            offering = offerings[slug]
            start = midnight - timedelta(days=day) + timedelta(hours=hour)
            workspace = Workspace.objects.create(
                name=f"{kind}-{day}d-{i}", kind=kind, team=teams[team], owner=users[owner], offering=offering,
                gpu_count=gpus, image=image.reference, command=["python", "train.py"] if kind == "job" else [],
                cpu_millis=offering.cpu_millis_default, memory_mib=offering.memory_mib_default,
                max_runtime_seconds=hours * 3600, gpu_equivalents=offering.gpu_equivalents * gpus, borrowing=borrowing,
                priority=Workspace.Priority.BATCH if borrowing else Workspace.Priority.NORMAL,
                state=Workspace.State.SUCCEEDED if kind == "job" else Workspace.State.STOPPED,
                reason="Demo history.",
            )  # fmt: skip
            # created_at is set on insert; history needs it in the past.
            Workspace.objects.filter(pk=workspace.pk).update(
                created_at=start, admitted_at=start, started_at=start, finished_at=start + timedelta(hours=hours)
            )
            made += 1
    return made


def seed_activity_history(now: datetime, days: int = 7) -> int:
    """Hourly telemetry rows for the demo's finished work of the last ``days`` days, from the ledger's
    figures (portal/billing/demo.py), so that the utilisation page shows active GPUs beside allocated ones."""
    if ActivitySample.objects.exists():
        return 0
    since = now - timedelta(days=days)
    samples: dict[tuple[int, datetime], ActivitySample] = {}
    rows = UsageInterval.objects.filter(last_seen_at__gt=since).values_list(
        "workspace_id", "started_at", "last_seen_at", "gpu_equivalents", "measured_gpu_seconds",
        "used_gpu_seconds", "idle_gpu_seconds",
    )  # fmt: skip
    for workspace_id, start, end, equivalents, measured, used, idle in rows:
        if not measured or not equivalents:
            continue
        active, idle_share = used / measured, idle / measured
        hour = max(start, since).replace(minute=0, second=0, microsecond=0)
        while hour < end:
            seconds = int((min(end, hour + timedelta(hours=1)) - max(start, hour)).total_seconds())
            if seconds > 0 and (workspace_id, hour) not in samples:
                samples[(workspace_id, hour)] = ActivitySample(
                    workspace_id=workspace_id, at=hour, seconds=seconds, gpu_seconds=seconds,
                    idle_gpu_seconds=int(seconds * idle_share), hourly=True, source=ActivitySample.Source.SCRAPE,
                    gpu_active=active, gpu_observed_at=hour,
                )  # fmt: skip
            hour += timedelta(hours=1)
    ActivitySample.objects.bulk_create(samples.values(), batch_size=1000)
    return len(samples)
