"""Benchmark of a Prometheus scrape of ``/metrics`` on a busy portal (``manage.py bench_metrics``): how long
``portal.metrics.exposition.render`` takes, how many SQL queries it makes and how large the page is, when the
event-log counters are counted from scratch (the cache lost), when they are already counted, and after a
few new events.

The scenario, generated from a seed relative to one instant ``now`` (the start of the run), which every
scrape is rendered at:

* the chargeback benchmark's organisation (``chargeback.build_world``: ``teams // 5`` departments, ``teams``
  teams of five users, the demo catalogue under ``cb-`` slugs, its rate card) and fleet (``nodes`` nodes of
  8 GPUs split over the GPU models as ``chargeback.fleet`` does), recorded as the open capacity rows that
  the reconcile loop keeps for the current month;
* ``queued`` workspaces waiting now, of the chargeback benchmark's shapes: most queued once, about a fifth
  queued again after a preemption (jobs) or resumed after a stop (notebooks), so that their wait runs from
  an event and not from their creation; some have a waiting note (a same-state event);
* ``running`` workspaces running now, each with its open usage rows (one per pod, ``ended_at`` NULL,
  ``last_seen_at`` in the last half minute, cut at the month start) and one fresh raw ``ActivitySample``
  (``hourly=False``, ``gpu_active`` set but for a few unmeasured ones); about 10 % of them borrowing
  (batch and normal-priority jobs admitted beyond their team's guarantee);
* team quotas (``TeamQuota``) per team and GPU model: what the team's non-borrowing workspaces hold, with
  a little room to spare for a fifth of the pairs without borrowers, so that some queued requests are within
  quota; budgets (``Budget``) for about a third of the teams, money or GPU-hours, between a fifth and 1.3
  times what the month has charged them so far; ``LoopStat`` rows of the three loops over ``days``;
* finished workspaces over the last ``days`` days, as many as make the event log ``events`` rows long:
  requests, waiting notes, admissions, provisioning, running, stops, successes, failures, idle reclaims,
  preemptions and re-queues, resumes, each run piece with its closed usage rows (one per pod, cut at month
  boundaries) so that the budgets read a month of ledger.

Every event is older than ``METRICS_EVENT_SETTLE_SECONDS`` plus ten minutes, and the log is written in time
order (ids increase with ``at``), as a live portal writes it. Rows go in with PostgreSQL's COPY
(``chargeback.insert``), then ``ANALYZE``; PostgreSQL only, as ``bulk_create`` would stamp the log's times
now. What is timed, each the median of ``repeats`` runs with the queries of one run counted (``CaptureQueriesContext``):

* cold: ``render(now)`` with the event totals' cache key (``events.CACHE_KEY``) deleted first, so the whole
  log is counted again;
* warm: ``render(now)`` with the totals counted and nothing new;
* incremental: ``render(now)`` after ``added`` new events (short jobs requested, admitted, run and finished
  in the ten minutes before the settling margin) are written, untimed, after the previous scrape.

The page of each is parsed back (prometheus_client's parser) and its figures are compared with what the
scenario made: the queue, the requests within quota, the admissions and admission waits counted.

Everything runs in one transaction that is rolled back at the end (``keep=True`` commits it instead), and
the cache key is put back as it was; on PostgreSQL the tables written are vacuumed before and after. A
database that already holds workspaces or records a fleet (open capacity rows) is refused: they would count
in the figures.
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.models import Budget, CapacityInterval, UsageInterval
from portal.metrics import events
from portal.metrics.exposition import render
from portal.models import Department
from scheduling.benchmarks import chargeback
from scheduling.benchmarks.chargeback import BenchError
from scheduling.loops.passes import BUCKETS as PASS_BUCKETS
from scheduling.loops.passes import flush_api_errors
from scheduling.models import ActivitySample, LoopStat, TeamQuota
from workspaces.models import Workspace, WorkspaceEvent

PREFIX = "mx"  # names and pod uids of the workspaces it makes (the organisation is the chargeback's: cb-)
CHUNK = 50_000  # rows written at a time
TAIL_SECONDS = 600  # before the settling margin: the base log ends this long before it; new events go there
Kind = Workspace.Kind
State = Workspace.State
Priority = Workspace.Priority

# The steps of a workspace's life as the transitions write them: (from_state, to_state, reason, source).
STEPS: dict[str, tuple[str, str, str, str]] = {
    "request": (State.QUEUED, State.QUEUED, "Requested by its owner.", "portal"),  # a note, as actions write it
    "waiting": (State.QUEUED, State.QUEUED, "Waiting for free capacity.", "scheduler"),
    "admit": (State.QUEUED, State.ADMITTED, "Admitted.", "scheduler"),
    "provision": (State.ADMITTED, State.PROVISIONING, "Creating its pods.", "provisioner"),
    "run": (State.PROVISIONING, State.RUNNING, "Running.", "reconcile"),
    "stop": (State.RUNNING, State.STOPPING, "Stopped by its owner; the home volume is kept.", "portal"),
    "stopped": (State.STOPPING, State.STOPPED, "Stopped; the home volume is kept for resuming.", "provisioner"),
    "resume": (State.STOPPED, State.QUEUED, "Resumed by its owner.", "portal"),
    "succeed": (State.RUNNING, State.SUCCEEDED, "Finished.", "reconcile"),
    "fail": (State.RUNNING, State.FAILED, "Failed: the main container exited with code 1.", "reconcile"),
    "reclaim": (State.RUNNING, State.RECLAIMED, "Reclaimed: idle past its grace.", "scheduler"),
    "expire": (State.RUNNING, State.EXPIRED, "Reached its maximum runtime.", "reconcile"),
    "preempt": (
        State.RUNNING,
        State.PREEMPTED,
        "Preempted: the capacity it borrowed was needed for another team's guarantee.",
        "scheduler",
    ),
    "requeue": (
        State.PREEMPTED,
        State.QUEUED,
        "Queued again after preemption, with the same home volume; it starts when capacity allows.",
        "provisioner",
    ),
    "archived": (State.SUCCEEDED, State.SUCCEEDED, "Its logs were archived.", "reconcile"),
}
ENDINGS: dict[
    str, tuple[tuple[tuple[str, ...], int], ...]
] = {  # how a finished run piece ends: the steps, and their weights per kind
    Kind.NOTEBOOK: ((("stop", "stopped"), 75), (("reclaim",), 15), (("expire",), 5), (("fail",), 5)),
    Kind.JOB: ((("succeed",), 82), (("fail",), 12), (("expire",), 6)),
}
FINAL_STATE = {"stopped": State.STOPPED, "reclaim": State.RECLAIMED, "expire": State.EXPIRED, "fail": State.FAILED}
FINAL_STATE["succeed"] = State.SUCCEEDED
LOOPS = {"scheduling_cycle": (5.0, 0.4), "reconcile": (10.0, 0.25), "telemetry": (30.0, 0.8)}  # interval, median s
WORKSPACE_COLUMNS = (*chargeback.WORKSPACE_COLUMNS, "borrowing", "node_name")
EVENT_COLUMNS = ("workspace_id", "at", "from_state", "to_state", "reason", "source")
SAMPLE_COLUMNS = (
    "workspace_id", "at", "seconds", "gpu_seconds", "idle_gpu_seconds", "hourly", "source", "gpu_active",
    "gpu_observed_at", "fb_used_mib", "fb_total_mib", "kernels", "busy_kernels", "connections", "last_activity",
)  # fmt: skip
OWN_TABLES = (WorkspaceEvent, ActivitySample, TeamQuota, Budget, LoopStat)  # beyond the chargeback's


@dataclass(frozen=True)
class Scenario:
    nodes: int = 1_000
    teams: int = 200
    queued: int = 14_000
    running: int = 5_000
    events: int = 1_000_000  # the event log, over ``days``
    days: int = 30
    added: int = 1_000  # new events before each incremental scrape
    seed: int = 1
    repeats: int = 5

    def organisation(self, month: date) -> chargeback.Scenario:
        """The chargeback benchmark's scenario the organisation and the fleet are made from."""
        return chargeback.Scenario(nodes=self.nodes, teams=self.teams, seed=self.seed, month=month)


# --- the figures -------------------------------------------------------------------------------------


@dataclass
class Generated:
    departments: int
    teams: int
    users: int
    fleet: dict[str, int]  # GPUs per model
    queued: int
    requeued: int  # of them, queued again after a preemption or a stop: their wait runs from that event
    within_quota: int  # of them, what the team's guarantee covers on top of what it holds (the gauge's rule)
    running: int
    borrowing: int
    pods: int  # open usage rows
    samples: int
    finished: int  # workspaces whose whole life lies in the window
    workspaces: int
    events: int
    admissions: int  # admission events in the log
    usage_rows: int  # closed and open
    quotas: int
    budgets: int
    loops: int
    seconds: float
    write_s: float  # of it, writing rows


@dataclass
class Page:
    """What a rendered page says, summed over its labels."""

    size: int  # bytes
    series: int  # samples
    queue_requests: float
    within_quota_requests: float
    admitted: float  # gpu_portal_workspace_transitions_total{state="admitted"}
    admission_waits: float  # gpu_portal_admission_wait_seconds_count
    capacity: float
    allocated: float
    borrowed: float
    budgets: int  # teams with a budget ratio


@dataclass
class Scrape:
    label: str
    seconds: float  # median
    queries: int  # of one scrape
    page: Page
    runs: list[float] = field(default_factory=list)


@dataclass
class Report:
    scenario: Scenario
    database: str
    now: str
    generated: Generated
    scrapes: list[Scrape]
    added_events: int  # written before the incremental scrapes, in all
    added_admissions: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scrape(self, label: str) -> Scrape:
        return next(s for s in self.scrapes if s.label == label)


# --- the state now -----------------------------------------------------------------------------------


@dataclass
class _Made:
    """Rows generated, before they are written: events and usage rows name their workspace by index."""

    workspaces: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[float, int, str]] = field(default_factory=list)  # (seconds after the window opens, ws, step)
    usage: list[list[Any]] = field(default_factory=list)
    samples: list[list[Any]] = field(default_factory=list)
    queued: list[tuple[int, str, Decimal]] = field(default_factory=list)  # team id, gpu model, GPU-equivalents
    held: defaultdict[tuple[int, str], Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    borrowed: set[tuple[int, str]] = field(default_factory=set)
    spend: defaultdict[int, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    requeued: int = 0
    borrowing: int = 0
    running: int = 0
    finished: int = 0
    pods: int = 0


class _Generator:
    """The scenario's rows, from one random stream; times in seconds after the window opens (``start``)."""

    def __init__(self, scenario: Scenario, world: chargeback.World, now: datetime, rng: random.Random) -> None:
        self.scenario, self.world, self.now, self.rng = scenario, world, now, rng
        self.window = scenario.days * 86400
        self.start = now - timedelta(seconds=self.window)
        self.end = self.window - settings.METRICS_EVENT_SETTLE_SECONDS - TAIL_SECONDS  # the base log's last instant
        if self.end <= 3600:
            raise BenchError("--days leaves no room for the event log")
        self.month = periods.month_of(now, zone())
        self.boundaries = periods.month_starts_between(self.start, now, zone())
        self.offered = chargeback._offered(world)
        self.cum_shapes = list(chargeback._cumulative([o.shape.weight for o in self.offered]))
        self.cum_teams = list(chargeback._cumulative(world.team_weights))
        self.teams = [(t.pk, t.department.pk, t.department.cost_centre, world.members[t.pk]) for t in world.teams]
        self.made = _Made()

    # a workspace's parts

    def _draw(self) -> tuple[chargeback._Offered, tuple[int, int, str, list[int]], int, int, str]:
        rng = self.rng
        o = self.offered[bisect.bisect(self.cum_shapes, rng.random() * self.cum_shapes[-1])]
        team = self.teams[bisect.bisect(self.cum_teams, rng.random() * self.cum_teams[-1])]
        count = rng.choice(o.shape.counts)
        workers = rng.choice(o.shape.workers(count))
        if o.shape.kind == Kind.NOTEBOOK:
            priority = Priority.INTERACTIVE
        else:
            priority = rng.choices((Priority.HIGH, Priority.NORMAL, Priority.BATCH), weights=(10, 60, 30))[0]
        return o, team, count, workers, priority

    def _wait(self) -> float:
        """Seconds from entering the queue to admission: seconds to a day, most a few minutes."""
        return min(86400.0, max(1.0, self.rng.lognormvariate(math.log(90), 1.7)))

    def _run_length(self, kind: str) -> float:
        median = 2.5 * 3600 if kind == Kind.NOTEBOOK else 4 * 3600
        return min(3 * 86400.0, max(300.0, self.rng.lognormvariate(math.log(median), 1.1)))

    def _piece(self, ws: int, at: float, wait: float) -> tuple[float, float]:
        """Queue entry at ``at`` (its event, if any, already made) to running: (admitted at, running at)."""
        rng = self.rng
        if rng.random() < 0.5:
            self._event(at + wait * rng.random(), ws, "waiting")
        admitted = at + wait
        self._event(admitted, ws, "admit")
        self._event(admitted + rng.uniform(0.2, 2.0), ws, "provision")
        running = admitted + rng.uniform(5.0, 90.0)
        self._event(running, ws, "run")
        return admitted, running

    def _event(self, at: float, ws: int, step: str) -> None:
        self.made.events.append((at, ws, step))

    def _when(self, at: float) -> datetime:
        return self.start + timedelta(seconds=at)

    def _usage(self, ws: int, piece: int, o: chargeback._Offered, team: tuple[int, int, str, list[int]],
               owner: int, count: int, workers: int, a: datetime, b: datetime | None) -> None:  # fmt: skip
        """The pods' usage rows of one run piece from ``a`` to ``b`` (None: still running), cut at months."""
        per_pod, rate, eq = o.per_pod[count]
        seen = b if b is not None else self.now - timedelta(seconds=self.rng.uniform(1.0, 30.0))
        cuts = periods.cut(a, seen, self.boundaries)
        job = o.shape.kind == Kind.JOB
        for worker in range(workers):
            pod = f"{PREFIX}-{ws}-{piece}-{worker}"
            coverage, idle, activity = chargeback._usage_telemetry(job, self.rng)  # as many draws whatever the date
            for i, (x, y) in enumerate(cuts):
                last = i == len(cuts) - 1
                seconds = (y - x).total_seconds()
                measured = eq * seconds * coverage
                period = periods.month_of(x, zone())
                self.made.usage.append(
                    [ws, pod, pod, owner, team[0], team[1], team[2], o.offering_id, o.kind, o.gpu_model, o.shape_key,
                     count, per_pod, rate, x, y, None if (last and b is None) else y, period, measured,
                     measured * (1 - idle) * activity, measured * idle]
                )  # fmt: skip
                if period == self.month:
                    spent = self.made.spend[team[0]]
                    spent[0] += seconds * float(rate) / 3600
                    spent[1] += seconds * eq / 3600
                if last and b is None:
                    self.made.pods += 1

    def _workspace(self, ws: int, o: chargeback._Offered, team: tuple[int, int, str, list[int]], owner: int,
                   count: int, workers: int, priority: str, state: str, created: float, admitted: float | None,
                   started: float | None, finished: float | None, borrowing: bool = False) -> None:  # fmt: skip
        job = o.shape.kind == Kind.JOB
        when = [None if t is None else self._when(t) for t in (admitted, started, finished)]
        node = f"gpu-node-{self.rng.randrange(self.scenario.nodes):04d}" if state == State.RUNNING else ""
        self.made.workspaces.append(
            (f"{PREFIX}-{ws}", o.shape.kind, team[0], owner, o.offering_id, count, workers,
             chargeback.JOB_IMAGE if job else chargeback.NOTEBOOK_IMAGE, ["python", "train.py"] if job else [],
             o.cpu_millis, o.memory_mib, 24 * 3600 if job else 12 * 3600, o.per_pod[count][0] * workers, priority,
             state, STEPS[self.made.events[-1][2]][2], self._when(created), *when,
             borrowing, node)
        )  # fmt: skip

    # the three kinds of workspace

    def queued(self, ws: int) -> None:
        rng = self.rng
        o, team, count, workers, priority = self._draw()
        owner = rng.choice(team[3])
        waited = min(self.end * 0.9, max(self.window - self.end + 1.0, rng.lognormvariate(math.log(1200), 1.5)))
        entered = self.window - waited
        created = entered
        if rng.random() < 0.2:  # been here before: preempted (a job that may borrow) or stopped (a notebook)
            run = min(self._run_length(o.shape.kind), entered / 4)
            wait = min(self._wait(), entered / 4)
            created = entered - run - wait - 120.0
            if created > 0 and (o.shape.kind == Kind.NOTEBOOK or priority != Priority.HIGH):
                self._event(created, ws, "request")
                _, running = self._piece(ws, created, wait)
                if o.shape.kind == Kind.NOTEBOOK:
                    self._event(running + run, ws, "stop")
                    self._event(running + run + rng.uniform(2.0, 10.0), ws, "stopped")
                    self._event(entered, ws, "resume")
                else:
                    self._event(running + run, ws, "preempt")
                    self._event(entered, ws, "requeue")
                self._usage(ws, 0, o, team, owner, count, workers, self._when(running), self._when(running + run))
                self.made.requeued += 1
            else:
                created = entered
        if created == entered:
            self._event(created, ws, "request")
        if rng.random() < 0.6:
            self._event(min(self.end, entered + min(waited, 600.0) * rng.random()), ws, "waiting")
        self._workspace(ws, o, team, owner, count, workers, priority, State.QUEUED, created, None, None, None)
        self.made.queued.append((team[0], o.gpu_model, o.per_pod[count][0] * workers))

    def running(self, ws: int) -> None:
        rng = self.rng
        o, team, count, workers, priority = self._draw()
        target = round(self.scenario.running * 0.1)  # borrowing: about 10 %, batch and normal jobs
        borrowing = o.shape.kind == Kind.JOB and self.made.borrowing < target and rng.random() < 0.6
        if borrowing:
            priority = rng.choice((Priority.NORMAL, Priority.BATCH))
        owner = rng.choice(team[3])
        age = self._run_length(o.shape.kind) * rng.random()  # into its run now
        running_at = min(self.end - 100.0, self.window - age)
        wait = min(self._wait(), running_at / 2)
        created = max(0.0, running_at - wait - rng.uniform(5.0, 90.0))
        self._event(created, ws, "request")
        admitted, running_at = self._piece(ws, created, wait)
        self._usage(ws, 0, o, team, owner, count, workers, self._when(running_at), None)
        self._workspace(
            ws, o, team, owner, count, workers, priority, State.RUNNING, created, admitted, running_at, None, borrowing
        )
        amount = o.per_pod[count][0] * workers
        self.made.held[(team[0], o.gpu_model)] += amount
        if borrowing:
            self.made.borrowed.add((team[0], o.gpu_model))
            self.made.borrowing += 1
        self.made.running += 1
        self._sample(ws, o, count, workers)

    def _sample(self, ws: int, o: chargeback._Offered, count: int, workers: int) -> None:
        rng = self.rng
        interval = int(settings.TELEMETRY_INTERVAL_SECONDS)
        at = self.now - timedelta(seconds=rng.uniform(1.0, interval))
        notebook = o.shape.kind == Kind.NOTEBOOK
        measured = rng.random() >= 0.03
        active = (0.6 * rng.random() ** 2 if notebook else 0.5 + 0.5 * rng.random()) if measured else None
        total = 81920.0 * min(1.0, float(o.per_pod[count][0]))
        gpu = (
            [interval * workers, interval * workers if active is not None and active < 0.05 else 0, False,
             ActivitySample.Source.PROMETHEUS, active, at, total * rng.uniform(0.1, 0.9), total]
            if measured
            else [0, 0, False, ActivitySample.Source.NONE, None, None, None, None]
        )  # fmt: skip
        jupyter = (
            [rng.randint(1, 3), rng.randint(0, 1), rng.randint(0, 2), at - timedelta(seconds=rng.uniform(0, 3600))]
            if notebook
            else [None, None, None, None]
        )
        self.made.samples.append([ws, at, interval, *gpu, *jupyter])

    def finished(self, ws: int) -> None:
        rng = self.rng
        o, team, count, workers, priority = self._draw()
        owner = rng.choice(team[3])
        kind = o.shape.kind
        pieces = rng.choices((1, 2, 3), weights=(70, 20, 10))[0] if kind == Kind.NOTEBOOK else 1
        preempted = kind == Kind.JOB and priority != Priority.HIGH and rng.random() < 0.12
        pieces += int(preempted)
        runs = [self._run_length(kind) for _ in range(pieces)]
        waits = [self._wait() for _ in range(pieces)]
        gaps = [rng.uniform(1800, 16 * 3600) if kind == Kind.NOTEBOOK else rng.uniform(10, 60) for _ in runs[1:]]
        span = sum(runs) + sum(waits) + sum(gaps) + 100.0 * pieces
        if span > self.end * 0.9:  # squeezed into the window
            scale = self.end * 0.9 / span
            runs, waits, gaps = [r * scale for r in runs], [w * scale for w in waits], [g * scale for g in gaps]
            span = self.end * 0.9
        created = at = rng.uniform(0, self.end - span)
        self._event(at, ws, "request")
        admitted = running = finished = at
        for piece in range(pieces):
            admitted, running = self._piece(ws, at, waits[piece])
            finished = running + runs[piece]
            self._usage(ws, piece, o, team, owner, count, workers, self._when(running), self._when(finished))
            if piece == pieces - 1:
                steps = rng.choices([e for e, _ in ENDINGS[kind]], weights=[w for _, w in ENDINGS[kind]])[0]
            elif kind == Kind.JOB:
                steps = ("preempt",)
            else:
                steps = ("stop", "stopped")
            for i, step in enumerate(steps):
                self._event(finished + 5.0 * i, ws, step)
            if piece < pieces - 1:
                at = finished + gaps[piece]
                self._event(at, ws, "requeue" if kind == Kind.JOB else "resume")
        state = FINAL_STATE[steps[-1]]
        self._workspace(ws, o, team, owner, count, workers, priority, state, created, admitted, running, finished)
        self.made.finished += 1


def _lifetimes(scenario: Scenario, gen: _Generator, progress: Callable[[str], None]) -> None:
    ws = 0
    for _ in range(scenario.running):
        gen.running(ws)
        ws += 1
    for _ in range(scenario.queued):
        gen.queued(ws)
        ws += 1
    while len(gen.made.events) < scenario.events:
        gen.finished(ws)
        ws += 1
        if ws % 50_000 == 0:
            progress(f"  {ws} workspaces, {len(gen.made.events)} events generated")
    del gen.made.events[scenario.events :]  # the last life may be cut short: its final events are dropped
    # (its workspace keeps a final state; the log is what the scrape counts)


def quotas(made: _Made, rng: random.Random) -> list[TeamQuota]:
    """Per team and GPU model: what its non-borrowing workspaces hold, with room for a little more for a fifth
    of the pairs that have no borrower (pairs with only queued requests get only that room)."""
    pairs = set(made.held) | {(team, model) for team, model, _ in made.queued}
    rows = []
    for team, model in sorted(pairs):
        held = made.held.get((team, model), Decimal(0))
        spare = (
            Decimal(rng.choice(("0.5", "1", "2"))) if (team, model) not in made.borrowed and rng.random() < 0.2 else 0
        )
        if (team, model) in made.borrowed:
            held = (held * Decimal("0.6")).quantize(Decimal("0.0001"))  # the borrowers hold the rest
        guaranteed = held + spare
        if guaranteed:
            rows.append(
                TeamQuota(
                    team_id=team,
                    flavour=model,
                    guaranteed=guaranteed,
                    borrow_limit=(guaranteed / 2).quantize(Decimal("0.0001")),
                )
            )
    return rows


def within_quota(made: _Made, quota_rows: Sequence[TeamQuota]) -> int:
    """The queued requests the team's guarantee covers on top of everything the team holds (the gauge's
    rule, counted here from what was made)."""
    guaranteed = {(q.team_id, q.flavour): Decimal(q.guaranteed) for q in quota_rows}
    return sum(
        1
        for team, model, amount in made.queued
        if model and amount <= guaranteed.get((team, model), Decimal(0)) - made.held.get((team, model), Decimal(0))
    )


def budgets(made: _Made, teams: Sequence[int], rng: random.Random) -> list[Budget]:
    rows = []
    for team in teams:
        if rng.random() >= 0.35:
            continue
        money, gpu_hours = made.spend.get(team, [0.0, 0.0])
        hours = rng.random() < 0.2
        spent = gpu_hours if hours else money
        amount = spent / rng.uniform(0.2, 1.3) if spent > 1 else rng.uniform(1000, 5000)
        rows.append(
            Budget(
                team_id=team,
                amount=Decimal(f"{max(amount, 1.0):.2f}"),
                unit=Budget.Unit.GPU_HOURS if hours else Budget.Unit.MONEY,
                policy=rng.choice(list(Budget.Policy)),
            )
        )
    return rows


def loop_stats(scenario: Scenario, now: datetime, rng: random.Random) -> list[LoopStat]:
    rows = []
    for loop, (interval, median) in LOOPS.items():
        passes = int(scenario.days * 86400 / interval)
        sample = sorted(rng.lognormvariate(math.log(median), 0.7) for _ in range(2000))
        scale = passes / len(sample)
        buckets = [round(bisect.bisect_right(sample, bound) * scale) for bound in PASS_BUCKETS]
        rows.append(
            LoopStat(
                loop=loop,
                passes=passes,
                failures=passes // 5000,
                seconds_total=sum(sample) * scale,
                buckets=buckets,
                last_finished_at=now - timedelta(seconds=rng.uniform(0, interval)),
            )
        )
    return rows


def _fleet(world: chargeback.World, gpus: dict[str, int], now: datetime) -> None:
    """The fleet as the reconcile loop records it: one open capacity row per model since the month began."""
    month = periods.month_of(now, zone())
    start = periods.month_start(month, zone())
    CapacityInterval.objects.bulk_create(
        CapacityInterval(
            gpu_model=model,
            gpus=n,
            rate=world.card.model_price(model, start) or Decimal(0),
            started_at=start,
            last_seen_at=now - timedelta(seconds=5),
            period=month,
        )
        for model, n in sorted(gpus.items())
    )


def _write_events(gen: _Generator, rows: list[tuple[float, int, str]], ids: Sequence[int]) -> None:
    rows.sort()  # in time order, as the log is written: ids follow ``at``
    for first in range(0, len(rows), CHUNK):
        chunk = []
        for at, ws, step in rows[first : first + CHUNK]:
            from_state, to_state, reason, source = STEPS[step]
            chunk.append((ids[ws], gen._when(at), from_state, to_state, reason, source))
        chargeback.insert(WorkspaceEvent, EVENT_COLUMNS, chunk)


def _write(gen: _Generator, progress: Callable[[str], None]) -> list[int]:
    made = gen.made
    ids: list[int] = []
    for first in range(0, len(made.workspaces), CHUNK):
        ids += chargeback.insert(Workspace, WORKSPACE_COLUMNS, made.workspaces[first : first + CHUNK], ids=True)
    progress(f"  {len(ids)} workspaces written")
    for rows in (made.usage, made.samples):
        for row in rows:
            row[0] = ids[row[0]]
    for first in range(0, len(made.usage), CHUNK):
        chargeback.insert(UsageInterval, chargeback.USAGE_COLUMNS, made.usage[first : first + CHUNK])
    chargeback.insert(ActivitySample, SAMPLE_COLUMNS, made.samples)
    progress(f"  {len(made.usage)} usage rows, {len(made.samples)} activity samples written")
    _write_events(gen, made.events, ids)
    progress(f"  {len(made.events)} events written")
    return ids


def analyze() -> None:
    """Planner statistics for the tables just filled: the chargeback's, and the log's, samples' and quotas'."""
    chargeback.analyze()
    if connection.vendor == "postgresql":
        tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in OWN_TABLES)
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")


def vacuum() -> bool:
    """The chargeback benchmark's tables and the ones this one writes too (see ``chargeback.vacuum``)."""
    if not chargeback.vacuum():
        return False
    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in OWN_TABLES)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {tables}")
    return True


def populate(scenario: Scenario, now: datetime, progress: Callable[[str], None]) -> tuple[_Generator, Generated]:
    started = time.perf_counter()
    rng = random.Random(scenario.seed)
    world = chargeback.build_world(scenario.organisation(periods.month_of(now, zone())), rng)
    gpus = chargeback.fleet(world, chargeback._shapes(world), scenario.nodes)
    _fleet(world, gpus, now)
    gen = _Generator(scenario, world, now, rng)
    _lifetimes(scenario, gen, progress)
    made = gen.made
    progress(f"  {len(made.workspaces)} workspaces, {len(made.events)} events generated; writing")
    began_writing = time.perf_counter()
    _write(gen, progress)
    quota_rows = TeamQuota.objects.bulk_create(quotas(made, rng))
    budget_rows = Budget.objects.bulk_create(budgets(made, [t.pk for t in world.teams], rng))
    LoopStat.objects.bulk_create(loop_stats(scenario, now, rng), ignore_conflicts=True)  # a live portal's stay
    write_s = time.perf_counter() - began_writing
    analyze()
    organisation = scenario.organisation(gen.month)
    return gen, Generated(
        departments=organisation.departments,
        teams=organisation.teams,
        users=organisation.users,
        fleet=gpus,
        queued=len(made.queued),
        requeued=made.requeued,
        within_quota=within_quota(made, quota_rows),
        running=made.running,
        borrowing=made.borrowing,
        pods=made.pods,
        samples=len(made.samples),
        finished=made.finished,
        workspaces=len(made.workspaces),
        events=len(made.events),
        admissions=sum(1 for _, _, step in made.events if step == "admit"),
        usage_rows=len(made.usage),
        quotas=len(quota_rows),
        budgets=len(budget_rows),
        loops=len(LOOPS),
        seconds=time.perf_counter() - started,
        write_s=write_s,
    )


def add_events(gen: _Generator, count: int, first: float, last: float) -> tuple[int, int]:
    """About ``count`` new events between ``first`` and ``last`` (seconds after the window opens): short jobs
    requested, admitted, provisioned, run and finished (five events each; one job at least), and notes on
    them for the rest. Answers (events, admissions) written."""
    rng = gen.rng
    lives = max(1, count // 5)
    workspaces: list[tuple[Any, ...]] = []
    made: list[tuple[float, int, str]] = []
    for i in range(lives):
        o, team, n, workers, _ = gen._draw()
        times = sorted(rng.uniform(first, last) for _ in range(5))
        steps = ("request", "admit", "provision", "run", "succeed")
        made += [(at, i, step) for at, step in zip(times, steps, strict=True)]
        workspaces.append(
            (f"{PREFIX}-new-{int(first)}-{i}", Kind.JOB, team[0], rng.choice(team[3]), o.offering_id, n, workers,
             chargeback.JOB_IMAGE, ["python", "train.py"], o.cpu_millis, o.memory_mib, 3600, o.per_pod[n][0] * workers,
             Priority.NORMAL, State.SUCCEEDED, STEPS["succeed"][2], gen._when(times[0]), gen._when(times[1]),
             gen._when(times[3]), gen._when(times[4]), False, "")
        )  # fmt: skip
    made += [(rng.uniform(first, last), rng.randrange(lives), "archived") for _ in range(count - 5 * lives)]
    ids = chargeback.insert(Workspace, WORKSPACE_COLUMNS, workspaces, ids=True)
    _write_events(gen, made, ids)
    return len(made), lives


# --- measuring ---------------------------------------------------------------------------------------


def read_page(page: bytes) -> Page:
    sums: defaultdict[str, float] = defaultdict(float)
    series = admitted = budgets_seen = 0
    for family in text_string_to_metric_families(page.decode()):
        for sample in family.samples:
            series += 1
            sums[sample.name] += sample.value
            if sample.name == "gpu_portal_workspace_transitions_total" and sample.labels.get("state") == "admitted":
                admitted += int(sample.value)
            if sample.name == "gpu_portal_budget_used_ratio":
                budgets_seen += 1
    return Page(
        size=len(page),
        series=series,
        queue_requests=sums["gpu_portal_queue_requests"],
        within_quota_requests=sums["gpu_portal_queue_within_quota_requests"],
        admitted=admitted,
        admission_waits=sums["gpu_portal_admission_wait_seconds_count"],
        capacity=sums["gpu_portal_gpus_capacity"],
        allocated=sums["gpu_portal_gpus_allocated"],
        borrowed=sums["gpu_portal_borrowed_gpu_equivalents"],
        budgets=budgets_seen,
    )


def scrapes(repeats: int, now: datetime, before: Callable[[], object]) -> tuple[list[float], int, bytes]:
    """``render(now)`` ``repeats`` times, each after ``before()`` (untimed): the seconds of each, the queries of
    one (every scrape must make as many as the first) and the last page."""
    runs: list[float] = []
    counts: set[int] = set()
    page = b""
    for _ in range(repeats):
        before()
        flush_api_errors()  # this process's failed Kubernetes calls, else the first scrape writes them
        with CaptureQueriesContext(connection) as captured:
            began = time.perf_counter()
            page = render(now)
            runs.append(time.perf_counter() - began)
        counts.add(len(captured.captured_queries))
    if len(counts) != 1:
        raise BenchError(f"the query count changed between scrapes: {sorted(counts)}")
    return runs, counts.pop(), page


def measure(scenario: Scenario, gen: _Generator, now: datetime) -> tuple[list[Scrape], int, int]:
    """The three scrapes (see the module docstring), and the events and admissions added for the last."""
    found = []
    # New events go, one batch per scrape, into the tail the base log left before the settling margin.
    tail_start, slot = gen.end + 1.0, (TAIL_SECONDS - 2.0) / scenario.repeats
    added: list[tuple[int, int]] = []

    def add() -> None:
        first = tail_start + len(added) * slot
        added.append(add_events(gen, scenario.added, first, first + slot - 0.5))

    for label, before in (
        ("cold (whole log counted)", partial(cache.delete, events.CACHE_KEY)),
        ("warm (nothing new)", lambda: None),
        (f"after {scenario.added} new events", add),
    ):
        runs, queries, page = scrapes(scenario.repeats, now, before)
        found.append(Scrape(label, statistics.median(runs), queries, read_page(page), runs))
    return found, sum(n for n, _ in added), sum(a for _, a in added)


def _refuse_a_used_database() -> None:
    if Workspace.objects.filter(name__startswith=f"{PREFIX}-").exists():
        raise BenchError(f"rows of a kept run are here (workspaces {PREFIX}-...); use a database of its own")
    if found := Workspace.objects.count():
        raise BenchError(
            f"this database already holds {found} workspaces, which would count in the figures; use a database "
            "of its own"
        )
    if models := sorted(CapacityInterval.objects.filter(ended_at=None).values_list("gpu_model", flat=True)):
        raise BenchError(
            f"this database already records a fleet ({', '.join(models)}), which would count in the figures; use a "
            "database of its own"
        )
    if Department.objects.filter(slug__startswith=f"{chargeback.PREFIX}-").exists():
        raise BenchError(f"rows of a kept run are here (slugs {chargeback.PREFIX}-...); use a database of its own")


def run_benchmark(
    scenario: Scenario, *, keep: bool = False, progress: Callable[[str], None] = lambda _: None
) -> Report:
    """Generate, time, roll back (see the module docstring)."""
    if connection.vendor != "postgresql":
        raise BenchError("needs PostgreSQL: the log's times go in with COPY (bulk_create would stamp them now)")
    if min(scenario.nodes, scenario.teams, scenario.queued, scenario.running) < 1:
        raise BenchError("needs at least one node, one team, one queued and one running workspace")
    if scenario.events < 1 or scenario.added < 1 or scenario.days < 1:
        raise BenchError("needs at least one event in the log, one added and one day")
    if scenario.repeats < 1:
        raise BenchError("needs at least one repeat")
    began = time.perf_counter()
    if vacuum():
        progress(f"vacuumed the tables it writes in {time.perf_counter() - began:.1f} s")
    saved = cache.get(events.CACHE_KEY)
    try:
        return _run(scenario, keep, progress)
    finally:
        if not keep:  # the totals counted rolled-back events, past a watermark the log never reached
            if saved is None:
                cache.delete(events.CACHE_KEY)
            else:
                cache.set(events.CACHE_KEY, saved, timeout=None)
        began = time.perf_counter()
        if vacuum():
            progress(f"vacuumed the rolled-back rows away in {time.perf_counter() - began:.1f} s")


def _run(scenario: Scenario, keep: bool, progress: Callable[[str], None]) -> Report:
    now = timezone.now()
    with chargeback._rolled_back(keep):
        _refuse_a_used_database()
        progress(
            f"generating {scenario.queued} queued and {scenario.running} running workspaces and an event log of "
            f"{scenario.events} rows over {scenario.days} days"
        )
        gen, generated = populate(scenario, now, progress)
        progress(f"generated in {generated.seconds:.1f} s; timing")
        found, added, admissions = measure(scenario, gen, now)
    return Report(
        scenario=scenario,
        database=connection.vendor,
        now=now.isoformat(),
        generated=generated,
        scrapes=found,
        added_events=added,
        added_admissions=admissions,
    )
