"""The usage ledger, written from what the cluster was seen doing.

The reconcile loop calls :func:`record_pods` each pass with the pods it saw running (and
:func:`record_capacity`, now and then, with the GPUs the nodes have). Nothing else writes the ledger: an
admitted or queued workspace costs nothing until a pod of it runs.

When an interval starts and ends is known only to within the time between two observations. A pod first
seen running at pass ``t`` started after the previous pass ``p``: the interval opens at the midpoint of
(p, t], which keeps the error of each end under half a pass. When the two are further apart than
``BILLING_OBSERVATION_GAP_SECONDS`` (a worker down, the Kubernetes API out), that is a gap in observation:
a pod first seen after a gap opens when its containers started as the cluster reports it, kept within the
gap (at ``t`` when it reports nothing), and one missing after a gap closes at its last sighting (its end
is not known). The same pod (by UID) seen on both sides of a gap ran through it; its interval goes on.

Every pass is one transaction under the stream's :class:`LedgerCursor` row lock: concurrent passes take
turns, a pass older than the cursor changes nothing, and a crash rolls its pass back whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, FloatField, Q, Value, When
from django.db.models.functions import Cast

from portal.billing import periods
from portal.billing.models import CapacityInterval, ClosedMonth, LedgerCursor, RateCardEntry, UsageInterval
from portal.billing.rates import MODEL_PRICE, Price, RateCard, shape_key


@dataclass(frozen=True)
class RunningPod:
    uid: str
    name: str
    workspace_id: int
    started_at: datetime | None = None  # when its containers started, as the cluster says


def _started(status: Mapping[str, Any]) -> datetime | None:
    """The earliest ``state.running.startedAt`` of the pod's containers (the kubelet's clock)."""
    times = []
    for container in status.get("containerStatuses") or []:
        text = ((container.get("state") or {}).get("running") or {}).get("startedAt")
        if not text:
            continue
        try:
            times.append(datetime.fromisoformat(str(text).replace("Z", "+00:00")))
        except ValueError:
            continue
    return min(times, default=None)


def running_pods(pods_by_workspace: Mapping[int, Iterable[Mapping[str, Any]]]) -> list[RunningPod]:
    """The pods that hold their devices now: phase Running (a pod still terminating runs until it is gone)."""
    found = []
    for workspace_id, pods in pods_by_workspace.items():
        for pod in pods:
            meta, status = pod.get("metadata") or {}, pod.get("status") or {}
            if status.get("phase") == "Running" and meta.get("uid"):
                found.append(RunningPod(str(meta["uid"]), str(meta.get("name", "")), workspace_id, _started(status)))
    return found


def zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def rate_card() -> RateCard:
    return RateCard(
        Price(e.gpu_model, e.shape, e.hourly_price, e.effective_from)
        for e in RateCardEntry.objects.only("gpu_model", "shape", "hourly_price", "effective_from")
    )


def _opened_at(previous: datetime | None, now: datetime, gap: timedelta) -> datetime:
    """When something first seen at ``now`` began, as far as the observations tell."""
    if previous is None or now - previous > gap or previous >= now:
        return now
    return previous + (now - previous) / 2


def _first_seen(pod: RunningPod, previous: datetime | None, now: datetime, gap: timedelta) -> datetime:
    """When a pod first seen at ``now`` began running. Between regular passes: the midpoint. After a gap (a
    worker down, the API out): the cluster's own start time of its containers, kept within the gap (a
    node's clock that runs ahead or behind cannot bill time outside it); without one, ``now``."""
    if previous is None or now - previous <= gap or previous >= now:
        return _opened_at(previous, now, gap)
    if pod.started_at is None:
        return now
    return min(max(pod.started_at, previous), now)


def _closed_at(last_seen: datetime, now: datetime, gap: timedelta) -> datetime:
    """When something last seen at ``last_seen`` and missing at ``now`` ended."""
    if now - last_seen > gap:
        return last_seen
    return last_seen + (now - last_seen) / 2


def _advance_cursor(stream: str, observed_at: datetime) -> tuple[bool, datetime | None]:
    """Lock the stream's cursor; (whether this pass is the newest, the previous observation)."""
    LedgerCursor.objects.get_or_create(stream=stream)
    cursor = LedgerCursor.objects.select_for_update().get(stream=stream)
    previous = cursor.observed_at
    if previous is not None and previous >= observed_at:
        return False, previous
    cursor.observed_at = observed_at
    cursor.save(update_fields=["observed_at"])
    return True, previous


def _gap() -> timedelta:
    return timedelta(seconds=settings.BILLING_OBSERVATION_GAP_SECONDS)


@dataclass(frozen=True)
class PassResult:
    opened: int = 0
    closed: int = 0
    split: int = 0
    stale: bool = False


def _boundaries(card: RateCard, gpu_model: str, shape: str, start: datetime, end: datetime) -> list[datetime]:
    return periods.month_starts_between(start, end, zone()) + card.changes(gpu_model, shape, start, end)


def _latest_cut(card: RateCard, upto: datetime) -> datetime:
    """The last boundary of any kind at or before ``upto``: intervals that began after it need no cutting."""
    month = periods.month_start(periods.month_of(upto, zone()), zone())
    change = card.latest_change(upto)
    return max(month, change) if change else month


# -- pods ---------------------------------------------------------------------------------------------

_COPIED = (
    "workspace_id",
    "pod_uid",
    "pod_name",
    "user_id",
    "team_id",
    "department_id",
    "cost_centre",
    "offering_id",
    "offering_kind",
    "gpu_model",
    "shape",
    "units",
    "gpu_equivalents",
)


def _pod_facts(workspace_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """What a new interval copies from its workspace, for the workspaces that bill (GPU offerings)."""
    from workspaces.models import Workspace  # the ledger belongs to the organisation; workspaces load later

    rows = Workspace.objects.filter(pk__in=set(workspace_ids), gpu_count__gt=0).values(
        "pk",
        "owner_id",
        "team_id",
        "gpu_count",
        "offering_id",
        "team__department_id",
        "team__department__cost_centre",
        "offering__kind",
        "offering__gpu_model",
        "offering__mig_profile",
        "offering__replicas",
        "offering__gpu_equivalents",
    )
    return {
        row["pk"]: {
            "workspace_id": row["pk"],
            "user_id": row["owner_id"],
            "team_id": row["team_id"],
            "department_id": row["team__department_id"],
            "cost_centre": row["team__department__cost_centre"],
            "offering_id": row["offering_id"],
            "offering_kind": row["offering__kind"],
            "gpu_model": row["offering__gpu_model"],
            "shape": shape_key(row["offering__kind"], row["offering__mig_profile"], row["offering__replicas"]),
            "units": row["gpu_count"],
            "gpu_equivalents": row["offering__gpu_equivalents"] * row["gpu_count"],
        }
        for row in rows
    }


def pod_rate(card: RateCard, gpu_model: str, shape: str, units: int, gpu_equivalents: Decimal, at: datetime) -> Decimal:
    """A pod's price per hour: ``units`` of the shape (no price set yet: nothing)."""
    if not units:
        return Decimal(0)
    price = card.unit_price(gpu_model, shape, gpu_equivalents / units, at)
    return (price or Decimal(0)) * units


@dataclass(frozen=True)
class _Pass:
    """What one pass prices and books by: the rate card, and the months finance closed."""

    card: RateCard
    closed: frozenset[date]

    @classmethod
    def load(cls) -> _Pass:
        return cls(rate_card(), frozenset(ClosedMonth.objects.values_list("period", flat=True)))

    def book(self, month: date) -> tuple[date, date | None]:
        """(the month to charge usage of ``month`` in, the closed month it adjusts or None)."""
        if month not in self.closed:
            return month, None
        booked = periods.next_month(month)
        while booked in self.closed:
            booked = periods.next_month(booked)
        return booked, month


def _usage_rows(
    run: _Pass, facts: Mapping[str, Any], start: datetime, end: datetime, *, open_last: bool
) -> list[UsageInterval]:
    """``[start, end]`` as intervals cut at month starts and price changes, the last one left open or not;
    a piece in a closed month is booked in the next open one, as an adjustment."""
    pieces = periods.cut(start, end, _boundaries(run.card, facts["gpu_model"], facts["shape"], start, end))
    rows = []
    for index, (a, b) in enumerate(pieces):
        rate = pod_rate(run.card, facts["gpu_model"], facts["shape"], facts["units"], facts["gpu_equivalents"], a)
        ended = None if open_last and index == len(pieces) - 1 else b
        period, adjusts = run.book(periods.month_of(a, zone()))
        rows.append(
            UsageInterval(
                **facts, rate=rate, started_at=a, last_seen_at=b, ended_at=ended, period=period, adjusts=adjusts
            )
        )
    return rows


def _bring_to(run: _Pass, interval: UsageInterval, end: datetime, *, still_open: bool) -> int:
    """Extend or close ``interval`` at ``end``, cut where a month or price boundary falls inside it; the
    number of rows that added. A row of a closed month keeps its figures: it is only marked ended, and the
    time after its last sighting becomes rows of their own."""
    facts = {name: getattr(interval, name) for name in _COPIED}
    if interval.period in run.closed:
        UsageInterval.objects.filter(pk=interval.pk, ended_at=None).update(ended_at=F("last_seen_at"))
        if end <= interval.last_seen_at:
            return 0
        late = _usage_rows(run, facts, interval.last_seen_at, end, open_last=still_open)
        UsageInterval.objects.bulk_create(late)
        return len(late)
    first, *rest = _usage_rows(run, facts, interval.started_at, end, open_last=still_open)
    UsageInterval.objects.filter(pk=interval.pk).update(
        last_seen_at=first.last_seen_at, ended_at=first.ended_at, rate=first.rate, period=first.period,
        adjusts=first.adjusts,
    )  # fmt: skip
    UsageInterval.objects.bulk_create(rest)
    return len(rest)


def record_pods(observed_at: datetime, pods: Iterable[RunningPod]) -> PassResult:
    """One observation of the pods running at ``observed_at`` into the ledger."""
    seen = {pod.uid: pod for pod in pods}
    gap = _gap()
    with transaction.atomic():
        newest, previous = _advance_cursor("pods", observed_at)
        if not newest:
            return PassResult(stale=True)
        run = _Pass.load()
        cut_at = _latest_cut(run.card, observed_at)
        open_rows = list(
            UsageInterval.objects.filter(ended_at=None).only("pk", "pod_uid", "started_at", "last_seen_at", "period")
        )
        going_on = [row for row in open_rows if row.pod_uid in seen]
        gone = [row for row in open_rows if row.pod_uid not in seen]
        # The common case in one statement: still running, no boundary passed since it opened.
        plain = [row.pk for row in going_on if row.started_at >= cut_at]
        UsageInterval.objects.filter(pk__in=plain).update(last_seen_at=observed_at)
        to_cut = [row.pk for row in going_on if row.started_at < cut_at]
        split = sum(_bring_to(run, row, observed_at, still_open=True) for row in _whole(to_cut))
        ends: dict[datetime, list[int]] = {}
        for row in gone:
            ends.setdefault(max(_closed_at(row.last_seen_at, observed_at, gap), row.started_at), []).append(row.pk)
        for end, pks in ends.items():
            simple = Q(started_at__gte=_latest_cut(run.card, end)) & ~Q(period__in=run.closed)
            UsageInterval.objects.filter(simple, pk__in=pks).update(last_seen_at=end, ended_at=end)
            crossing = UsageInterval.objects.filter(~simple, pk__in=pks)
            split += sum(_bring_to(run, row, end, still_open=False) for row in crossing)
        known = {row.pod_uid for row in going_on}
        new = [pod for uid, pod in seen.items() if uid not in known]
        facts = _pod_facts(pod.workspace_id for pod in new)
        created: list[UsageInterval] = []
        for pod in new:
            if (fact := facts.get(pod.workspace_id)) is not None:
                fact = {**fact, "pod_uid": pod.uid, "pod_name": pod.name}
                start = _first_seen(pod, previous, observed_at, gap)
                created += _usage_rows(run, fact, start, observed_at, open_last=True)
        UsageInterval.objects.bulk_create(created)
        return PassResult(opened=len(created), closed=len(gone), split=split)


def _whole(pks: list[int]) -> list[UsageInterval]:
    return list(UsageInterval.objects.filter(pk__in=pks)) if pks else []


# -- capacity -----------------------------------------------------------------------------------------


def _capacity_rows(
    run: _Pass, gpu_model: str, gpus: int, start: datetime, end: datetime, *, open_last: bool
) -> list[CapacityInterval]:
    """Like :func:`_usage_rows`; the fleet of a closed month stays as it was at closing (nobody is charged
    for it, so there is nothing to book), so pieces in closed months are left out."""
    card = run.card
    pieces = periods.cut(start, end, _boundaries(card, gpu_model, MODEL_PRICE, start, end))
    return [
        CapacityInterval(
            gpu_model=gpu_model,
            gpus=gpus,
            rate=card.model_price(gpu_model, a) or Decimal(0),
            started_at=a,
            last_seen_at=b,
            ended_at=None if open_last and index == len(pieces) - 1 else b,
            period=periods.month_of(a, zone()),
        )
        for index, (a, b) in enumerate(pieces)
        if periods.month_of(a, zone()) not in run.closed
    ]


def record_capacity(observed_at: datetime, gpus_by_model: Mapping[str, int]) -> PassResult:
    """One observation of the fleet (GPUs per model) into the capacity ledger. A model whose count
    changed closes one interval and opens the next where the change is estimated to have happened."""
    gap = timedelta(seconds=3 * settings.BILLING_CAPACITY_SECONDS)
    current = {model: n for model, n in gpus_by_model.items() if model and n > 0}
    with transaction.atomic():
        newest, previous = _advance_cursor("capacity", observed_at)
        if not newest:
            return PassResult(stale=True)
        run = _Pass.load()
        split = closed = 0
        begins: dict[str, datetime] = {}
        for row in CapacityInterval.objects.filter(ended_at=None):
            same = current.get(row.gpu_model) == row.gpus
            end = observed_at if same else max(_closed_at(row.last_seen_at, observed_at, gap), row.started_at)
            if row.period in run.closed:
                CapacityInterval.objects.filter(pk=row.pk).update(ended_at=F("last_seen_at"))
                rest = _capacity_rows(run, row.gpu_model, row.gpus, row.last_seen_at, end, open_last=same)
            else:
                first, *rest = _capacity_rows(run, row.gpu_model, row.gpus, row.started_at, end, open_last=same)
                CapacityInterval.objects.filter(pk=row.pk).update(
                    last_seen_at=first.last_seen_at, ended_at=first.ended_at, rate=first.rate
                )
            CapacityInterval.objects.bulk_create(rest)
            split += len(rest)
            if same:
                current.pop(row.gpu_model)
            else:
                closed += 1
                begins[row.gpu_model] = end
        start = _opened_at(previous, observed_at, gap)
        created: list[CapacityInterval] = []
        for model, gpus in current.items():
            begin = max(begins.get(model, start), start)
            created += _capacity_rows(run, model, gpus, begin, observed_at, open_last=True)
        CapacityInterval.objects.bulk_create(created)
        return PassResult(opened=len(current), closed=closed, split=split)


# -- activity -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One telemetry collection of one workspace, in wall seconds: with a GPU figure, that weighted by its
    activity, and below the idle test."""

    measured: float
    used: float
    idle: float


def add_activity(seen_by_workspace: Mapping[int, Seen], *, batch: int = 1000) -> int:
    """Add one collection to the open intervals of each workspace, times each pod's GPU-equivalents (a job's
    figure is the mean over its pods). Set-based: one UPDATE per ``batch`` workspaces."""
    items = [(pk, seen) for pk, seen in seen_by_workspace.items() if seen.measured > 0]
    updated = 0
    weight = Cast("gpu_equivalents", FloatField())
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]

        def per(field: str, chunk: list[tuple[int, Seen]] = chunk) -> Case:
            whens = [When(workspace_id=pk, then=Value(getattr(seen, field))) for pk, seen in chunk]
            return Case(*whens, default=Value(0.0), output_field=FloatField())

        updated += UsageInterval.objects.filter(ended_at=None, workspace_id__in=[pk for pk, _ in chunk]).update(
            measured_gpu_seconds=F("measured_gpu_seconds") + per("measured") * weight,
            used_gpu_seconds=F("used_gpu_seconds") + per("used") * weight,
            idle_gpu_seconds=F("idle_gpu_seconds") + per("idle") * weight,
        )
    return updated


# -- history ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PastRun:
    """A pod run that is over, for a ledger started after it (the demo's months of history)."""

    workspace_id: int
    pod_uid: str
    pod_name: str
    start: datetime
    end: datetime


def past_intervals(runs: Iterable[PastRun]) -> list[UsageInterval]:
    """Closed intervals for ``runs``, cut and priced as live ones are (unsaved; CPU-only ones left out)."""
    runs = list(runs)
    run = _Pass.load()
    facts = _pod_facts(r.workspace_id for r in runs)
    rows: list[UsageInterval] = []
    for past in runs:
        if (fact := facts.get(past.workspace_id)) is not None:
            fact = {**fact, "pod_uid": past.pod_uid, "pod_name": past.pod_name}
            rows += _usage_rows(run, fact, past.start, past.end, open_last=False)
    return rows


def past_capacity(gpus_by_model: Mapping[str, int], start: datetime, end: datetime) -> list[CapacityInterval]:
    """Closed capacity intervals for a fleet that stood unchanged over [start, end] (unsaved)."""
    run = _Pass.load()
    return [
        row
        for model, gpus in sorted(gpus_by_model.items())
        for row in _capacity_rows(run, model, gpus, start, end, open_last=False)
    ]
