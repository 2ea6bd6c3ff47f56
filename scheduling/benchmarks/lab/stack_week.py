"""The lab model on the full stack: the same arrivals as the simulated-time arms, lived through Django,
PostgreSQL, Redis, a real Celery worker with beat, and the simulated cluster with its telemetry.

``manage.py bench_lab_week`` runs it. Time: the simulated cluster's API clock is real time (the portal
compares Jupyter's timestamps with its own, as on a real cluster) while its workloads run ``speed`` times
faster (``--workload-speed``: job durations, GPU activity, kernel activity); every portal duration of the
model is shortened by the same factor (the idle rule's minute, the preemption notice, the fair-share half-life).
A model second is real seconds x ``speed`` after the week's start.

What the researchers do, as in the simulated-time portal arm (``portal_arm.py``):

- a request asks, at its time, for the first offering of its arm's list whose team has room for it and
  whose nodes could take it now (what the request form shows), through ``workspaces.actions`` as the API
  does; a job carries its run time (``GPUPORTAL_SIM_DURATION_SECONDS``), a notebook its profile
  (``GPUPORTAL_SIM_PROFILE``: ``bursty-notebook``, or ``idle-notebook:<seconds of work>`` when forgotten);
- a notebook's owner closes it when the work is done (attended) or on the next working morning (forgotten),
  counted from when its pod started; a notebook reclaimed while in use is asked for again when its owner
  comes back (``runs.Plan.back_after``);
- at the end of the days everything still live is stopped.

The figures come from what the portal recorded (``figures.py``, as for the other arms): GPUs held from each
admission to the end of holding (the workspace's events), asked = held + queued, waits from creation to
the first admission, activity from the profile each pod played (its uid and the cluster's seed give the
same busy stretches the cluster's dcgm-exporter reported); and, as a cross-check, activity and idle
GPU-hours from the portal's own telemetry samples (``ActivitySample``).
"""

from __future__ import annotations

import heapq
import socket
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import F, FloatField, Sum
from django.utils import timezone

from portal.models import Department, Membership, Team, User
from scheduling.benchmarks import stack as benchstack
from scheduling.benchmarks.lab.arrivals import Calendar, Request
from scheduling.benchmarks.lab.fleet import Fleet, whole_gpus_file
from scheduling.benchmarks.lab.model import Arm, LabModel
from scheduling.benchmarks.lab.outcome import ArmOutcome, Step
from scheduling.benchmarks.lab.portal_arm import HALF_LIFE_S, PREEMPTION_NOTICE_S
from scheduling.benchmarks.lab.runs import Plan, Run, Wait, plan
from scheduling.demand import SIM_DURATION_ENV, SIM_PROFILE_ENV, demand_of
from scheduling.discovery import propose_offerings
from scheduling.engine.quota import to_units
from scheduling.inventory import Capacity, Demand
from scheduling.kube import names
from scheduling.kube.client import kube, reset_client
from scheduling.kube.keys import WORKSPACE_ID
from scheduling.models import ActivitySample, DepartmentCap, TeamPolicy, TeamQuota
from scheduling.simcluster.clock import parse_time
from scheduling.simcluster.controllers import Timings
from workspaces import actions
from workspaces.access import state_allows
from workspaces.models import GpuOffering, Image, Workspace, WorkspaceEvent

PREFIX = "lab-"  # users, departments, teams, offerings' images of the run; removed before and after
NOTEBOOK_IMAGE, JOB_IMAGE = "lab-notebook", "lab-trainer"
IMAGES = {
    NOTEBOOK_IMAGE: ("quay.io/jupyter/scipy-notebook:2025-06-02", Image.Kind.NOTEBOOK),
    JOB_IMAGE: ("nvcr.io/nvidia/pytorch:25.05-py3", Image.Kind.JOB),
}
TICK_S = 0.1  # real seconds between the driver's looks at the clock and the database
TELEMETRY_INTERVAL_S = 2.0  # real seconds: ten model minutes at speed 300, the idle rule's max gap three times that
Active = frozenset(Workspace.ACTIVE_STATES)


@dataclass(frozen=True)
class WeekConfig:
    model: LabModel
    arm: Arm
    requests: Sequence[Request]
    speed: float = 300.0
    concurrency: int = 3
    keep: bool = False
    hours: float | None = None  # stop after these model hours instead of the model's days

    @property
    def horizon(self) -> float:
        return self.model.days * 86400.0 if self.hours is None else self.hours * 3600


@dataclass(frozen=True)
class Measured:
    """What the portal's own telemetry saw of the run (``ActivitySample``), in GPU-equivalent hours."""

    held_gpu_h: float  # with a GPU figure
    active_gpu_h: float  # activity-weighted
    idle_gpu_h: float

    @property
    def activity(self) -> float | None:
        return self.active_gpu_h / self.held_gpu_h if self.held_gpu_h else None


@dataclass(frozen=True)
class WeekResult:
    outcome: ArmOutcome
    measured: Measured
    wall_s: float  # the week itself, real seconds
    run_s: float  # the whole command
    behind_s: float  # how far the driver fell behind its schedule at worst (real seconds)


def cleanup() -> None:
    """Remove every row a run made."""
    benchstack.delete_workspaces(Workspace.objects.filter(owner__username__startswith=PREFIX))
    for model in (TeamQuota, TeamPolicy, Membership):
        model.objects.filter(team__slug__startswith=PREFIX).delete()
    DepartmentCap.objects.filter(department__slug__startswith=PREFIX).delete()
    Team.objects.filter(slug__startswith=PREFIX).delete()
    Department.objects.filter(slug__startswith=PREFIX).delete()
    Image.objects.filter(slug__in=IMAGES).delete()
    User.objects.filter(username__startswith=PREFIX).delete()


@dataclass(frozen=True)
class Org:
    teams: Mapping[str, Team]  # by the model's team name
    users: Mapping[int, User]  # by researcher
    offerings: Mapping[str, GpuOffering]  # by slug


def _units(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))


def setup_org(model: LabModel, requests: Iterable[Request], *, idle_reclaim: bool = True) -> Org:
    """The model's departments, teams, quotas, idle rule and researchers, and the offerings discovery
    proposes on the cluster (created or updated, as ``discover_offerings --apply``). Without
    ``idle_reclaim`` the teams' idle threshold is 0%: no GPU is ever below it, so nothing is judged idle."""
    proposals = propose_offerings(kube().list("Node", None, ""))
    offerings = {}
    for p in proposals:
        fields = {k: v for k, v in asdict(p).items() if k not in ("nodes", "slug")}
        offerings[p.slug], _ = GpuOffering.objects.update_or_create(slug=p.slug, defaults=fields)
    flavours = sorted({p.gpu_model for p in proposals if p.gpu_model})
    for slug, (reference, kind) in IMAGES.items():
        Image.objects.create(slug=slug, display_name=f"Lab {kind}", reference=reference, kind=kind)
    departments = {}
    for i, d in enumerate(model.departments):
        departments[d.name] = Department.objects.create(
            name=f"Lab {d.name}", slug=f"{PREFIX}{d.name}"[:40], cost_centre=f"LAB-{i}"
        )
        for flavour, cap in d.cap.items():
            DepartmentCap.objects.create(department=departments[d.name], flavour=flavour, cap=_units(cap))
    teams = {}
    for t in model.teams:
        team = Team.objects.create(department=departments[t.department], name=f"Lab {t.name}",
                                   slug=f"{PREFIX}{t.name}"[:40])  # fmt: skip
        for flavour in flavours:
            TeamQuota.objects.create(team=team, flavour=flavour, guaranteed=_units(t.guarantee.get(flavour, 0.0)),
                                     borrow_limit=_units(t.borrow.get(flavour, 0.0)))  # fmt: skip
        TeamPolicy.objects.create(
            team=team,
            idle_window_minutes=round(model.idle.window_s / 60),
            idle_grace_minutes=round(model.idle.grace_s / 60),
            **({} if idle_reclaim else {"idle_threshold_percent": 0}),
        )
        teams[t.name] = team
    users = {}
    for researcher, team_name in sorted({(q.researcher, q.team) for q in requests}):
        users[researcher] = User.objects.create_user(f"{PREFIX}r{researcher:03d}")
        Membership.objects.create(team=teams[team_name], user=users[researcher])
    return Org(teams, users, offerings)


def request_data(q: Request, offering: GpuOffering, team: Team, name: str) -> dict[str, Any]:
    """What the API's serializer would hand ``do_request_workspace``."""
    count = q.gpus if q.kind == "job" else 1
    if q.kind == "job":
        env = {SIM_DURATION_ENV: str(max(1, round(q.run_s)))}
        image, command = JOB_IMAGE, ["python", "train.py"]
    else:
        env = {SIM_PROFILE_ENV: f"idle-notebook:{max(1, round(q.session_s))}" if q.forgotten else "bursty-notebook"}
        image, command = NOTEBOOK_IMAGE, []
    return {
        "kind": Workspace.Kind.JOB if q.kind == "job" else Workspace.Kind.NOTEBOOK,
        "name": name,
        "team": team,
        "offering": offering,
        "gpu_count": count,
        "workers": q.pods,
        "image": image,
        "command": command,
        "env": env,
        "cpu_millis": offering.cpu_millis_default * count,
        "memory_mib": offering.memory_mib_default * count,
        "home_volume_gib": 1,
        "gpu_equivalents": offering.gpu_equivalents * count * q.pods,
        "priority": Workspace.Priority.NORMAL,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the researchers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    data: dict[str, Any]  # the request for this offering
    key: tuple[str, str]  # (team slug, GPU model)
    units: int
    guarantee: int  # the team's, in units
    limit: int  # what it may hold of the model for this kind of request
    demand: Demand


@dataclass
class _Asked:
    request: Request
    pool: str
    gpu_eq: float
    in_quota: bool
    plan: Plan | None = None  # notebooks: set when its pod started
    start: float | None = None  # model seconds, notebooks: when its pod started


class Researchers:
    """Asks for workspaces at the model's times and closes notebooks when their owners would."""

    def __init__(self, config: WeekConfig, org: Org, origin: datetime, started: float) -> None:
        self.config, self.org, self.model = config, org, config.model
        self.arm = config.arm
        self.cal = Calendar(self.model)
        self.origin, self.started = origin, started  # the week's start: wall clock, monotonic
        self.events: list[tuple[float, int, str, Any]] = [(q.at, i, "ask", q) for i, q in enumerate(config.requests)]
        heapq.heapify(self.events)
        self.seq = len(self.events)
        self.asked: dict[int, _Asked] = {}  # by workspace
        self.handled_reclaims: set[int] = set()
        self.behind_s = 0.0

    def now(self) -> float:
        """Model seconds since the week's start."""
        return (time.monotonic() - self.started) * self.config.speed

    def at(self, moment: datetime) -> float:
        return (moment - self.origin).total_seconds() * self.config.speed

    def _push(self, at: float, what: str, payload: Any) -> None:
        heapq.heappush(self.events, (at, self.seq, what, payload))
        self.seq += 1

    # -- asking --------------------------------------------------------------------------------------

    def _tallies(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """GPU-equivalent units held and queued per (team slug, GPU model), from the database."""
        held: dict[tuple[str, str], int] = defaultdict(int)
        queued: dict[tuple[str, str], int] = defaultdict(int)
        rows = (
            Workspace.objects.filter(owner__username__startswith=PREFIX)
            .filter(state__in=[*Workspace.ACTIVE_STATES, Workspace.State.QUEUED])
            .values_list("team__slug", "offering__gpu_model", "state")
            .annotate(eq=Sum("gpu_equivalents"))
        )
        for team, model, state, eq in rows:
            (held if state in Active else queued)[team, model] += to_units(float(eq))
        return held, queued

    def _options(self, q: Request) -> list[_Option]:
        """The arm's offerings for the request, in its order of preference, that allow its GPU count."""
        slugs = self.arm.job_offerings if q.kind == "job" else (self.arm.notebook_offerings or {})[q.size]
        team = self.org.teams[q.team]
        model_team = next(t for t in self.model.teams if t.name == q.team)
        count = q.gpus if q.kind == "job" else 1
        options = []
        for offering in (self.org.offerings[slug] for slug in slugs):
            if count not in offering.allowed_counts:
                continue
            data = request_data(q, offering, team, f"{q.kind}-{q.id}".replace("+", "-again")[:40])
            flavour = offering.gpu_model
            guarantee = to_units(model_team.guarantee.get(flavour, 0.0))
            borrow = to_units(model_team.borrow.get(flavour, 0.0)) if q.kind == "job" else 0
            unsaved = Workspace(offering=offering, gpu_count=count, workers=q.pods, cpu_millis=data["cpu_millis"],
                                memory_mib=data["memory_mib"])  # fmt: skip
            units = to_units(float(data["gpu_equivalents"]))
            options.append(
                _Option(data, (team.slug, flavour), units, guarantee, guarantee + borrow, demand_of(unsaved))
            )
        return options

    def ask(self, due: list[Request]) -> None:
        held, queued = self._tallies()
        client = kube()
        capacity = Capacity.from_objects(client.list("Node", None, ""), client.list("Pod", None, ""))
        for q in due:
            options = self._options(q)
            if not options:
                continue  # no offering allows its GPU count: it is never asked (as in the simulated arm)
            room = (o for o in options if held[o.key] + o.units <= o.limit and not capacity.place_would_fail(o.demand))
            chosen = next(room, options[0])
            in_quota = held[chosen.key] + queued[chosen.key] + chosen.units <= chosen.guarantee
            queued[chosen.key] += chosen.units
            workspace = actions.do_request_workspace(self.org.users[q.researcher], chosen.data)
            pool = chosen.key[1]
            self.asked[workspace.pk] = _Asked(q, pool, float(chosen.data["gpu_equivalents"]), in_quota)

    # -- notebooks -----------------------------------------------------------------------------------

    def _pod_start(self, workspace: Workspace) -> tuple[str, datetime] | None:
        namespace = names.namespace_for(workspace.team.slug)
        for pod in kube().list("Pod", namespace, f"{WORKSPACE_ID}={workspace.pk}"):
            started = (pod.get("status") or {}).get("startTime")
            if started and (pod.get("status") or {}).get("phase") == "Running":
                return pod["metadata"]["uid"], parse_time(started)
        return None

    def watch_notebooks(self) -> None:
        """Plan the close of notebooks that started since the last look; ask again for the ones reclaimed
        while their owner was still working in them."""
        waiting = [pk for pk, a in self.asked.items() if a.request.kind == "notebook" and a.start is None]
        if waiting:
            for workspace in Workspace.objects.filter(pk__in=waiting, state=Workspace.State.RUNNING).select_related(
                "team"
            ):
                found = self._pod_start(workspace)
                if found is None:
                    continue
                a = self.asked[workspace.pk]
                uid, started = found
                a.start = self.at(started)
                a.plan = plan(a.request, a.start, self.cal, benchstack.SIM_SEED, pod_uid=uid)
                self._push(a.start + a.plan.length, "close", workspace.pk)
        seen = [pk for pk, a in self.asked.items() if a.start is not None and pk not in self.handled_reclaims]
        reclaimed = WorkspaceEvent.objects.filter(
            workspace_id__in=seen, to_state=Workspace.State.RECLAIMED
        ).values_list("workspace_id", "at")
        for pk, at in reclaimed:
            self.handled_reclaims.add(pk)
            a = self.asked[pk]
            assert a.plan is not None and a.start is not None
            t = self.at(at) - a.start
            back = a.plan.back_after(t) if t < a.plan.in_use else None
            if back is not None:  # its owner comes back, finds it stopped, and asks again for the rest
                q = a.request
                self._push(a.start + back, "ask", replace(q, id=f"{q.id}+", at=a.start + back,
                                                          session_s=a.plan.in_use - back))  # fmt: skip

    def close(self, pk: int) -> None:
        workspace = Workspace.objects.select_related("owner").get(pk=pk)
        if workspace.state in Active:
            _stop(workspace)

    # -- the week ------------------------------------------------------------------------------------

    def live(self, horizon: float, say: Callable[[str], None]) -> None:
        next_report = 0.0
        while (now := self.now()) < horizon:
            due: list[Request] = []
            closing: list[int] = []
            while self.events and self.events[0][0] <= now:
                at, _, what, payload = heapq.heappop(self.events)
                self.behind_s = max(self.behind_s, (now - at) / self.config.speed)
                (due if what == "ask" else closing).append(payload)
            if due:
                self.ask(due)
            for pk in closing:
                self.close(pk)
            self.watch_notebooks()
            if now >= next_report:
                states = Counter(Workspace.objects.filter(pk__in=list(self.asked)).values_list("state", flat=True))
                live, queued, done = sum(states[s] for s in Active), states["queued"], states["succeeded"]
                say(f"day {now / 86400:4.2f}: {len(self.asked)} asked, {live} live, {queued} queued, {done} jobs done")
                next_report = now + 6 * 3600
            time.sleep(TICK_S)

    def stop_all(self) -> None:
        stoppable = [*Workspace.ACTIVE_STATES, Workspace.State.QUEUED]
        for workspace in Workspace.objects.filter(pk__in=list(self.asked), state__in=stoppable).select_related("owner"):
            _stop(workspace)


def _stop(workspace: Workspace) -> None:
    """Stop ``workspace`` as its owner would, unless the worker ended it since it was read (reclaimed it idle,
    saw it finish, preempted it): ``do_stop`` checks the state under the row's lock and refuses those."""
    try:
        actions.do_stop(workspace.owner, workspace)
    except ValidationError:
        workspace.refresh_from_db(fields=["state"])
        if state_allows(workspace, "stop"):
            raise  # refused for another reason than having ended meanwhile


# -- the figures ---------------------------------------------------------------------------------------


def outcome(r: Researchers, horizon: float, capacity: Mapping[str, float], gpus: float) -> ArmOutcome:
    """Runs, waits and GPUs held and asked for over time, from the workspaces' events."""
    cal, model = r.cal, r.model
    events: dict[int, list[tuple[float, str, str]]] = defaultdict(list)
    rows = (
        WorkspaceEvent.objects.filter(workspace_id__in=list(r.asked))
        .order_by("workspace_id", "at", "id")
        .values_list("workspace_id", "at", "from_state", "to_state")
    )
    for pk, at, from_state, to_state in rows.iterator(chunk_size=5000):
        events[pk].append((r.at(at), from_state, to_state))
    rows_of = list(Workspace.objects.filter(pk__in=list(r.asked)).values_list("pk", "created_at", "offering__slug"))
    created = {pk: at for pk, at, _ in rows_of}
    slugs = {pk: slug for pk, _, slug in rows_of}
    changes: list[tuple[float, str, float, float]] = []  # (time, pool, change of held, change of asked)
    runs: list[Run] = []
    waits: list[Wait] = []
    outcomes: dict[str, str] = {
        Workspace.State.SUCCEEDED: "done",
        Workspace.State.RECLAIMED: "reclaimed",
        Workspace.State.PREEMPTED: "preempted",
    }
    for pk, a in r.asked.items():
        asked_at = r.at(created[pk])
        if asked_at >= horizon:
            continue
        changes.append((asked_at, a.pool, 0.0, a.gpu_eq))
        first: float | None = None
        since: float | None = None
        attempt = 0
        asked_until = horizon
        for t, from_state, to_state in events[pk]:
            if t >= horizon:
                break
            if from_state not in Active and to_state in Active:
                since = t
                first = t if first is None else first
            elif from_state in Active and to_state not in Active and since is not None:
                how = outcomes.get(to_state, "closed" if a.request.kind == "notebook" else to_state)
                runs.append(_run(a, since, t, how, cal, model.seed, attempt, slugs[pk]))
                changes.append((since, a.pool, a.gpu_eq, 0.0))
                changes.append((t, a.pool, -a.gpu_eq, 0.0))
                since, attempt = None, attempt + 1
            if to_state in Workspace.FINAL_STATES:
                asked_until = t
        if since is not None:
            runs.append(_run(a, since, horizon, "month-ended", cal, model.seed, attempt, slugs[pk]))
            changes.append((since, a.pool, a.gpu_eq, 0.0))
            changes.append((horizon, a.pool, -a.gpu_eq, 0.0))
        changes.append((asked_until, a.pool, 0.0, -a.gpu_eq))
        waits.append(Wait(replace(a.request, at=asked_at), a.in_quota, first))
    return ArmOutcome(r.arm.name, gpus, horizon, runs, waits, _step(capacity, changes))


def _run(a: _Asked, start: float, end: float, how: str, cal: Calendar, seed: int, attempt: int, slug: str) -> Run:
    p = a.plan if a.plan is not None else plan(a.request, start, cal, seed, attempt=attempt)
    return Run(a.request, slug, a.gpu_eq, start, end, how, p)


def _step(capacity: Mapping[str, float], changes: Sequence[tuple[float, str, float, float]]) -> Step:
    pools = tuple(sorted(capacity))
    column = {p: i for i, p in enumerate(pools)}
    ordered = sorted((c for c in changes if c[1] in column), key=lambda c: c[0])
    held = np.zeros((len(ordered), len(pools)))
    asked = np.zeros_like(held)
    for i, (_, pool, dh, da) in enumerate(ordered):
        held[i, column[pool]], asked[i, column[pool]] = dh, da
    return Step(
        pools,
        np.array([capacity[p] for p in pools]),
        np.array([c[0] for c in ordered], dtype=np.float64),
        np.cumsum(held, axis=0),
        np.cumsum(asked, axis=0),
    )


def measured(workspaces: Iterable[int], speed: float) -> Measured:
    """GPU-equivalent hours held, activity-weighted and idle, by the portal's raw telemetry samples."""
    rows = ActivitySample.objects.filter(workspace_id__in=list(workspaces), hourly=False, gpu_active__isnull=False)
    eq = F("workspace__gpu_equivalents")
    totals = rows.aggregate(
        held=Sum(F("gpu_seconds") * eq, output_field=FloatField()),
        active=Sum(F("gpu_active") * F("gpu_seconds") * eq, output_field=FloatField()),
        idle=Sum(F("idle_gpu_seconds") * eq, output_field=FloatField()),
    )
    hours = speed / 3600
    return Measured(*(float(totals[k] or 0) * hours for k in ("held", "active", "idle")))


# -- the run -------------------------------------------------------------------------------------------


def worker_env(speed: float, plain_url: str) -> dict[str, str]:
    """The portal's durations shortened by ``speed``, telemetry scraped from the cluster's dcgm-exporter."""
    return {
        "SCHEDULING_INTERVAL_SECONDS": "0.5",
        "RECONCILE_INTERVAL_SECONDS": "0.5",
        "TELEMETRY_INTERVAL_SECONDS": str(TELEMETRY_INTERVAL_S),
        "TELEMETRY_SOURCE": "scrape",
        "DCGM_SCRAPE_URLS": f"{plain_url}/metrics",
        "IDLE_POLICY_MINUTE_SECONDS": f"{60 / speed:.6g}",
        "PREEMPTION_NOTICE_SECONDS": f"{PREEMPTION_NOTICE_S / speed:.6g}",
        "FAIR_SHARE_HALF_LIFE_SECONDS": f"{HALF_LIFE_S / speed:.6g}",
        "SIMCLUSTER_JOB_SECONDS": "1",  # turns simulated run times on; each job names its own
    }


def run(config: WeekConfig, say: Callable[[str], None] = print) -> WeekResult:
    began = time.monotonic()
    model, arm = config.model, config.arm
    if arm.kind != "portal":
        raise ValueError(f"the full stack runs portal arms; arm {arm.name} is {arm.kind}")
    if arm.dynamic_mig:
        raise ValueError(f"the full stack does not run arms whose MIG layouts follow demand yet (arm {arm.name})")
    if not 0 < config.speed <= 600:
        raise ValueError("speed: at most 600 (the idle rule's minute may not be shorter than 0.1 s)")
    live = [Workspace.State.QUEUED, *Workspace.ACTIVE_STATES]
    if Workspace.objects.exclude(owner__username__startswith=PREFIX).filter(state__in=live).exists():
        raise ValueError("this database has other queued or running workspaces; use a database of its own")
    fleet = Fleet.build(model, whole_gpus_only=arm.whole_gpus_only)
    capacity = {m: u / 1000 for m, u in fleet.quotas.capacity.items()}
    horizon = config.horizon
    cleanup()
    with tempfile.TemporaryDirectory(prefix="labweek-") as tmp:
        folder = Path(tmp)
        port = _free_port()
        nodes_file = whole_gpus_file(model.cluster, folder) if arm.whole_gpus_only else model.cluster
        with benchstack.simcluster_process(
            nodes_file, folder, timings=Timings(start_delay_s=0.0), workload_speed=config.speed, plain_port=port
        ) as sim:
            saved = (settings.KUBECONFIG, settings.CELERY_TASK_DEFAULT_QUEUE, settings.IDLE_POLICY_MINUTE_SECONDS)
            settings.KUBECONFIG = str(sim.kubeconfig)
            settings.IDLE_POLICY_MINUTE_SECONDS = 60 / config.speed
            reset_client()
            queue = f"labweek-{time.monotonic_ns()}"
            settings.CELERY_TASK_DEFAULT_QUEUE = queue
            log = folder / "worker.log"
            env = worker_env(config.speed, f"http://127.0.0.1:{port}")
            worker = benchstack.start_worker(sim.kubeconfig, queue, log, concurrency=config.concurrency, env=env)
            try:
                org = setup_org(model, config.requests, idle_reclaim=arm.idle_reclaim)
                missing = {*arm.job_offerings, *(s for v in (arm.notebook_offerings or {}).values() for s in v)}
                missing -= set(org.offerings)
                if missing:
                    raise ValueError(f"the cluster offers no {', '.join(sorted(missing))}")
                benchstack.wait_ready(worker, log)
                started, origin = time.monotonic(), timezone.now()
                researchers = Researchers(config, org, origin, started)
                researchers.live(horizon, say)
                wall_s = time.monotonic() - started
                researchers.stop_all()
                result = WeekResult(
                    outcome(researchers, horizon, capacity, fleet.gpus),
                    measured(researchers.asked, config.speed),
                    wall_s,
                    0.0,
                    researchers.behind_s,
                )
            finally:
                benchstack.stop_process(worker)
                if not config.keep:
                    cleanup()
                settings.KUBECONFIG, settings.CELERY_TASK_DEFAULT_QUEUE, settings.IDLE_POLICY_MINUTE_SECONDS = saved
                reset_client()
    return replace(result, run_s=time.monotonic() - began)
