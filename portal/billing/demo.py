"""Months of billing history for a new demo, so that every chart has something real-looking to show: a
rate card (with a price change), budgets, finished workspaces with their ledger intervals and telemetry
figures, the fleet, and every month but the last two closed by finance.

Deterministic (a fixed seed); runs only on a demo whose ledger is empty.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction

from portal.billing import closing, periods
from portal.billing.ledger import PastRun, past_capacity, past_intervals, zone
from portal.billing.models import Budget, CapacityInterval, RateCardEntry, UsageInterval
from portal.models import Team, User
from workspaces.models import GpuOffering, Image, Workspace

# Per GPU model, the price of one GPU-hour; H100 got cheaper two months ago (a split in the ledger).
PRICES = {"H100-80GB-HBM3": "4.20", "H200-141GB": "5.60", "A100-SXM4-80GB": "2.80", "L40S": "1.20"}
PRICE_CHANGE = ("H100-80GB-HBM3", "3.90")
BUDGETS = (
    ("vision", "3000", Budget.Unit.MONEY, Budget.Policy.BLOCK_BATCH),
    ("language", "900", Budget.Unit.GPU_HOURS, Budget.Policy.WARN),
    ("platform-ml", "2500", Budget.Unit.MONEY, Budget.Policy.BLOCK_ALL),
)
# What the teams do on a working day: (team, owner, kind, offering, GPUs, pods, hours (min, max), start
# hour (min, max), activity while held (min, max), idle share (min, max)).
PATTERNS = (
    ("vision", "alice", "notebook", "h100-80gb-hbm3", 1, 1, (3, 8), (8, 11), (0.15, 0.45), (0.3, 0.6)),
    ("vision", "carol", "notebook", "a100-sxm4-80gb-1g-10gb", 1, 1, (4, 9), (9, 12), (0.2, 0.5), (0.2, 0.5)),
    ("vision", "alice", "job", "h100-80gb-hbm3", 4, 1, (6, 16), (17, 21), (0.75, 0.95), (0.0, 0.05)),
    ("vision", "carol", "job", "a100-sxm4-80gb-2g-20gb", 1, 7, (8, 20), (16, 20), (0.7, 0.9), (0.02, 0.08)),
    ("language", "bob", "job", "h100-80gb-hbm3", 8, 1, (8, 18), (19, 23), (0.8, 0.97), (0.0, 0.04)),
    ("language", "bob", "notebook", "l40s-shared-4", 1, 1, (2, 6), (9, 14), (0.1, 0.3), (0.4, 0.8)),
    ("language", "lena", "notebook", "l40s-shared-4", 1, 1, (3, 8), (9, 12), (0.1, 0.4), (0.3, 0.7)),
    ("language", "bob", "job", "l40s-shared-4", 1, 8, (6, 14), (20, 23), (0.6, 0.9), (0.02, 0.1)),
    ("platform-ml", "oscar", "job", "h200-141gb-1g-18gb", 4, 7, (10, 20), (6, 9), (0.6, 0.9), (0.02, 0.1)),
    ("platform-ml", "oscar", "job", "a100-sxm4-80gb-3g-40gb", 1, 8, (8, 18), (18, 22), (0.7, 0.95), (0.01, 0.05)),
    ("platform-ml", "carol", "notebook", "a100-sxm4-80gb-3g-40gb", 1, 1, (2, 7), (10, 15), (0.1, 0.4), (0.3, 0.7)),
)


def _seed_prices(first: datetime, now: datetime) -> None:
    for model, price in PRICES.items():
        RateCardEntry.objects.create(
            gpu_model=model, hourly_price=Decimal(price), effective_from=first, note="Demo: the hardware's cost."
        )
    model, price = PRICE_CHANGE
    changed = periods.month_start(periods.previous_month(periods.month_of(now, zone())), zone())
    RateCardEntry.objects.create(
        gpu_model=model, hourly_price=Decimal(price), effective_from=changed, note="Demo: new support contract."
    )


def _workspaces(first: datetime, now: datetime) -> dict[int, tuple[float, float]]:
    """Finished workspaces of every day since ``first`` (weekends quieter); their activity and idle share."""
    rng = random.Random(4100)  # noqa: S311 - demo data, not security
    teams = {t.slug: t for t in Team.objects.all()}
    users = {u.username: u for u in User.objects.all()}
    offerings = {o.slug: o for o in GpuOffering.objects.all()}
    images: dict[str, Image | None] = {str(kind): Image.objects.filter(kind=kind).first() for kind in Image.Kind}
    made: list[tuple[Workspace, float, float]] = []
    day = first
    while day + timedelta(days=1) < now:
        weekend = day.astimezone(zone()).weekday() >= 5
        for team, owner, kind, slug, gpus, pods, hours, hour, active, idle in PATTERNS:
            offering, image = offerings.get(slug), images.get(kind)
            if team not in teams or owner not in users or offering is None or image is None:
                continue
            if rng.random() < (0.75 if weekend else 0.15):
                continue
            start = day + timedelta(hours=rng.uniform(*hour))
            end = min(start + timedelta(hours=rng.uniform(*hours)), now - timedelta(hours=1))
            workspace = Workspace(
                name=f"{kind}-{start:%m%d}-{owner}", kind=kind, team=teams[team], owner=users[owner],
                offering=offering, gpu_count=gpus, workers=pods, image=image.reference,
                command=["python", "train.py"] if kind == "job" else [], cpu_millis=offering.cpu_millis_default,
                memory_mib=offering.memory_mib_default, max_runtime_seconds=24 * 3600,
                gpu_equivalents=offering.gpu_equivalents * gpus * pods,
                priority=Workspace.Priority.NORMAL if kind == "job" else Workspace.Priority.INTERACTIVE,
                state=Workspace.State.SUCCEEDED if kind == "job" else Workspace.State.STOPPED,
                reason="Demo history.", admitted_at=start, started_at=start, finished_at=end,
            )  # fmt: skip
            made.append((workspace, rng.uniform(*active), rng.uniform(*idle)))
        day += timedelta(days=1)
    Workspace.objects.bulk_create([w for w, _, _ in made], batch_size=500)
    for workspace, _, _ in made:  # created_at is set on insert; history needs it in the past
        workspace.created_at = workspace.admitted_at or first
    Workspace.objects.bulk_update([w for w, _, _ in made], ["created_at"], batch_size=500)
    return {w.pk: (active, idle) for w, active, idle in made}


@transaction.atomic
def seed_billing_history(now: datetime, fleet: Mapping[str, int], *, months: int = 4) -> int:
    """``months`` full months before this one and this month so far; returns the intervals made."""
    if UsageInterval.objects.exists() or RateCardEntry.objects.exists():
        return 0
    first_month = periods.month_of(now, zone())
    for _ in range(months):
        first_month = periods.previous_month(first_month)
    first = periods.month_start(first_month, zone())
    _seed_prices(first, now)
    for slug, amount, unit, policy in BUDGETS:
        if (team := Team.objects.filter(slug=slug).first()) is not None:
            Budget.objects.update_or_create(team=team, defaults={"amount": Decimal(amount), "unit": unit,
                                                                 "policy": policy})  # fmt: skip
    activity = _workspaces(first, now)
    # Every finished workspace bills, the week of history the quota charts show (scheduling/demo.py) too.
    finished = Workspace.objects.filter(started_at__gte=first, finished_at__isnull=False, gpu_count__gt=0)
    rng = random.Random(2200)  # noqa: S311 - demo data, not security
    past = [
        PastRun(w.pk, f"demo-{w.pk}-{pod}", f"ws-{w.pk}-{w.name}-{pod}", w.started_at, w.finished_at)
        for w in finished.only("pk", "name", "workers", "started_at", "finished_at")
        if w.started_at and w.finished_at and w.finished_at > w.started_at
        for pod in range(w.workers)
    ]
    rows = past_intervals(past)
    for row in rows:
        held = (row.last_seen_at - row.started_at).total_seconds() * float(row.gpu_equivalents)
        active, idle = activity.get(row.workspace_id) or (rng.uniform(0.2, 0.9), rng.uniform(0.05, 0.5))
        row.measured_gpu_seconds = held * 0.97  # a few minutes a day without telemetry
        row.used_gpu_seconds = row.measured_gpu_seconds * active
        row.idle_gpu_seconds = row.measured_gpu_seconds * idle
    UsageInterval.objects.bulk_create(rows, batch_size=1000)
    CapacityInterval.objects.bulk_create(past_capacity(fleet, first, now))
    finance = User.objects.filter(orgroles__role="finance").first()
    if finance is not None:
        month = first_month
        while periods.month_bounds(month, zone())[1] < now - timedelta(days=31):
            closing.close_month(finance, month)
            month = periods.next_month(month)
    return len(rows)
