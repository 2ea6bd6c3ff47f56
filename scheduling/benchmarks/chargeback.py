"""Benchmark of one month's chargeback (``manage.py bench_chargeback``): how long the report takes to build
and to export for a large organisation, and how many SQL queries building it makes.

The scenario, generated from a seed for one calendar month (January 2026 unless told otherwise):

* an organisation of ``teams // 5`` departments (one cost centre each), ``teams`` teams and ``teams * 5``
  users (five members a team), and a finance user who opens the pages;
* the demo catalogue's offerings (proposed from the demo cluster's nodes, slugs ``cb-...``): whole H100s,
  A100 and H200 MIG slices, time-sliced L40S shares; a rate card with a price per GPU model and one shape of
  its own (``RateCardEntry``);
* the fleet: ``nodes`` nodes of 8 GPUs for the whole month (``CapacityInterval``, one row per GPU model),
  split over the models in proportion to what the workspaces hold of each, so that about 70 % of the
  GPU-hours are held and the rest is unallocated;
* ``workspaces`` finished workspaces whose run pieces (``UsageInterval``: one row per pod and piece) lie
  inside the month: notebooks and training jobs of 1-8 GPUs (8-GPU jobs with up to 4 workers, one row per
  pod), MIG slices and shares; some notebooks stopped and resumed (2-3 pieces), some jobs retried. Held
  durations are log-normal, scaled so that ``workspaces x mean duration = concurrent x month``: about
  ``concurrent`` workspaces run at any time. Teams spend unevenly (Zipf-like). Telemetry figures
  (``measured/used/idle_gpu_seconds``) are filled: notebooks idle more than jobs, a few pieces unmeasured.

Workspaces and usage rows go in with PostgreSQL's COPY (elsewhere ``bulk_create``), then ``ANALYZE``, as
the autovacuum of a live database would have. What is timed, each the median of ``repeats`` runs:

* ``report.build`` of the month by team (showback), by cost centre (full recovery, unallocated cost spread)
  and by user (showback), with the SQL part (``sums.gather``) and the pure part (``report.assemble``) apart,
  and the queries of each build counted (``CaptureQueriesContext``);
* ``exports.to_csv``, ``to_xlsx`` and ``to_pdf`` of each of those reports, with the file sizes;
* the chargeback page and its three downloads through the views (Django's test client, as finance).

The query counts are measured a second time on an organisation a tenth the size (20 teams against 200),
generated in the same month once the large one is rolled back: they must not change with the number of teams.
``history`` earlier months can be given a copy of the month's usage rows (PostgreSQL), for what the
chargeback page's 12-month trend reads on a ledger a year old.

Everything runs in one transaction that is rolled back at the end (``keep=True`` commits it instead, and
skips the comparison), so a demo database is left as it was; on PostgreSQL the tables written are vacuumed
before and after, as aborted inserts stay in them as dead rows that every later scan reads. A month that
already holds ledger rows or is closed is refused.
"""

from __future__ import annotations

import bisect
import json
import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar

from django.contrib.auth.hashers import make_password
from django.db import connection, models, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from portal.billing import exports, periods, report, sums
from portal.billing.ledger import pod_rate, zone
from portal.billing.models import CapacityInterval, ClosedMonth, RateCardEntry, UsageInterval
from portal.billing.rates import MODEL_PRICE, Price, RateCard, shape_key
from portal.models import Department, Membership, OrgRole, Team, User
from scheduling.benchmarks.cycle import install_offerings
from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import default_cluster_file, load_cluster_file
from workspaces.models import GpuOffering, Workspace

PREFIX = "cb"  # slugs, usernames and workspace names of everything the benchmark makes
MONTH = date(2026, 1, 1)
GPUS_PER_NODE = 8
CHUNK = 10_000  # workspaces generated and written at a time
# Per-GPU prices (EUR an hour) and one shape priced on its own, in effect well before the month.
PRICES = {"H100-80GB-HBM3": "4.00", "A100-SXM4-80GB": "2.80", "H200-141GB": "5.60", "L40S": "1.20"}
OWN_PRICES = {("A100-SXM4-80GB", "mig-1g.10gb"): "0.45"}
FIRST_NAMES = ("Alice", "Bob", "Chloé", "Dmitri", "Eun-ji", "Farah", "Gustav", "Hiroshi", "Ines", "Jonas", "Łucja")
LAST_NAMES = ("Andersen", "Brown", "Çelik", "Dubois", "Eriksson", "Fischer", "García", "Horvath", "Ito", "Jensen")
NOTEBOOK_IMAGE = "quay.io/jupyter/scipy-notebook:2025-06-02"
JOB_IMAGE = "nvcr.io/nvidia/pytorch:25.05-py3"
Kind = Workspace.Kind


class BenchError(RuntimeError):
    """The benchmark cannot run as asked (the month already has ledger rows, say)."""


@dataclass(frozen=True)
class Shape:
    """One kind of request: how often, on which demo offering, as what, with how many GPUs per pod."""

    weight: int
    offering: str  # the demo catalogue's slug (before the benchmark's prefix)
    kind: str
    counts: tuple[int, ...] = (1,)
    workers_at_8: tuple[int, ...] = (1,)  # workers of a job of 8 GPUs a pod

    def workers(self, count: int) -> tuple[int, ...]:
        return self.workers_at_8 if count == 8 else (1,)


SHAPES = (
    Shape(24, "h100-80gb-hbm3", Kind.NOTEBOOK, (1, 1, 1, 2)),
    Shape(14, "h100-80gb-hbm3", Kind.JOB, (1, 1, 2, 2, 4, 8), (1, 1, 2, 4)),
    Shape(10, "a100-sxm4-80gb-1g-10gb", Kind.NOTEBOOK),
    Shape(8, "a100-sxm4-80gb-2g-20gb", Kind.NOTEBOOK),
    Shape(6, "a100-sxm4-80gb-3g-40gb", Kind.JOB),
    Shape(10, "h200-141gb-1g-18gb", Kind.NOTEBOOK),
    Shape(18, "l40s-shared-4", Kind.NOTEBOOK),
)


@dataclass(frozen=True)
class Scenario:
    workspaces: int = 150_000
    concurrent: int = 5_000
    nodes: int = 1_000
    teams: int = 200
    seed: int = 1
    month: date = MONTH
    repeats: int = 3
    history: int = 0  # earlier months given a copy of the month's usage rows (the page's 12-month trend)

    @property
    def departments(self) -> int:
        return max(1, self.teams // 5)

    @property
    def users(self) -> int:
        return self.teams * 5

    def smaller(self) -> Scenario:
        """A tenth of it: the organisation the query counts are compared with."""
        return Scenario(
            workspaces=max(1, self.workspaces // 10),
            concurrent=max(1, self.concurrent // 10),
            nodes=max(1, self.nodes // 10),
            teams=max(1, self.teams // 10),
            seed=self.seed,
            month=self.month,
            repeats=1,
        )


# --- the figures -------------------------------------------------------------------------------------


@dataclass
class Generated:
    departments: int
    teams: int
    users: int
    workspaces: int
    intervals: int  # usage rows: pods x pieces
    fleet: dict[str, int]  # GPUs per model
    running_workspaces: float  # mean over the month
    running_pods: float
    held_share: float  # of the fleet's GPU-hours
    seconds: float
    write_s: float  # of it, writing workspaces and usage rows (COPY or bulk_create)
    history_rows: int = 0  # usage rows copied into the earlier months
    history_s: float = 0.0


@dataclass
class Export:
    seconds: float
    size: int


@dataclass
class Build:
    label: str
    group: str
    mode: str
    spread: bool
    lines: int
    seconds: float  # report.build, median
    gather_s: float  # sums.gather (the SQL), median
    assemble_s: float  # report.assemble (pure Python), median
    queries: int  # of one build
    exports: dict[str, Export] = field(default_factory=dict)


@dataclass
class Request:
    """A page or download through its view, as finance."""

    label: str
    path: str
    seconds: float
    queries: int
    size: int


@dataclass
class Report:
    scenario: Scenario
    database: str
    generated: Generated
    builds: list[Build]
    requests: list[Request]
    # The same queries counted on the smaller organisation: its teams, and label -> queries.
    compared_teams: int | None = None
    compared: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scenario"]["month"] = self.scenario.month.isoformat()
        return data


BUILDS = (
    ("team, showback", "team", report.Mode.SHOWBACK, False),
    ("cost centre, full + spread", "cost_centre", report.Mode.FULL, True),
    ("user, showback", "user", report.Mode.SHOWBACK, False),
)
FORMATS = ("csv", "xlsx", "pdf")


# --- writing many rows fast --------------------------------------------------------------------------

M = TypeVar("M", bound=models.Model)


def _default(column: models.Field[Any, Any]) -> Any:
    if getattr(column, "auto_now", False) or getattr(column, "auto_now_add", False):
        return timezone.now()
    value = column.get_default()
    return json.dumps(value) if isinstance(column, models.JSONField) else value


def insert(model: type[M], columns: Sequence[str], rows: Sequence[Sequence[Any]], *, ids: bool = False) -> list[int]:
    """Write ``rows`` (values for ``columns``, attribute names; the other columns take their defaults) and
    answer their primary keys when ``ids``. PostgreSQL: COPY, ids drawn from the table's sequence first;
    elsewhere ``bulk_create``. Values are Python's: ints, strings, decimals, aware datetimes, JSON data."""
    if not rows:
        return []
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(columns, row, strict=True))) for row in rows]
        model._default_manager.bulk_create(objects, batch_size=2000)
        return [int(o.pk) for o in objects] if ids else []
    meta = model._meta
    by_name = {f.attname: f for f in meta.concrete_fields}
    pk = meta.pk
    assert pk is not None
    rest = [f for f in meta.concrete_fields if f.attname not in columns and f is not pk]
    defaults = tuple(_default(f) for f in rest)
    as_json = [i for i, name in enumerate(columns) if isinstance(by_name[name], models.JSONField)]
    quote = connection.ops.quote_name
    names = [by_name[name].column for name in columns] + [f.column for f in rest]
    new_ids: list[int] = []
    with connection.cursor() as cursor:
        if ids:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, pk.column, len(rows)],
            )
            new_ids = [int(n) for (n,) in cursor.fetchall()]
            names.insert(0, pk.column)
        sql = f"COPY {quote(meta.db_table)} ({', '.join(quote(n) for n in names)}) FROM STDIN"
        with cursor.cursor.copy(sql) as copy:
            for index, row in enumerate(rows):
                values = list(row)
                for i in as_json:
                    values[i] = json.dumps(values[i])
                copy.write_row(([new_ids[index]] if ids else []) + values + list(defaults))
    return new_ids


WRITTEN = (UsageInterval, CapacityInterval, Workspace, Membership, User, Team, Department, GpuOffering, RateCardEntry)


def vacuum() -> bool:
    """PostgreSQL, outside a transaction: reclaim the rows a rolled-back run leaves dead. Aborted inserts
    stay in the tables until vacuumed, and every later sequential scan (the report's) reads them; autovacuum
    may be late, or off. Answers whether it ran."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in WRITTEN)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {tables}")
    return True


def analyze() -> None:
    """Planner statistics for the tables just filled (inside the transaction: rolled back with it)."""
    if connection.vendor != "postgresql":
        return
    tables = [m._meta.db_table for m in (UsageInterval, CapacityInterval, Workspace, User, Team, Department)]
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(connection.ops.quote_name(t) for t in tables)}")


# --- the organisation, the catalogue, the fleet ------------------------------------------------------


@dataclass
class World:
    month_start: datetime
    month_seconds: int
    teams: list[Team]
    team_weights: list[float]
    members: dict[int, list[int]]  # team id -> user ids
    offerings: dict[str, GpuOffering]  # by demo slug
    card: RateCard
    finance: User


def demo_offerings() -> list[GpuOffering]:
    """The demo catalogue, as ``seed_demo``/the tests install it, under the benchmark's slugs."""
    nodes = build_cluster_nodes(load_cluster_file(default_cluster_file()), created="2026-01-01T00:00:00Z")
    return install_offerings(nodes, PREFIX)


def build_world(scenario: Scenario, rng: random.Random) -> World:
    count = scenario.departments
    departments = Department.objects.bulk_create(
        Department(name=f"Bench chargeback department {i:03d}", slug=f"{PREFIX}-dept-{i}", cost_centre=f"CB-{1000 + i}")
        for i in range(count)
    )
    teams = Team.objects.bulk_create(
        Team(department=departments[i % count], name=f"Bench chargeback team {i:04d}", slug=f"{PREFIX}-team-{i}")
        for i in range(scenario.teams)
    )
    password = make_password(None)  # unusable; hashing one per user would dominate the setup
    users = User.objects.bulk_create(
        User(
            username=f"{PREFIX}-user-{i}",
            first_name=rng.choice(FIRST_NAMES),
            last_name=rng.choice(LAST_NAMES),
            password=password,
        )
        for i in range(scenario.users)
    )
    members: dict[int, list[int]] = {team.pk: [] for team in teams}
    for i, user in enumerate(users):
        members[teams[i % len(teams)].pk].append(user.pk)
    Membership.objects.bulk_create(Membership(team_id=t, user_id=u) for t, us in members.items() for u in us)
    finance = User.objects.create(username=f"{PREFIX}-finance", password=password, first_name="Finance")
    OrgRole.objects.create(user=finance, role=OrgRole.Role.FINANCE)
    # A few teams spend most (Zipf-like), in no particular order of their ids.
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(teams))]
    rng.shuffle(weights)
    offerings = {o.slug.removeprefix(f"{PREFIX}-"): o for o in demo_offerings()}
    start, end = periods.month_bounds(scenario.month, zone())
    return World(
        month_start=start,
        month_seconds=int((end - start).total_seconds()),
        teams=teams,
        team_weights=weights,
        members=members,
        offerings=offerings,
        card=install_rate_card(scenario.month),
        finance=finance,
    )


def install_rate_card(month: date) -> RateCard:
    since = periods.month_bounds(periods.previous_month(periods.previous_month(month)), zone())[0]
    entries = [
        RateCardEntry(gpu_model=model, shape=MODEL_PRICE, hourly_price=Decimal(price), effective_from=since)
        for model, price in PRICES.items()
    ] + [
        RateCardEntry(gpu_model=model, shape=shape, hourly_price=Decimal(price), effective_from=since)
        for (model, shape), price in OWN_PRICES.items()
    ]
    RateCardEntry.objects.bulk_create(entries, ignore_conflicts=True)  # a demo's own prices stay
    return RateCard(Price(e.gpu_model, e.shape, e.hourly_price, e.effective_from) for e in entries)


def _shapes(world: World) -> list[Shape]:
    shapes = [s for s in SHAPES if s.offering in world.offerings]
    if not shapes:
        raise BenchError("the demo catalogue proposed none of the benchmark's offerings")
    return shapes


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values)


def fleet(world: World, shapes: Sequence[Shape], nodes: int) -> dict[str, int]:
    """GPUs per model: ``nodes`` nodes of 8 split in proportion to what the shapes hold of each model
    (largest remainders; every model one node at least while there are nodes enough)."""
    demand: defaultdict[str, float] = defaultdict(float)
    total_weight = sum(s.weight for s in shapes)
    for s in shapes:
        offering = world.offerings[s.offering]
        gpus = sum(count * _mean(s.workers(count)) for count in s.counts) / len(s.counts)  # a workspace's
        demand[offering.gpu_model] += s.weight / total_weight * gpus * float(offering.gpu_equivalents)
    models_ = sorted(demand)
    floor = 1 if nodes >= len(models_) else 0
    spare = nodes - floor * len(models_)
    exact = {m: spare * demand[m] / sum(demand.values()) for m in models_}
    counts = {m: floor + int(exact[m]) for m in models_}
    for m in sorted(models_, key=lambda m: int(exact[m]) - exact[m])[: nodes - sum(counts.values())]:
        counts[m] += 1
    return {m: n * GPUS_PER_NODE for m, n in counts.items() if n}


def install_fleet(world: World, gpus: dict[str, int], month: date) -> None:
    start, end = periods.month_bounds(month, zone())
    CapacityInterval.objects.bulk_create(
        CapacityInterval(
            gpu_model=model,
            gpus=n,
            rate=world.card.model_price(model, start) or Decimal(0),
            started_at=start,
            last_seen_at=end,
            ended_at=end,
            period=month,
        )
        for model, n in sorted(gpus.items())
    )


# --- the month's workspaces --------------------------------------------------------------------------

WORKSPACE_COLUMNS = (
    "name", "kind", "team_id", "owner_id", "offering_id", "gpu_count", "workers", "image", "command", "cpu_millis",
    "memory_mib", "max_runtime_seconds", "gpu_equivalents", "priority", "state", "reason", "created_at",
    "admitted_at", "started_at", "finished_at",
)  # fmt: skip
USAGE_COLUMNS = (
    "workspace_id", "pod_uid", "pod_name", "user_id", "team_id", "department_id", "cost_centre", "offering_id",
    "offering_kind", "gpu_model", "shape", "units", "gpu_equivalents", "rate", "started_at", "last_seen_at",
    "ended_at", "period", "measured_gpu_seconds", "used_gpu_seconds", "idle_gpu_seconds",
)  # fmt: skip


def held_durations(scenario: Scenario, rng: random.Random, month_seconds: int) -> list[int]:
    """Each workspace's held seconds: log-normal, scaled so that they sum to ``concurrent`` x the month
    (none over half the month, none under five minutes)."""
    sigma = 1.0
    raw = [rng.lognormvariate(0.0, sigma) for _ in range(scenario.workspaces)]
    scale = scenario.concurrent * month_seconds / sum(raw)
    return [int(min(month_seconds / 2, max(300.0, d * scale))) for d in raw]


@dataclass
class _Tally:
    workspaces: int = 0
    intervals: int = 0
    workspace_seconds: float = 0.0
    pod_seconds: float = 0.0
    held_gpu_seconds: float = 0.0
    write_s: float = 0.0  # of it, writing the rows


def _pieces(kind: str, rng: random.Random) -> int:
    if kind == Kind.NOTEBOOK:
        return rng.choices((1, 2, 3), weights=(70, 20, 10))[0]  # stopped and resumed
    return rng.choices((1, 2), weights=(93, 7))[0]  # retried after a failure


@dataclass(frozen=True)
class _Offered:
    """A shape with what its rows copy from its offering: ids, names, per-pod figures by GPU count."""

    shape: Shape
    offering_id: int
    kind: str
    gpu_model: str
    shape_key: str
    cpu_millis: int
    memory_mib: int
    per_pod: dict[int, tuple[Decimal, Decimal, float]]  # GPUs a pod -> (GPU-equivalents, rate, as float)


def _offered(world: World) -> list[_Offered]:
    found = []
    for shape in _shapes(world):
        o = world.offerings[shape.offering]
        key = shape_key(o.kind, o.mig_profile, o.replicas)
        per_pod = {}
        for count in set(shape.counts):
            eq = o.gpu_equivalents * count
            rate = pod_rate(world.card, o.gpu_model, key, count, eq, world.month_start).quantize(Decimal("0.000001"))
            per_pod[count] = (eq, rate, float(eq))
        found.append(
            _Offered(shape, o.pk, o.kind, o.gpu_model, key, o.cpu_millis_default, o.memory_mib_default, per_pod)
        )
    return found


def _usage_telemetry(job: bool, rng: random.Random) -> tuple[float, float, float]:
    """(share of the time with a GPU figure, share of that below the idle test, activity while not idle)."""
    coverage = 0.0 if rng.random() < 0.03 else (1.0 if rng.random() < 0.85 else 0.5 + rng.random() / 2)
    if job:
        return coverage, 0.6 * rng.random() ** 3, 1 - 0.6 * rng.random() ** 2
    return coverage, 0.1 + 0.7 * rng.random(), 0.1 + 0.6 * rng.random()


def generate(scenario: Scenario, world: World, rng: random.Random, progress: Callable[[str], None]) -> _Tally:
    """Write the month's workspaces and their usage rows, ``CHUNK`` workspaces at a time."""
    offered = _offered(world)
    cum_shapes = list(_cumulative([o.shape.weight for o in offered]))
    cum_teams = list(_cumulative(world.team_weights))
    teams = [(t.pk, t.department.pk, t.department.cost_centre, world.members[t.pk]) for t in world.teams]
    durations = held_durations(scenario, rng, world.month_seconds)
    month, start, length = scenario.month, world.month_start, world.month_seconds
    tally = _Tally()
    for first in range(0, scenario.workspaces, CHUNK):
        workspace_rows: list[tuple[Any, ...]] = []
        usage_rows: list[list[Any]] = []
        for index in range(first, min(first + CHUNK, scenario.workspaces)):
            o = offered[bisect.bisect(cum_shapes, rng.random() * cum_shapes[-1])]
            team, department, cost_centre, members = teams[bisect.bisect(cum_teams, rng.random() * cum_teams[-1])]
            owner = rng.choice(members)
            count = rng.choice(o.shape.counts)
            workers = rng.choice(o.shape.workers(count))
            per_pod, rate, eq = o.per_pod[count]
            job = o.shape.kind == Kind.JOB
            held = durations[index]
            pieces = _pieces(o.shape.kind, rng)
            cuts = sorted(rng.random() for _ in range(pieces - 1))
            lengths = [max(60, int(held * (b - a))) for a, b in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
            gaps = [rng.randrange(1800, 16 * 3600) for _ in range(pieces - 1)]
            span = sum(lengths) + sum(gaps)
            at = rng.randrange(0, max(1, length - span))
            name = f"{PREFIX}-{index}"
            began = finished = start + timedelta(seconds=at)
            for piece, wanted in enumerate(lengths):
                end_at = min(at + wanted, length)
                a, b = start + timedelta(seconds=at), start + timedelta(seconds=end_at)
                seconds = end_at - at
                coverage, idle, activity = _usage_telemetry(job, rng)
                measured = eq * seconds * coverage
                for worker in range(workers):
                    usage_rows.append(
                        [index - first, f"{name}-{piece}-{worker}", f"{name}-{piece}-{worker}", owner, team, department,
                         cost_centre, o.offering_id, o.kind, o.gpu_model, o.shape_key, count, per_pod, rate, a, b, b,
                         month, measured, measured * (1 - idle) * activity, measured * idle]
                    )  # fmt: skip
                tally.workspace_seconds += seconds
                tally.pod_seconds += seconds * workers
                tally.held_gpu_seconds += seconds * workers * eq
                finished = b
                at = end_at + (gaps[piece] if piece < len(gaps) else 0)
                if at >= length:
                    break
            workspace_rows.append(
                (name, o.shape.kind, team, owner, o.offering_id, count, workers, JOB_IMAGE if job else NOTEBOOK_IMAGE,
                 ["python", "train.py"] if job else [], o.cpu_millis, o.memory_mib, max(8 * 3600, span),
                 per_pod * workers, Workspace.Priority.NORMAL if job else Workspace.Priority.INTERACTIVE,
                 Workspace.State.SUCCEEDED if job else Workspace.State.STOPPED, "Benchmark history.", began, began,
                 began, finished)
            )  # fmt: skip
        began_writing = time.perf_counter()
        ids = insert(Workspace, WORKSPACE_COLUMNS, workspace_rows, ids=True)
        for row in usage_rows:
            row[0] = ids[row[0]]
        insert(UsageInterval, USAGE_COLUMNS, usage_rows)
        tally.write_s += time.perf_counter() - began_writing
        tally.workspaces += len(workspace_rows)
        tally.intervals += len(usage_rows)
        progress(f"  {tally.workspaces} workspaces, {tally.intervals} usage rows written")
    return tally


def _cumulative(weights: Sequence[float]) -> Iterator[float]:
    total = 0.0
    for w in weights:
        total += w
        yield total


def copy_history(scenario: Scenario, world: World) -> int:
    """Give each of the ``history`` months before the benchmark's a copy of its usage rows (PostgreSQL, one
    INSERT ... SELECT), moved by the whole days between the month starts and cut at the earlier month's end:
    what the chargeback page's 12-month trend reads on a ledger a year old."""
    if connection.vendor != "postgresql":
        raise BenchError("--history needs PostgreSQL")
    tz = zone()
    targets: list[Any] = []
    month = scenario.month
    for _ in range(scenario.history):
        month = periods.previous_month(month)
        first, last = periods.month_bounds(month, tz)
        targets += [world.month_start - first, last, month]
    moved = ("started_at", "last_seen_at", "ended_at")
    meta = UsageInterval._meta
    quote = connection.ops.quote_name
    kept = [f.column for f in meta.concrete_fields if f.column not in (*moved, "period") and f is not meta.pk]
    values = ", ".join(["(%s::interval, %s::timestamptz, %s::date)"] * scenario.history)
    table = quote(meta.db_table)
    columns = ", ".join(quote(c) for c in [*kept, *moved, "period"])
    copied = ", ".join([*(f"u.{quote(c)}" for c in kept), *(f"LEAST(u.{quote(c)} - h.shift, h.upto)" for c in moved)])
    # Only the model's own table and column names go into the text; the values are parameters.
    sql = f"INSERT INTO {table} ({columns}) SELECT {copied}, h.period FROM {table} u, "  # noqa: S608
    sql += f"(VALUES {values}) AS h (shift, upto, period) WHERE u.period = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*targets, scenario.month])
        return int(cursor.rowcount)


def populate(scenario: Scenario, progress: Callable[[str], None]) -> tuple[World, Generated]:
    started = time.perf_counter()
    rng = random.Random(scenario.seed)
    world = build_world(scenario, rng)
    gpus = fleet(world, _shapes(world), scenario.nodes)
    install_fleet(world, gpus, scenario.month)
    tally = generate(scenario, world, rng, progress)
    history_began = time.perf_counter()
    history_rows = copy_history(scenario, world) if scenario.history else 0
    history_s = time.perf_counter() - history_began
    analyze()
    length = world.month_seconds
    capacity = sum(gpus.values()) * length
    return world, Generated(
        departments=scenario.departments,
        teams=scenario.teams,
        users=scenario.users,
        workspaces=tally.workspaces,
        intervals=tally.intervals,
        fleet=gpus,
        running_workspaces=tally.workspace_seconds / length,
        running_pods=tally.pod_seconds / length,
        held_share=tally.held_gpu_seconds / capacity if capacity else math.nan,
        seconds=time.perf_counter() - started,
        write_s=tally.write_s,
        history_rows=history_rows,
        history_s=history_s,
    )


# --- measuring ---------------------------------------------------------------------------------------

T = TypeVar("T")


def timed(repeats: int, run: Callable[[], T]) -> tuple[float, int, T]:
    """(median seconds, queries of one run, the last result) over ``repeats`` runs. Every run must make
    as many queries as the first: a count that moved would mean a cache or a query per row."""
    seconds: list[float] = []
    counts: set[int] = set()
    result: T
    for _ in range(repeats):
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            result = run()
            seconds.append(time.perf_counter() - began)
        counts.add(len(queries.captured_queries))
    if len(counts) != 1:
        raise BenchError(f"the query count changed between runs: {sorted(counts)}")
    return statistics.median(seconds), counts.pop(), result


def export(built: report.Report, fmt: str) -> bytes:
    if fmt == "csv":
        return exports.to_csv(built)
    if fmt == "xlsx":
        return exports.to_xlsx(built)
    return exports.to_pdf(built, title=f"Chargeback, {built.start.astimezone(zone()):%B %Y}")


def measure_builds(scenario: Scenario, *, with_exports: bool = True) -> list[Build]:
    start, end = periods.month_bounds(scenario.month, zone())
    builds = []
    for label, group, mode, spread in BUILDS:
        options: dict[str, Any] = {"group": group, "mode": mode, "spread_unallocated": spread}
        seconds, queries, built = timed(scenario.repeats, partial(report.build, start, end, **options))
        gather_s, _, gathered = timed(scenario.repeats, partial(sums.gather, start, end, groups=[group]))
        assemble_s, _, _ = timed(scenario.repeats, partial(report.assemble, gathered, **options))
        figures = Build(label, group, mode, spread, len(built.lines), seconds, gather_s, assemble_s, queries)
        if with_exports:
            for fmt in FORMATS:
                export_s, _, data = timed(scenario.repeats, partial(export, built, fmt))
                figures.exports[fmt] = Export(export_s, len(data))
        builds.append(figures)
    return builds


def measure_requests(scenario: Scenario, finance: User) -> list[Request]:
    """The chargeback page and its downloads through the views, as finance (the test client: same process,
    same connection, same transaction)."""
    client = Client()
    client.force_login(finance)
    query = f"month={scenario.month:%Y-%m}&group=team&mode=showback"
    paths = [("chargeback page (HTML)", f"{reverse('chargeback')}?{query}")]
    paths += [(f"download {fmt}", f"{reverse('chargeback-export', args=[fmt])}?{query}") for fmt in FORMATS]
    figures = []
    for label, path in paths:
        seconds, queries, response = timed(scenario.repeats, partial(client.get, path))
        if response.status_code != 200:
            raise BenchError(f"{path} answered {response.status_code}, not 200")
        figures.append(Request(label, path, seconds, queries, len(response.content)))
    return figures


def _refuse_a_taken_month(month: date) -> None:
    if ClosedMonth.objects.filter(period=month).exists():
        raise BenchError(f"{month:%B %Y} is closed here; give --month another month, or a database of its own")
    if UsageInterval.objects.filter(period=month).exists() or CapacityInterval.objects.filter(period=month).exists():
        raise BenchError(
            f"{month:%B %Y} already has ledger rows here, which would count in the figures; give --month another "
            "month, or a database of its own"
        )
    if Department.objects.filter(slug__startswith=f"{PREFIX}-").exists():
        raise BenchError(f"rows of a kept run are here (slugs {PREFIX}-...); use a database of its own")


@contextmanager
def _rolled_back(keep: bool = False) -> Iterator[None]:
    with transaction.atomic():
        yield
        if not keep:
            transaction.set_rollback(True)


def run_benchmark(
    scenario: Scenario, *, keep: bool = False, progress: Callable[[str], None] = lambda _: None
) -> Report:
    """Generate, time, roll back (see the module docstring)."""
    if scenario.workspaces < 1 or scenario.concurrent < 1 or scenario.nodes < 1 or scenario.teams < 1:
        raise BenchError("needs at least one workspace, one running at a time, one node and one team")
    if scenario.history < 0:
        raise BenchError("--history is a number of months, 0 or more")
    if scenario.repeats < 1:
        raise BenchError("needs at least one repeat")
    began = time.perf_counter()
    if vacuum():
        progress(f"vacuumed the tables it writes in {time.perf_counter() - began:.1f} s")
    try:
        return _run(scenario, keep, progress)
    finally:
        began = time.perf_counter()
        if vacuum():
            progress(f"vacuumed the rolled-back rows away in {time.perf_counter() - began:.1f} s")


def _run(scenario: Scenario, keep: bool, progress: Callable[[str], None]) -> Report:
    compared_teams: int | None = None
    compared: dict[str, int] = {}
    with _rolled_back(keep):
        _refuse_a_taken_month(scenario.month)
        with _rolled_back(keep):
            progress(f"generating {scenario.workspaces} workspaces of {scenario.teams} teams")
            world, generated = populate(scenario, progress)
            progress(f"generated in {generated.seconds:.1f} s; timing")
            builds = measure_builds(scenario)
            requests = measure_requests(scenario, world.finance)
        # Counted after, on the same month emptied again: with --keep the month is taken, so not then.
        small = scenario.smaller()
        if not keep and small.teams < scenario.teams:
            progress(f"a smaller organisation ({small.teams} teams), to count its queries")
            with _rolled_back():
                world, _ = populate(small, lambda _: None)
                compared = {b.label: b.queries for b in measure_builds(small, with_exports=False)}
                compared |= {r.label: r.queries for r in measure_requests(small, world.finance)}
                compared_teams = small.teams
    return Report(
        scenario=scenario,
        database=connection.vendor,
        generated=generated,
        builds=builds,
        requests=requests,
        compared_teams=compared_teams,
        compared=compared,
    )
