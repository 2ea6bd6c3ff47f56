"""Benchmark of the live scheduling cycle (``manage.py bench_cycle``): how long one ``run_cycle`` takes with
many queued requests on a large simulated inventory, and how many SQL queries and API calls it makes.

The scenario, generated from a seed:

* a simulated cluster of ``nodes`` nodes, mostly 8 x H100 whole-GPU nodes, some A100 nodes split by MIG
  (``all-balanced`` or ``all-1g.10gb``), some L40S nodes time-sliced 4 ways, a few CPU-only nodes;
* an organisation of departments and teams whose guarantees per GPU model split that model's capacity;
* about ``busy`` of every GPU node's devices already in use by running workspaces (rows and pods pinned to
  the node, a random share per node, so the free capacity is fragmented as in a live cluster);
* ``queued`` requests: notebooks and jobs, 1/2/4/8 whole GPUs (8-GPU jobs with up to 4 workers), MIG
  slices, shares and CPU only. Teams ask in proportion to the square of their share, so the big teams
  queue beyond their guarantee: some requests wait on quota, some on free capacity, the rest are admitted.

A first cycle admits what fits (reported apart). Before each timed cycle, untimed, the world moves on as
provisioning and users would move it: admitted workspaces get their pods and run, ``churn`` of the running
ones finish (pods deleted), and new requests top the queue up to ``queued`` again.

Nothing is provisioned: the Celery tasks the cycle enqueues on commit are counted and dropped here, never
sent to a broker. Every row it creates is named ``bc-...`` and removed at the end.
"""

from __future__ import annotations

import cProfile
import random
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.db.models import Sum
from django.test import override_settings
from django.utils import timezone

from portal.models import Department, Membership, Team, User
from scheduling.benchmarks.measuring import GcPauses, QueryLog, TimedKube, unsent_tasks
from scheduling.benchmarks.stack import simcluster_process
from scheduling.demand import spec_for
from scheduling.discovery import propose_offerings
from scheduling.engine import gpus
from scheduling.kube import informer, manifests, names
from scheduling.kube.calls import Kube, Objects
from scheduling.kube.client import kube, reset_client
from scheduling.kube.keys import PRODUCT
from scheduling.loops.cycle import run_cycle
from scheduling.models import TeamQuota
from scheduling.simcluster.controllers import Timings
from scheduling.simcluster.testing import SimCluster
from workspaces.models import GpuOffering, Workspace

PREFIX = "bc"  # every department, team, user and offering of the benchmark; cleanup finds them by it
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NOTEBOOK_IMAGE = "quay.io/jupyter/scipy-notebook:2025-06-02"
JOB_IMAGE = "nvcr.io/nvidia/pytorch:25.05-py3"
# Pods run (and go) at once: the simulator's own timing is not what is measured.
TIMINGS = Timings(start_delay_s=0.0, termination_s=0.0, mig_reconfigure_s=1.0)
WHOLE_SIZES = (8, 4, 2, 1)
Kind = Workspace.Kind
State = Workspace.State
Priority = Workspace.Priority


class BenchError(RuntimeError):
    """The benchmark cannot run as asked (say, the database holds someone else's queue)."""


@dataclass(frozen=True)
class Scenario:
    nodes: int = 1000
    queued: int = 1000
    repeats: int = 5
    busy: float = 0.5  # mean share of each GPU node's devices in use before the queue arrives
    churn: float = 0.1  # share of running workspaces that finish between timed cycles
    seed: int = 1


@dataclass
class CycleFigures:
    wall_s: float
    admitted: int
    queued_before: int
    active_before: int
    pods_before: int  # of running workspaces, bound to nodes
    queries: int
    sql_s: float  # statements and commits
    api_s: dict[str, float]  # per Kubernetes call ("list Node"), summed
    api_calls: int
    tasks: dict[str, int]  # Celery tasks enqueued on commit, by name
    gc_s: float  # the garbage collector's pauses, part of rest_s
    full_gcs: int  # of them, full collections (every object the process keeps is traversed)
    # The most repeated SQL statements (literals replaced by ?): a count near the queue's length is N+1.
    repeated: list[tuple[int, str]] = field(default_factory=list)

    @property
    def rest_s(self) -> float:
        """Wall time outside SQL and API calls: the engines, capacity bookkeeping, ORM object building."""
        return max(0.0, self.wall_s - self.sql_s - sum(self.api_s.values()))


@dataclass
class Report:
    scenario: Scenario
    database: str
    nodes: int
    gpu_nodes: int
    workspaces_running: int
    teams: int
    setup_s: float
    first: CycleFigures
    cycles: list[CycleFigures]

    def summary(self) -> dict[str, float]:
        walls = [c.wall_s for c in self.cycles]
        return {
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "median_queries": statistics.median(c.queries for c in self.cycles),
            "median_admitted": statistics.median(c.admitted for c in self.cycles),
        }

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["summary"] = self.summary()
        for figures, entry in zip([self.first, *self.cycles], [data["first"], *data["cycles"]], strict=True):
            entry["rest_s"] = figures.rest_s
        return data


# --- the cluster ---------------------------------------------------------------------------------------


def cluster_file(nodes: int, seed: int) -> dict[str, Any]:
    """A simulated-cluster nodes file (format: ``scheduling/simcluster/nodes.py``) of ``nodes`` nodes."""
    cpu = max(1, round(nodes * 0.05))
    l40s = max(1, round(nodes * 0.08))
    a100 = max(1, round(nodes * 0.08))
    h100 = max(1, nodes - cpu - l40s - a100)
    h100_node = {"cpu": 224, "memory": "2Ti", "instanceType": "dgx-h100", "taints": [GPU_TAINT]}
    specs: list[dict[str, Any]] = [
        {"name": f"h100-{i:04d}", **h100_node, "gpu": {"model": "H100-80GB-HBM3", "count": 8}} for i in range(h100)
    ]
    specs += [
        {
            "name": f"a100-{i:04d}",
            "cpu": 256,
            "memory": "2Ti",
            "instanceType": "dgx-a100",
            "gpu": {"model": "A100-SXM4-80GB", "count": 8},
            # Two in three nodes offer every slice size, the rest only the smallest (many notebooks).
            "migConfig": "all-1g.10gb" if i % 3 == 2 else "all-balanced",
            "taints": [GPU_TAINT],
        }
        for i in range(a100)
    ]
    specs += [
        {
            "name": f"l40s-{i:04d}",
            "cpu": 128,
            "memory": "768Gi",
            "instanceType": "l40s-4x",
            "gpu": {"model": "L40S", "count": 4},
            "pluginConfig": "ts-4",
            "taints": [GPU_TAINT],
        }
        for i in range(l40s)
    ]
    specs += [{"name": f"cpu-{i:04d}", "cpu": 64, "memory": "256Gi", "instanceType": "cpu-64"} for i in range(cpu)]
    return {
        "seed": seed,
        "devicePlugin": {
            "default": "default",
            "configs": {"default": {"version": "v1", "flags": {"migStrategy": "mixed"}}, "ts-4": {"replicas": 4}},
        },
        "nodes": specs,
    }


@contextmanager
def bench_cluster(scenario: Scenario) -> Iterator[SimCluster]:
    """The generated cluster, served in a process of its own as an API server is (its objects and threads
    apart from the cycle's); the portal's client points at it meanwhile."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-cycle-cluster.yaml"
        path.write_text(yaml.safe_dump(cluster_file(scenario.nodes, scenario.seed)))
        with (
            simcluster_process(path, Path(tmp), timings=TIMINGS, seed=scenario.seed) as sim,
            override_settings(KUBECONFIG=str(sim.kubeconfig)),
        ):
            reset_client()
            try:
                yield SimCluster.from_kubeconfig(sim.kubeconfig)
            finally:
                reset_client()


# --- measuring (the instruments: scheduling/benchmarks/measuring.py) ------------------------------------


def timed_cycle(timed_kube: TimedKube, tasks: Counter[str], profiler: cProfile.Profile | None = None) -> CycleFigures:
    queued = Workspace.objects.filter(state=State.QUEUED).count()
    active = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES).count()
    pods = Workspace.objects.filter(state=State.RUNNING).aggregate(pods=Sum("workers"))["pods"] or 0
    timed_kube.reset()
    sent_before = Counter(tasks)
    log = QueryLog()
    with log.recording(), GcPauses().recording() as pauses:
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        try:
            admitted = run_cycle(timed_kube)
        finally:
            if profiler is not None:
                profiler.disable()
        wall = time.perf_counter() - started
    if queued and log.count <= 2:
        raise BenchError("the cycle did nothing: another scheduling cycle holds its lock on this database")
    return CycleFigures(
        wall_s=wall,
        admitted=admitted,
        queued_before=queued,
        active_before=active,
        pods_before=pods,
        queries=log.count,
        sql_s=log.seconds,
        api_s=dict(timed_kube.seconds),
        api_calls=timed_kube.calls,
        tasks=dict(tasks - sent_before),
        gc_s=pauses.seconds,
        full_gcs=pauses.full,
        repeated=log.repeated(),
    )


# --- the organisation and its requests ------------------------------------------------------------------


@dataclass
class World:
    rng: random.Random
    teams: list[Team]
    weights: dict[int, float]  # team id -> share of every GPU model's capacity
    owners: dict[int, list[User]]  # team id -> members
    offerings: list[GpuOffering]
    guarantee: dict[tuple[int, str], Decimal]  # (team id, flavour) -> guaranteed GPU-equivalents
    serial: int = 0

    def next_name(self, kind: str) -> str:
        self.serial += 1
        return f"{PREFIX}-{kind}-{self.serial}"


def _flavour_capacity(nodes: Objects) -> dict[str, int]:
    """Whole GPUs per GPU model (GFD's ``gpu.count``), what the guarantees split."""
    capacity: Counter[str] = Counter()
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if labels.get(PRODUCT):
            capacity[gpus.get_model(labels[PRODUCT]).key] += int(labels.get("nvidia.com/gpu.count", "0"))
    return dict(capacity)


def install_offerings(nodes: Objects, prefix: str = PREFIX) -> list[GpuOffering]:
    """The offerings discovery proposes for ``nodes``, under a benchmark's slug prefix."""
    rows = []
    for proposal in propose_offerings(nodes):
        fields = asdict(proposal)
        fields.pop("nodes")
        fields["slug"] = f"{prefix}-{proposal.slug}"[:40]
        rows.append(GpuOffering(**fields))
    return GpuOffering.objects.bulk_create(rows)


def build_world(nodes: Objects, scenario: Scenario) -> World:
    rng = random.Random(scenario.seed)
    departments = Department.objects.bulk_create(
        Department(name=f"Bench cycle {name}", slug=f"{PREFIX}-{name}", cost_centre=f"BC-{i}")
        for i, name in enumerate(("research", "engineering", "applied"))
    )
    count = max(2, min(24, scenario.queued // 40))
    teams = Team.objects.bulk_create(
        Team(department=departments[i % len(departments)], name=f"Bench cycle team {i}", slug=f"{PREFIX}-team-{i}")
        for i in range(count)
    )
    password = make_password(None)  # unusable; hashing one per user would dominate the setup
    users = User.objects.bulk_create(User(username=f"{PREFIX}-user-{i}", password=password) for i in range(count * 5))
    owners = {team.pk: users[i * 5 : i * 5 + 5] for i, team in enumerate(teams)}
    Membership.objects.bulk_create(Membership(team_id=t, user=u) for t, members in owners.items() for u in members)
    raw = {team.pk: rng.uniform(0.5, 2.0) for team in teams}
    weights = {pk: w / sum(raw.values()) for pk, w in raw.items()}
    guarantee: dict[tuple[int, str], Decimal] = {}
    quotas = []
    for flavour, gpu_count in _flavour_capacity(nodes).items():
        for team in teams:
            amount = Decimal(gpu_count * weights[team.pk]).quantize(Decimal(1), ROUND_CEILING)
            guarantee[team.pk, flavour] = amount
            quotas.append(TeamQuota(team=team, flavour=flavour, guaranteed=amount, borrow_limit=amount / 2))
    TeamQuota.objects.bulk_create(quotas)
    return World(rng, teams, weights, owners, install_offerings(nodes), guarantee)


def _workspace(world: World, team: Team, offering: GpuOffering, kind: str, count: int, workers: int) -> Workspace:
    job = kind == Kind.JOB
    return Workspace(
        name=world.next_name(kind),
        kind=kind,
        team=team,
        owner=world.rng.choice(world.owners[team.pk]),
        offering=offering,
        gpu_count=count,
        workers=workers,
        image=JOB_IMAGE if job else NOTEBOOK_IMAGE,
        command=["python", "train.py"] if job else [],
        cpu_millis=offering.cpu_millis_default,
        memory_mib=offering.memory_mib_default,
        max_runtime_seconds=8 * 3600,
        home_volume_gib=10,
        gpu_equivalents=offering.gpu_equivalents * count * workers,
        priority=world.rng.choice((Priority.HIGH, Priority.NORMAL, Priority.NORMAL, Priority.BATCH))
        if job
        else Priority.INTERACTIVE,
    )


def _request(world: World) -> Workspace:
    """One request: the mix of shapes a research organisation sends."""
    rng = world.rng
    by_kind: dict[str, list[GpuOffering]] = {}
    for offering in world.offerings:
        by_kind.setdefault(offering.kind, []).append(offering)
    # (weight, offering kind, workspace kind); shapes whose offering the cluster lacks are left out.
    shapes = [
        (25, GpuOffering.Kind.WHOLE, Kind.NOTEBOOK),
        (25, GpuOffering.Kind.WHOLE, Kind.JOB),
        (15, GpuOffering.Kind.MIG, Kind.NOTEBOOK),
        (5, GpuOffering.Kind.MIG, Kind.JOB),
        (15, GpuOffering.Kind.SHARED, Kind.NOTEBOOK),
        (5, GpuOffering.Kind.CPU, Kind.NOTEBOOK),
        (5, GpuOffering.Kind.CPU, Kind.JOB),
    ]
    shapes = [s for s in shapes if s[1] in by_kind]
    _, offering_kind, kind = rng.choices(shapes, weights=[s[0] for s in shapes])[0]
    offering = rng.choice(by_kind[offering_kind])
    count, workers = 1, 1
    if offering_kind == GpuOffering.Kind.CPU:
        count = 0
    elif offering_kind == GpuOffering.Kind.WHOLE:
        count = rng.choice((1, 1, 1, 2) if kind == Kind.NOTEBOOK else (1, 2, 4, 8, 8))
        workers = rng.choice((1, 1, 2, 4)) if count == 8 else 1
    # Big teams ask beyond their share (square of the weight), so some of them wait on quota.
    teams = [t for t in world.teams if world.guarantee.get((t.pk, offering.flavour), Decimal(1)) > 0]
    team = rng.choices(teams, weights=[world.weights[t.pk] ** 2 for t in teams])[0]
    workspace = _workspace(world, team, offering, kind, count, workers)
    limit = world.guarantee.get((team.pk, offering.flavour))
    if limit is not None and workspace.gpu_equivalents > limit:
        # The API refuses a request larger than the team's whole guarantee; ask for one GPU instead.
        workspace = _workspace(world, team, offering, kind, 1, 1)
    return workspace


def top_up_queue(world: World, queued: int) -> int:
    """Add requests until ``queued`` wait; answers how many were added."""
    missing = queued - Workspace.objects.filter(state=State.QUEUED).count()
    Workspace.objects.bulk_create(_request(world) for _ in range(max(0, missing)))
    return max(0, missing)


# --- what runs on the cluster ----------------------------------------------------------------------------


def _pod_name(workspace: Workspace, index: int) -> str:
    return f"{names.workspace_base_name(workspace.pk, workspace.name)}-{index}"


def _pod(workspace: Workspace, index: int, node: str | None) -> dict[str, Any]:
    """A bare pod of one worker, labelled as the portal labels its pods (the cycle counts it by them)."""
    offering = workspace.offering
    limits: dict[str, Any] = {"cpu": f"{workspace.cpu_millis}m", "memory": f"{workspace.memory_mib}Mi"}
    spec: dict[str, Any] = {"restartPolicy": "Never", "nodeSelector": dict(offering.node_selector)}
    if offering.kind != GpuOffering.Kind.CPU:
        limits[offering.resource_name] = workspace.gpu_count
        spec["tolerations"] = [GPU_TOLERATION]
    if node:
        spec["nodeName"] = node  # placed by us, as the busy share was drawn (no scheduler involved)
    spec["containers"] = [{"name": "main", "image": workspace.image, "resources": {"limits": limits}}]
    metadata = {
        "name": _pod_name(workspace, index),
        "namespace": names.namespace_for(workspace.team.slug),
        "labels": names.common_labels(spec_for(workspace)),
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _matching(node: Mapping[str, Any], offerings: Sequence[GpuOffering]) -> list[tuple[GpuOffering, int]]:
    labels = node["metadata"].get("labels") or {}
    allocatable = node["status"].get("allocatable") or {}
    found = []
    for offering in offerings:
        units = int(allocatable.get(offering.resource_name, 0) or 0) if offering.resource_name else 0
        if units and all(labels.get(k) == v for k, v in offering.node_selector.items()):
            found.append((offering, units))
    return found


def _team_with_room(
    world: World, flavour: str, amount: Decimal, used: Mapping[tuple[int, str], Decimal]
) -> Team | None:
    teams = [t for t in world.teams if used[t.pk, flavour] + amount <= world.guarantee.get((t.pk, flavour), 0)]
    return world.rng.choices(teams, weights=[world.weights[t.pk] for t in teams])[0] if teams else None


def load_cluster(kube: Kube, world: World, nodes: Objects, busy: float) -> int:
    """Fill each GPU node to a random share (mean ``busy``) with running one-pod workspaces, within the
    teams' guarantees, their pods pinned to it. Answers how many."""
    rng = world.rng
    gpu_offerings = [o for o in world.offerings if o.kind != GpuOffering.Kind.CPU]
    used: defaultdict[tuple[int, str], Decimal] = defaultdict(Decimal)
    placed: list[tuple[Workspace, str]] = []
    for node in nodes:
        share = min(1.0, rng.uniform(0.0, 2.0 * busy))
        for offering, units in _matching(node, gpu_offerings):
            left = round(units * share)
            while left > 0:
                # Whole GPUs come in the sizes researchers ask for; slices and shares one at a time.
                size = rng.choice([s for s in WHOLE_SIZES if s <= left]) if offering.kind == "whole" else 1
                team = _team_with_room(world, offering.flavour, offering.gpu_equivalents * size, used)
                if team is None:
                    break
                used[team.pk, offering.flavour] += offering.gpu_equivalents * size
                kind = Kind.JOB if size >= 4 else rng.choice((Kind.NOTEBOOK, Kind.JOB))
                placed.append((_workspace(world, team, offering, kind, size, 1), node["metadata"]["name"]))
                left -= size
    now = timezone.now()
    for workspace, node_name in placed:
        workspace.state = State.RUNNING
        workspace.node_name = node_name
        workspace.admitted_at = workspace.started_at = now
    rows = Workspace.objects.bulk_create(w for w, _ in placed)
    for team in world.teams:
        kube.ensure(manifests.make_namespace(team.slug))
    for workspace, (_, node_name) in zip(rows, placed, strict=True):
        kube.ensure(_pod(workspace, 0, node_name))
    return len(rows)


def start_admitted(kube: Kube) -> int:
    """What provisioning would do, reduced to bare pods: admitted workspaces get theirs and run. Pods of a
    workspace with a chosen node go there; others are left to the simulated kube-scheduler."""
    admitted = list(
        Workspace.objects.filter(state=State.ADMITTED, team__slug__startswith=f"{PREFIX}-").select_related(
            "offering", "team", "owner"
        )
    )
    for workspace in admitted:
        pinned = getattr(workspace, "pinned_node", "") or None
        for index in range(workspace.workers):
            kube.ensure(_pod(workspace, index, pinned))
    now = timezone.now()
    for workspace in admitted:
        workspace.state = State.RUNNING
        workspace.started_at = now
    Workspace.objects.bulk_update(admitted, ["state", "started_at"])
    return len(admitted)


def finish_some(kube: Kube, world: World, share: float) -> int:
    """``share`` of the running workspaces end: their pods are deleted and their rows succeed."""
    running = list(
        Workspace.objects.filter(state=State.RUNNING, team__slug__startswith=f"{PREFIX}-").select_related(
            "offering", "team", "owner"
        )
    )
    done = world.rng.sample(running, round(len(running) * share))
    for workspace in done:
        for index in range(workspace.workers):
            kube.delete("Pod", names.namespace_for(workspace.team.slug), _pod_name(workspace, index))
    Workspace.objects.filter(pk__in=[w.pk for w in done]).update(state=State.SUCCEEDED, finished_at=timezone.now())
    return len(done)


# --- the whole run ------------------------------------------------------------------------------------------


def foreign_work() -> int:
    """Queued or active workspaces that are not the benchmark's: the cycle would act on them too."""
    live = (State.QUEUED, *Workspace.ACTIVE_STATES)
    return Workspace.objects.filter(state__in=live).exclude(team__slug__startswith=f"{PREFIX}-").count()


def cleanup() -> None:
    """Remove every row the benchmark created (also those an aborted run left behind)."""
    Workspace.objects.filter(team__slug__startswith=f"{PREFIX}-").delete()
    Team.objects.filter(slug__startswith=f"{PREFIX}-").delete()  # quotas and memberships go with them
    Department.objects.filter(slug__startswith=f"{PREFIX}-").delete()
    User.objects.filter(username__startswith=f"{PREFIX}-user-").delete()
    GpuOffering.objects.filter(slug__startswith=f"{PREFIX}-").delete()


def run_benchmark(
    scenario: Scenario, progress: Callable[[str], None] = lambda _: None, profiler: cProfile.Profile | None = None
) -> Report:
    """Set the scenario up, time ``scenario.repeats`` cycles, clean up; see the module docstring. With a
    ``profiler``, it records the timed cycles (not the first, not the untimed world moving on)."""
    if scenario.repeats < 1 or scenario.nodes < 4 or scenario.queued < 1:
        raise BenchError("needs at least 4 nodes, 1 queued request and 1 repeat")
    if not (0 <= scenario.busy <= 1 and 0 <= scenario.churn <= 1):
        raise BenchError("busy and churn are shares between 0 and 1")
    cleanup()
    if foreign := foreign_work():
        raise BenchError(
            f"the database holds {foreign} queued or running workspaces that are not the benchmark's, which "
            "the cycle would admit too; give the benchmark a database of its own (DATABASE_URL)"
        )
    try:
        with bench_cluster(scenario) as cluster, unsent_tasks() as tasks:
            started = time.perf_counter()
            client = kube()
            nodes = client.list("Node", None, "")
            world = build_world(nodes, scenario)
            running = load_cluster(client, world, nodes, scenario.busy)
            top_up_queue(world, scenario.queued)
            cluster.settle()
            setup_s = time.perf_counter() - started
            progress(f"set up {len(nodes)} nodes and {running} running workspaces (one pod each) in {setup_s:.1f} s")
            timed_kube = TimedKube(client)
            first = timed_cycle(timed_kube, tasks)
            progress(f"first cycle: {first.wall_s:.2f} s, admitted {first.admitted} of {first.queued_before}")
            cycles = []
            for repeat in range(scenario.repeats):
                start_admitted(client)
                finish_some(client, world, scenario.churn)
                top_up_queue(world, scenario.queued)
                cluster.settle()
                cycles.append(timed_cycle(timed_kube, tasks, profiler))
                progress(f"cycle {repeat + 1}: {cycles[-1].wall_s:.2f} s, admitted {cycles[-1].admitted}")
        return Report(
            scenario=scenario,
            database=connection.vendor,
            nodes=len(nodes),
            gpu_nodes=sum(1 for n in nodes if (n["metadata"].get("labels") or {}).get(PRODUCT)),
            workspaces_running=running,
            teams=len(world.teams),
            setup_s=setup_s,
            first=first,
            cycles=cycles,
        )
    finally:
        informer.stop_all()  # the cycle's watches on the benchmark's cluster, which is gone now
        cleanup()
