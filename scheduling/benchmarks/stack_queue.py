"""Queue benchmark, full-stack mode (``shared/benchmarks/QUEUE.md``): Kueue's baseline scenario in real time
through Django, PostgreSQL, Redis, a real Celery worker with beat and the simulated cluster.

``manage.py bench_queue_stack`` runs it; ``python -m scheduling.benchmarks.queue`` is the engine-alone mode
on the same scenario file. How the scenario maps onto the portal:

- a cohort is a department, a queue a team with a ``TeamQuota`` of the one GPU flavour (whole H100s):
  ``guaranteed`` = nominal quota, ``borrow_limit`` = borrowing limit; one user is a member of every team;
- one unit is one whole GPU; every workload is a training job (``kind=job``), its GPUs split into workers
  of the largest power of two that divides it and fits a node (1 -> 1 x 1, 5 -> 5 x 1, 20 -> 5 x 4), so
  that any mix packs onto 8-GPU nodes without fragments; the cluster has as many nodes as the total
  nominal quota needs (Kueue's scenario has no nodes, only quota: 600 units -> 75 x 8 H100);
- scenario priorities map in order onto the portal's job priority classes (50 -> batch, 100 -> normal,
  200 -> high); the portal's own policy is Kueue's ``reclaimWithinCohort: Any`` and
  ``withinClusterQueue: LowerPriority``; the preemption notice is 0 s as Kueue's (settable);
- a job runs for its class's runtime once its pods start: the simulated cluster's clock runs ``speed``
  times real time and each job carries its runtime in whole simulated seconds (``SIM_DURATION_ENV``),
  so 200 ms / 500 ms / 1 s are 2 / 5 / 10 simulated seconds at speed 10; pods start as soon as they are
  bound (no image pull), so the runtime starts when the cluster places the pods.

Each stream creates its workspaces in real time, one interval apart, through ``workspaces.actions`` as the
API does; the portal's scheduling cycle (beat, and on every request and release) admits them. Figures, as
the engine mode defines them but on the database's timestamps:

- wall time: from the start of the streams to the last ``finished_at``;
- a queue's usage of its nominal quota: GPUs held while active (admitted to finished or preempted, from the
  workspaces' events, preempted runs included) over nominal x wall time;
- time to admission: ``created_at`` -> ``admitted_at`` (the last admission, the one that ran to the end).

``scale`` multiplies every stream's count (at least one each), keeping the intervals: 0.1 is a tenth of
the workloads at the same arrival rate, over a tenth of the time.
"""

from __future__ import annotations

import math
import os
import queue as queues
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from statistics import fmean
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from portal.models import Department, Membership, Team, User
from portal.queue import control_queue, scheduler_queue
from scheduling.benchmarks import stack as benchstack
from scheduling.benchmarks.profile import MACHINE, CpuMeter, Profile, task_times
from scheduling.benchmarks.queue import KUEUE, KUEUE_ADMISSIONS_PER_S, figures, rows
from scheduling.benchmarks.queue_sim import (
    DEFAULT_SCENARIO,
    Arrival,
    Expanded,
    Scenario,
    SimResult,
    expand,
    load_scenario,
)
from scheduling.demand import SIM_DURATION_ENV
from scheduling.engine.admission import DEFAULT_POLICY
from scheduling.engine.quota import UNIT, Kind
from scheduling.kube.client import reset_client
from scheduling.loops import tasknames
from scheduling.loops.locks import single_flight
from scheduling.models import TeamQuota
from scheduling.simcluster.controllers import Timings
from workspaces import actions
from workspaces.models import GpuOffering, Image, Workspace, WorkspaceEvent

PREFIX = "qb-"  # departments and teams of the benchmark; removed before and after a run
USER = "qbench"
OFFERING = "qbench-h100"
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
JOB_PRIORITIES = (Workspace.Priority.BATCH, Workspace.Priority.NORMAL, Workspace.Priority.HIGH)
MAX_WORKERS = 16  # the Workspace.workers validator
CPU_MILLIS_PER_GPU = 2000
MEMORY_MIB_PER_GPU = 8192
OTHERS = "other processes (work sharing this machine)"


@dataclass(frozen=True)
class StackConfig:
    scenario: Path = DEFAULT_SCENARIO
    scale: float = 1.0
    speed: float | None = None  # simulated cluster's clock; None: the slowest that makes runtimes whole seconds
    gpus_per_node: int = 8
    concurrency: int = 4  # worker pool processes, as docker/compose.yaml and deploy/base/worker.yaml run it
    creators: int = 4  # threads that create workspaces, so creation keeps up with the streams
    notice_s: float = 0.0  # PREEMPTION_NOTICE_SECONDS (Kueue preempts at once)
    cycle_interval_s: float = 0.5  # beat's scheduling cycle (the portal's minimum)
    # Beat's reconcile pass. The portal's default is 5 s; here finished Jobs pile up between passes at 5 s and the
    # full scenario ran slower (README), so the benchmark keeps 0.5 s.
    reconcile_interval_s: float = 0.5
    timeout_s: float = 3600.0
    keep: bool = False  # leave the benchmark's rows in the database afterwards


# -- the mapping -----------------------------------------------------------------------------------


def scale_scenario(scenario: Scenario, factor: float) -> Scenario:
    """Every workload set's count times ``factor`` (rounded, at least 1); intervals unchanged."""
    if factor <= 0:
        raise ValueError("scale must be positive")
    return Scenario(
        tuple(
            replace(
                cs,
                queue_sets=tuple(
                    replace(
                        qs,
                        workload_sets=tuple(
                            replace(ws, count=max(1, round(ws.count * factor))) for ws in qs.workload_sets
                        ),
                    )
                    for qs in cs.queue_sets
                ),
            )
            for cs in scenario.cohorts
        )
    )


def priority_map(priorities: Sequence[int]) -> dict[int, str]:
    """Scenario priorities onto the portal's job priority classes, lowest first, order preserved."""
    distinct = sorted(set(priorities))
    if len(distinct) > len(JOB_PRIORITIES):
        raise ValueError(f"at most {len(JOB_PRIORITIES)} distinct priorities map onto the portal's job classes")
    return {p: str(JOB_PRIORITIES[i]) for i, p in enumerate(distinct)}


def job_shape(units: int, gpus_per_node: int) -> tuple[int, int]:
    """(GPUs per worker, workers) for a request of ``units``: the largest power of two that divides it and
    fits a node, so that every shape packs onto the nodes without leaving fragments."""
    if units % UNIT or units <= 0:
        raise ValueError(f"a request of {units / UNIT:g} units is not a whole number of GPUs")
    gpus = units // UNIT
    per_worker = 1
    while per_worker * 2 <= gpus_per_node and gpus % (per_worker * 2) == 0:
        per_worker *= 2
    workers = gpus // per_worker
    if workers > MAX_WORKERS:
        raise ValueError(f"{gpus} GPUs need {workers} workers of {per_worker}; the portal allows {MAX_WORKERS}")
    return per_worker, workers


def clock_speed(runtimes_ms: Sequence[int], speed: float | None) -> float:
    """The simulated cluster's speed: ``speed`` if every runtime is whole simulated seconds at it, else an
    error; by default the slowest clock at which they all are (200, 500, 1000 ms -> 10)."""
    if speed is None:
        return 1000 / math.gcd(1000, *runtimes_ms)
    for runtime in runtimes_ms:
        if abs(runtime * speed / 1000 - round(runtime * speed / 1000)) > 1e-9 or runtime * speed < 1000:
            raise ValueError(f"a runtime of {runtime} ms is not a whole number of simulated seconds at speed {speed}")
    return speed


@dataclass(frozen=True)
class Planned:
    arrival: Arrival
    name: str
    gpus_per_worker: int
    workers: int
    priority: str
    sim_seconds: int

    @property
    def gpus(self) -> int:
        return self.gpus_per_worker * self.workers


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    expanded: Expanded
    items: tuple[Planned, ...]
    speed: float
    nodes: int


def make_plan(config: StackConfig) -> Plan:
    scenario = scale_scenario(load_scenario(config.scenario), config.scale)
    ex = expand(scenario)
    if any(a.workload.kind is not Kind.BATCH for a in ex.arrivals):
        raise ValueError("the full stack replays batch workloads only (notebooks never finish by themselves)")
    speed = clock_speed(sorted({a.runtime_ms for a in ex.arrivals}), config.speed)
    priorities = priority_map([a.workload.priority for a in ex.arrivals])
    seq: Counter[str] = Counter()
    items = []
    for a in ex.arrivals:
        per_worker, workers = job_shape(a.workload.units, config.gpus_per_node)
        seq[a.class_name] += 1
        items.append(
            Planned(
                arrival=a,
                name=f"{a.class_name}-{seq[a.class_name]}"[:40],
                gpus_per_worker=per_worker,
                workers=workers,
                priority=priorities[a.workload.priority],
                sim_seconds=round(a.runtime_ms * speed / 1000),
            )
        )
    nominal = sum(q.guaranteed for q in ex.quotas.quotas.values()) // UNIT
    return Plan(scenario, ex, tuple(items), speed, nodes=max(1, math.ceil(nominal / config.gpus_per_node)))


# -- the organisation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Org:
    user: User
    offering: GpuOffering
    teams: Mapping[str, Team]  # by queue


def cleanup() -> None:
    """Remove everything a benchmark run created (the ledger's rows, then workspaces and their events first)."""
    benchstack.delete_workspaces(Workspace.objects.filter(owner__username=USER))
    TeamQuota.objects.filter(team__slug__startswith=PREFIX).delete()
    Membership.objects.filter(team__slug__startswith=PREFIX).delete()
    Team.objects.filter(slug__startswith=PREFIX).delete()
    Department.objects.filter(slug__startswith=PREFIX).delete()
    GpuOffering.objects.filter(slug=OFFERING).delete()
    Image.objects.filter(slug=OFFERING).delete()
    User.objects.filter(username=USER).delete()


def setup_org(plan: Plan) -> Org:
    user = User.objects.create_user(USER)
    offering = benchstack.whole_gpu_offering(OFFERING)
    Image.objects.create(slug=OFFERING, display_name="Queue bench trainer", reference=IMAGE, kind=Workspace.Kind.JOB)
    departments: dict[str, Department] = {}
    teams: dict[str, Team] = {}
    for (queue, _), quota in sorted(plan.expanded.quotas.quotas.items()):
        cohort = plan.expanded.quotas.department(queue)
        if cohort not in departments:
            departments[cohort] = Department.objects.create(
                name=f"Queue bench {cohort}", slug=f"{PREFIX}{cohort}"[:40], cost_centre=f"QB-{len(departments)}"
            )
        team = Team.objects.create(department=departments[cohort], name=f"Queue bench {queue}",
                                   slug=f"{PREFIX}{queue}"[:40])  # fmt: skip
        Membership.objects.create(team=team, user=user)
        TeamQuota.objects.create(
            team=team,
            flavour=offering.flavour,
            guaranteed=Decimal(quota.guaranteed) / UNIT,
            borrow_limit=Decimal(quota.borrow_limit) / UNIT,
        )
        teams[queue] = team
    return Org(user, offering, teams)


def request_data(item: Planned, org: Org) -> dict[str, Any]:
    """What the API's serializer would hand ``do_request_workspace`` for this workload."""
    return {
        "kind": Workspace.Kind.JOB,
        "name": item.name,
        "team": org.teams[item.arrival.workload.team],
        "offering": org.offering,
        "gpu_count": item.gpus_per_worker,
        "workers": item.workers,
        "image": IMAGE,
        "command": ["python", "train.py"],
        "env": {SIM_DURATION_ENV: str(item.sim_seconds)},
        "cpu_millis": CPU_MILLIS_PER_GPU * item.gpus_per_worker,
        "memory_mib": MEMORY_MIB_PER_GPU * item.gpus_per_worker,
        "max_runtime_hours": 1,
        "home_volume_gib": 1,
        "gpu_equivalents": org.offering.gpu_equivalents * item.gpus,
        "priority": item.priority,
    }


# -- the run ------------------------------------------------------------------------------------------


def create_streams(plan: Plan, org: Org, creators: int, started: float) -> dict[int, Planned]:
    """Create every workload at its time after the monotonic ``started`` (late ones at once), from a few
    threads so that a burst of simultaneous creations does not queue behind one database round trip."""
    todo: queues.Queue[Planned | None] = queues.Queue()
    created: dict[int, Planned] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def creator() -> None:
        try:
            while (item := todo.get()) is not None:
                if errors:
                    continue
                workspace = actions.do_request_workspace(org.user, request_data(item, org))
                with lock:
                    created[workspace.pk] = item
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=creator, name=f"creator-{i}", daemon=True) for i in range(creators)]
    for thread in threads:
        thread.start()
    for item in plan.items:
        delay = started + item.arrival.at_ms / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        todo.put(item)
        if errors:
            break
    for _ in threads:
        todo.put(None)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return created


def wait_finished(user: User, total: int, timeout_s: float, say: Callable[[str], None], started: float) -> int:
    """Wait until every workload reached an end (succeeded, or failed for good); returns the peak queue."""
    deadline = time.monotonic() + timeout_s
    next_report = time.monotonic() + 10
    peak = 0
    ending = [s for s in Workspace.FINAL_STATES if s != Workspace.State.PREEMPTED]  # preempted ones queue again
    while True:
        counts = dict(Workspace.objects.filter(owner=user).values_list("state").annotate(n=Count("id")))
        peak = max(peak, int(counts.get(Workspace.State.QUEUED, 0)))
        done = int(sum(counts.get(s, 0) for s in ending))
        if done >= total:
            return peak
        now = time.monotonic()
        if now > deadline:
            say(f"timed out after {timeout_s:.0f} s with {done}/{total} finished: {counts}")
            return peak
        if now >= next_report:
            active = sum(counts.get(s, 0) for s in Workspace.ACTIVE_STATES)
            say(f"{now - started:6.0f} s: {done}/{total} finished, {active} active, "
                f"{counts.get(Workspace.State.QUEUED, 0)} queued")  # fmt: skip
            next_report = now + 10
        time.sleep(0.5)


@dataclass(frozen=True)
class Phases:
    """Where a class's held time goes (mean seconds), over its runs admitted once that succeeded: the quota
    is held from admission, while its objects are created and then until the portal notices the end. The rest
    of ``finishing`` beyond ``runtime`` is the cluster's start and the portal's noticing."""

    runs: int
    creating: float  # admitted -> objects created in the cluster
    finishing: float  # objects created -> succeeded, as the portal noticed it
    runtime: float  # the workload's own runtime (the scenario's, in real seconds)


def held_phases(
    stamps: Mapping[int, Mapping[str, datetime]], admissions: Mapping[int, int], created: Mapping[int, Planned]
) -> dict[str, Phases]:
    """:class:`Phases` per class from each workspace's first entry into each state."""
    creating: dict[str, list[float]] = defaultdict(list)
    finishing: dict[str, list[float]] = defaultdict(list)
    admitted, provisioning, succeeded = (
        Workspace.State.ADMITTED,
        Workspace.State.PROVISIONING,
        Workspace.State.SUCCEEDED,
    )
    for pk, at in stamps.items():
        if admissions.get(pk) != 1 or not {admitted, provisioning, succeeded} <= at.keys():
            continue
        name = created[pk].arrival.class_name
        creating[name].append((at[provisioning] - at[admitted]).total_seconds())
        finishing[name].append((at[succeeded] - at[provisioning]).total_seconds())
    runtimes = {i.arrival.class_name: i.arrival.runtime_ms / 1000 for i in created.values()}
    return {
        name: Phases(len(creating[name]), fmean(creating[name]), fmean(finishing[name]), runtimes[name])
        for name in sorted(creating)
    }


@dataclass
class StackResult:
    result: SimResult
    scenario: Path
    scale: float
    speed: float
    nodes: int
    gpus_per_node: int
    concurrency: int
    creation_lag_s: tuple[float, float]  # mean, max behind the streams' schedule
    peak_queued: int
    not_succeeded: int
    profile: Profile
    run_s: float  # the whole command, set-up and clean-up included
    phases: Mapping[str, Phases] = field(default_factory=dict)  # by class


def measure(
    created: Mapping[int, Planned], plan: Plan, start: datetime
) -> tuple[SimResult, tuple[float, float], int, dict[str, Phases]]:
    """The figures from the database: (result, creation lag mean and max, not_succeeded workloads, phases)."""
    ws_rows = list(
        Workspace.objects.filter(pk__in=list(created)).values_list("pk", "created_at", "admitted_at", "finished_at",
                                                                    "state")
    )  # fmt: skip
    held: dict[str, float] = defaultdict(float)  # GPU-seconds per queue
    admissions = preemptions = 0
    active = set(Workspace.ACTIVE_STATES)
    since: dict[int, datetime] = {}
    stamps: dict[int, dict[str, datetime]] = defaultdict(dict)  # each workspace's first entry into each state
    admitted_runs: Counter[int] = Counter()
    events = (
        WorkspaceEvent.objects.filter(workspace_id__in=list(created))
        .order_by("workspace_id", "at", "id")
        .values_list("workspace_id", "at", "from_state", "to_state")
    )
    for pk, at, from_state, to_state in events.iterator(chunk_size=5000):
        item = created[pk]
        if from_state != to_state:
            stamps[pk].setdefault(to_state, at)
        if from_state not in active and to_state in active:
            since[pk] = at
            admissions += from_state == Workspace.State.QUEUED
            admitted_runs[pk] += 1
        elif from_state in active and to_state not in active and pk in since:
            held[item.arrival.workload.team] += (at - since.pop(pk)).total_seconds() * item.gpus
        preemptions += to_state == Workspace.State.PREEMPTED and from_state != to_state
    finished = [r for r in ws_rows if r[4] == Workspace.State.SUCCEEDED]
    end = max((r[3] for r in finished if r[3] is not None), default=start)
    wall_s = max((end - start).total_seconds(), 1e-9)
    useful: dict[str, float] = defaultdict(float)
    waits: dict[str, list[float]] = defaultdict(list)
    lags = []
    for pk, created_at, admitted_at, finished_at, _ in ws_rows:
        item = created[pk]
        lags.append((created_at - start).total_seconds() - item.arrival.at_ms / 1000)
        if admitted_at is not None:
            waits[item.arrival.class_name].append((admitted_at - created_at).total_seconds() * 1000)
        if finished_at is not None and admitted_at is not None:
            useful[item.arrival.workload.team] += (finished_at - admitted_at).total_seconds() * item.gpus
    nominal = {team: q.guaranteed / UNIT for (team, _), q in plan.expanded.quotas.quotas.items()}

    def per_nominal(area: Mapping[str, float]) -> dict[str, float]:
        return {t: area.get(t, 0.0) / (nominal[t] * wall_s) if nominal[t] else 0.0 for t in plan.expanded.queue_class}

    result = SimResult(
        wall_ms=round(wall_s * 1000),
        queue_usage=per_nominal(held),
        queue_useful=per_nominal(useful),
        admission_ms={c: sum(v) / len(v) for c, v in waits.items()},
        workloads=len(plan.items),
        finished=len(finished),
        admissions=admissions,
        preemptions=preemptions,
        cycles=0,
        decide_calls=0,
        cpu_s=0.0,
        decide_cpu_s=0.0,
    )
    not_succeeded = sum(1 for r in ws_rows if r[4] not in (Workspace.State.SUCCEEDED,))
    lag = (sum(lags) / len(lags) if lags else 0.0, max(lags, default=0.0))
    return result, lag, not_succeeded, held_phases(stamps, admitted_runs, created)


RUN_LOCK = "bench-queue-stack"  # single_flight's name for a run under way on this database


def run(config: StackConfig, say: Callable[[str], None] = print) -> StackResult:
    """One run. A second run on the same database is refused: its start-up clean-up would delete the first's
    workspaces and ledger rows under its worker (both runs act as the one benchmark user)."""
    with single_flight(RUN_LOCK) as acquired:
        if not acquired:
            raise ValueError("another bench_queue_stack run is using this database; wait for it to end")
        return _run(config, say)


def _run(config: StackConfig, say: Callable[[str], None]) -> StackResult:
    began = time.monotonic()
    plan = make_plan(config)
    live = [Workspace.State.QUEUED, *Workspace.ACTIVE_STATES]
    if Workspace.objects.exclude(owner__username=USER).filter(state__in=live).exists():
        # Its worker's scheduling cycle and reconcile loop would act on them, and they on the figures.
        raise ValueError("this database has other queued or running workspaces; use a database of its own")
    policy = plan.scenario.policy
    if (policy.reclaim, policy.within_team_priority) != (DEFAULT_POLICY.reclaim, DEFAULT_POLICY.within_team_priority):
        say("note: the portal always reclaims within departments and preempts lower priorities within a team; "
            "the scenario's other preemption policy is not applied")  # fmt: skip
    say(f"{len(plan.items)} workloads (scale {config.scale:g}), {len(plan.expanded.queue_class)} teams, "
        f"{plan.nodes} nodes x {config.gpus_per_node} {benchstack.H100}, simulated clock x{plan.speed:g}")  # fmt: skip
    longest = max((i.sim_seconds for i in plan.items), default=1)
    cleanup()  # what an aborted run left, before a worker starts that would act on it
    with tempfile.TemporaryDirectory(prefix="qbench-") as tmp:
        folder = Path(tmp)
        nodes_file = benchstack.cluster_file(folder, plan.nodes, gpus=config.gpus_per_node)
        instant = Timings(start_delay_s=0.0)
        with benchstack.simcluster_process(nodes_file, folder, speed=plan.speed, timings=instant) as sim:
            saved = (settings.KUBECONFIG, settings.CELERY_TASK_DEFAULT_QUEUE)
            settings.KUBECONFIG = str(sim.kubeconfig)
            reset_client()
            queue = f"qbench-{os.getpid()}"
            settings.CELERY_TASK_DEFAULT_QUEUE = queue  # what the requests enqueue reaches our worker only
            log, scheduler_log = folder / "worker.log", folder / "scheduler.log"
            env = {
                "SCHEDULING_INTERVAL_SECONDS": str(config.cycle_interval_s),
                "RECONCILE_INTERVAL_SECONDS": str(config.reconcile_interval_s),
                "PREEMPTION_NOTICE_SECONDS": str(config.notice_s),
                "SIMCLUSTER_JOB_SECONDS": str(longest),  # turns simulated runtimes on; each job names its own
            }
            # As deployed: the worker with beat on the default and control queues, the scheduler (one pool
            # process) on the scheduler queue.
            worker = benchstack.start_worker(
                sim.kubeconfig, queue, log, concurrency=config.concurrency,
                consume=[queue, control_queue(queue)], env=env,
            )  # fmt: skip
            scheduler = benchstack.start_worker(
                sim.kubeconfig, queue, scheduler_log, concurrency=1, consume=[scheduler_queue(queue)],
                beat=False, env=env,
            )  # fmt: skip
            try:
                org = setup_org(plan)
                benchstack.wait_ready(worker, log)
                benchstack.wait_ready(scheduler, scheduler_log)
                meter = CpuMeter(worker.pid, sim.process.pid, scheduler.pid)
                started = time.monotonic()
                start = timezone.now()
                created = create_streams(plan, org, config.creators, started)
                say(f"created {len(created)} workspaces in {time.monotonic() - started:.1f} s; waiting for them")
                peak = wait_finished(org.user, len(created), config.timeout_s, say, started)
                elapsed, cpu = meter.stop()
                result, lag, not_succeeded, phases = measure(created, plan, start)
            finally:
                benchstack.stop_process(worker)
                benchstack.stop_process(scheduler)
                if not config.keep:
                    cleanup()
                settings.KUBECONFIG, settings.CELERY_TASK_DEFAULT_QUEUE = saved
                reset_client()
            busy, runs = task_times(log, scheduler_log)
    ours = sum(v for k, v in cpu.items() if k != MACHINE)
    cpu[OTHERS] = max(0.0, cpu[MACHINE] - ours)
    result = replace(result, cycles=runs.get(tasknames.RUN_CYCLE, 0), cpu_s=ours)
    profile = Profile(elapsed, cpu, busy, runs, cores=os.cpu_count() or 1)
    return StackResult(
        result, config.scenario, config.scale, plan.speed, plan.nodes, config.gpus_per_node, config.concurrency,
        lag, peak, not_succeeded, profile, time.monotonic() - began, phases,
    )  # fmt: skip


# -- the report ---------------------------------------------------------------------------------------


def report_lines(r: StackResult) -> list[str]:
    s, p = r.result, r.profile
    wall_s = s.wall_ms / 1000
    lines = [
        f"scenario {r.scenario} at scale {r.scale:g}: {s.workloads} workloads, {s.finished} finished, "
        f"{r.not_succeeded} not succeeded",
        f"full stack: PostgreSQL, Redis, Celery prefork x{r.concurrency} with beat and the scheduler (prefork x1), "
        f"simulated cluster of {r.nodes} x {r.gpus_per_node} H100 at clock x{r.speed:g}",
    ]
    if r.scale != 1:
        lines.append("  (scale < 1: fewer workloads at the same rate; Kueue's figures are for the full scenario)")
    lines.append(f"{'figure':<40} {'stack':>10} {'Kueue avg':>10}  better")
    for row in rows(s):
        kueue = "" if row.kueue is None else f"{row.kueue:10.1f}"
        verdict = {True: "yes", False: "NO", None: ""}[row.beats]
        lines.append(f"{row.figure:<40} {row.ours:10.1f} {kueue:>10}  {verdict}")
        if row.figure.startswith("lowest queue usage"):
            lines.append(f"{'  the same, completed runs only (%)':<40} {100 * s.min_useful:10.1f}")
    rate = s.admissions / wall_s if wall_s else 0.0
    lines += [
        f"{'admissions per second, real time':<40} {rate:10.1f} {KUEUE_ADMISSIONS_PER_S:10.1f}",
        f"{'admissions (re-admissions included)':<40} {s.admissions:10d}",
        f"{'preemptions':<40} {s.preemptions:10d}",
        f"{'scheduling cycles run':<40} {s.cycles:10d}",
        f"{'creation behind schedule, mean / max (s)':<40} {r.creation_lag_s[0]:10.2f} {r.creation_lag_s[1]:10.2f}",
        f"{'most workspaces queued at once':<40} {r.peak_queued:10d}",
    ]
    if r.phases:
        lines.append("quota held per run (mean s, runs admitted once): admitted -> objects created -> end noticed")
        lines.append(f"  {'class':<10} {'creating':>9} {'finishing':>9} {'its run':>9} {'runs':>7}")
        for name, ph in r.phases.items():
            lines.append(f"  {name:<10} {ph.creating:9.2f} {ph.finishing:9.2f} {ph.runtime:9.2f} {ph.runs:7d}")
    lines.append(f"where the time went over {p.elapsed_s:.0f} s on {p.cores} cores (CPU seconds):")
    for name, cpu in sorted(p.cpu_s.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:<44} {cpu:9.1f}  ({100 * cpu / max(p.elapsed_s, 1e-9):5.1f}% of one core)")
    lines.append("workers' busy time per task (s, runs, mean ms):")
    for name, busy in sorted(p.task_s.items(), key=lambda kv: -kv[1]):
        runs = p.task_count[name]
        lines.append(f"  {name:<44} {busy:9.1f} {runs:7d} {1000 * busy / runs:9.1f}")
    lines.append(f"the whole command took {r.run_s:.0f} s (set-up and clean-up included)")
    return lines


def to_json(r: StackResult) -> dict[str, Any]:
    f = figures(r.result)
    for engine_only in ("admissions_per_sim_s", "admissions_per_cpu_s", "decide_calls", "decide_cpu_ms_mean"):
        f.pop(engine_only, None)
    wall_s = r.result.wall_ms / 1000
    return f | {
        "mode": "full-stack",
        "scenario": str(r.scenario),
        "scale": r.scale,
        "simulated_clock_speed": r.speed,
        "nodes": r.nodes,
        "gpus_per_node": r.gpus_per_node,
        "worker_concurrency": r.concurrency,
        "admissions_per_s": r.result.admissions / wall_s if wall_s else 0.0,
        "not_succeeded": r.not_succeeded,
        "creation_lag_s": {"mean": r.creation_lag_s[0], "max": r.creation_lag_s[1]},
        "peak_queued": r.peak_queued,
        "queue_usage_pct": {q: 100 * u for q, u in sorted(r.result.queue_usage.items())},
        "profile": {
            "elapsed_s": r.profile.elapsed_s,
            "cores": r.profile.cores,
            "cpu_s": r.profile.cpu_s,
            "task_busy_s": r.profile.task_s,
            "task_runs": r.profile.task_count,
        },
        "run_s": r.run_s,
        "held_phases_s": {name: asdict(ph) for name, ph in r.phases.items()},
        "kueue": KUEUE,
        "beats_kueue": {row.figure: row.beats for row in rows(r.result)},
    }
