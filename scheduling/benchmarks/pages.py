"""Load test of the pages and the API (``manage.py bench_pages``): many people with the portal open at once.

The organisation is the chargeback benchmark's (``chargeback.populate``) at a smaller scale: ``teams`` teams of
five people (60 by default), ``workspaces`` workspaces (10,000) with their ledger rows in last month, of which
the newest ``LIVE_SHARE`` are made live again (half running, half queued) so that the lists carry deadlines,
activity and queue positions. Every team has a lead; there is an operator and a finance user. Each person gets
a session (as after logging in) and an API token, written to a file the load generator reads: logging in
through the form would time the password hash, not the pages.

The portal is served as in production (gunicorn, ``web_workers`` processes x ``web_threads`` threads, DEBUG
off) from a database of its own, made with the test runner's ``create_test_db`` (``test_`` + the configured
name) and dropped afterwards unless ``keep``. Locust (headless, 127.0.0.1 only) then plays, for each number of
concurrent users in ``users``, ``seconds`` of what people do (``locustfile.py``): researchers with their list
or a workspace open (both refresh every 2 s), leads on the team, quota and queue pages, finance on the
chargeback and team cost pages, API clients polling their lists, and a probe on ``/healthz``, the bare view
every endpoint is compared with in the same run.

Meanwhile the portal's own loops write as they do in production (``cluster_at_work``): every reconcile pass
(``RECONCILE_INTERVAL_SECONDS``) the ledger advances the running workspaces' open usage intervals, so their
costs grow; every telemetry pass (``TELEMETRY_INTERVAL_SECONDS``) each running workspace gets a sample. Without
them, unchanged answers would be unchanged for longer than they ever are.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection, connections
from django.db.models import Max
from django.db.models.functions import Now
from django.utils import timezone
from rest_framework.authtoken.models import Token

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.models import UsageInterval
from portal.models import Membership, OrgRole, Team, User
from scheduling.benchmarks import chargeback
from scheduling.benchmarks.chargeback import BenchError
from scheduling.models import ActivitySample
from workspaces.models import Workspace

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
LIVE_SHARE = 0.08  # of the workspaces, the newest, made live again: half running, half queued
BARE = "bare view /healthz"
# What each endpoint must stay within (the targets): its p95 at most RATIO x the bare view's p95 in the
# same run, and under ABSOLUTE_MS with up to STRICT_UP_TO_USERS users.
RATIO = 3.0
ABSOLUTE_MS = 100.0
STRICT_UP_TO_USERS = 50


@dataclass(frozen=True)
class Scenario:
    users: tuple[int, ...] = (50, 200)
    workspaces: int = 10_000
    teams: int = 12
    seconds: int = 30
    web_workers: int = 2
    web_threads: int = 8
    seed: int = 1


@dataclass
class Endpoint:
    name: str
    requests: int
    failures: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    per_second: float
    ratio: float = 0.0  # p95 / the bare view's p95
    within: bool = True


@dataclass
class Level:
    users: int
    seconds: int
    endpoints: list[Endpoint]
    bare_p95_ms: float
    per_second: float
    failures: int


@dataclass
class Result:
    scenario: Scenario
    workspaces: int
    people: int
    seed_s: float
    levels: list[Level] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return all(e.within for level in self.levels for e in level.endpoints) and not any(
            level.failures for level in self.levels
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"met": self.met}


# --- the organisation and its people ------------------------------------------------------------------


def populate(scenario: Scenario, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """The organisation, its workspaces and a session and token for each person; answers the people."""
    month = periods.previous_month(periods.month_of(timezone.now(), zone()))
    org = chargeback.Scenario(
        workspaces=scenario.workspaces,
        concurrent=max(1, scenario.workspaces // 40),
        nodes=max(4, scenario.teams * 4),
        teams=scenario.teams,
        seed=scenario.seed,
        month=month,
    )
    world, _ = chargeback.populate(org, progress)
    _make_some_live(scenario)
    leads = [members[0] for members in world.members.values()]
    Membership.objects.filter(user_id__in=leads).update(role=Membership.Role.LEAD)
    operator = User.objects.create(username=f"{chargeback.PREFIX}-operator", first_name="Operator")
    OrgRole.objects.create(user=operator, role=OrgRole.Role.OPERATOR)
    people: list[dict[str, Any]] = []
    team_of = {user: team for team, members in world.members.items() for user in members}
    users = User.objects.filter(username__startswith=f"{chargeback.PREFIX}-").order_by("pk")
    for user in users:
        if user.pk == operator.pk:
            role = "operator"
        elif user.pk == world.finance.pk:
            role = "finance"
        else:
            role = "lead" if user.pk in leads else "member"
        team = team_of.get(user.pk)
        people.append(
            {
                "role": role,
                "username": user.username,
                "session": _session(user),
                "token": Token.objects.create(user=user).key,
                "team": team,
                "workspaces": _some_workspaces(team),
                "month": month.strftime("%Y-%m"),
                "any_team": world.teams[0].pk,
            }
        )
    return people


def _make_some_live(scenario: Scenario) -> None:
    """The newest workspaces run or wait again, so lists show deadlines, activity and queue positions."""
    newest = list(
        Workspace.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)[
            : int(scenario.workspaces * LIVE_SHARE)
        ]
    )
    running, queued = newest[::2], newest[1::2]
    now = timezone.now()
    Workspace.objects.filter(pk__in=running).update(
        state=Workspace.State.RUNNING, started_at=now - timedelta(hours=2), finished_at=None, reason="Running."
    )
    Workspace.objects.filter(pk__in=queued).update(
        state=Workspace.State.QUEUED, admitted_at=None, started_at=None, finished_at=None, reason="Waiting in line."
    )


def _session(user: User) -> str:
    """A logged-in session, as ``django.contrib.auth.login`` leaves it."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    assert session.session_key is not None
    return session.session_key


def _some_workspaces(team: int | None) -> list[int]:
    """A few of the team's workspaces, live ones first: the detail pages its people keep open."""
    if team is None:
        return []
    live = Workspace.State.RUNNING, Workspace.State.QUEUED
    rows = Workspace.objects.filter(team_id=team).order_by("-created_at").values_list("pk", "state")[:200]
    ordered = sorted(rows, key=lambda row: row[1] not in live)
    return [pk for pk, _ in ordered[:5]]


# --- what the portal's own loops write meanwhile ------------------------------------------------------


def _open_intervals(running: list[int]) -> None:
    """An open usage interval, charged this month, for each running workspace that has none: a copy of its
    newest interval (the organisation's ledger is last month's), as the ledger opens one for a running pod."""
    now = timezone.now()
    month = periods.month_of(now, zone())
    has_open = set(
        UsageInterval.objects.filter(workspace_id__in=running, ended_at=None).values_list("workspace_id", flat=True)
    )
    newest = (
        UsageInterval.objects.filter(workspace_id__in=set(running) - has_open)
        .values("workspace_id")
        .annotate(newest=Max("pk"))
        .values_list("newest", flat=True)
    )
    opened = []
    for interval in UsageInterval.objects.filter(pk__in=list(newest)):
        interval.pk = None
        interval.pod_uid = f"{interval.pod_uid[:50]}-live"
        interval.started_at = max(now - timedelta(hours=2), periods.month_start(month, zone()))
        interval.last_seen_at, interval.ended_at, interval.period, interval.adjusts = now, None, month, None
        interval.measured_gpu_seconds = interval.used_gpu_seconds = interval.idle_gpu_seconds = 0.0
        opened.append(interval)
    UsageInterval.objects.bulk_create(opened, batch_size=1000)


def _sample(workspace_id: int, now: Any, rng: random.Random) -> ActivitySample:
    seconds = round(settings.TELEMETRY_INTERVAL_SECONDS)
    active = rng.choice((0.0, 0.02, 0.35, 0.8, 0.95))
    return ActivitySample(
        workspace_id=workspace_id, at=now, seconds=seconds, gpu_seconds=seconds,
        idle_gpu_seconds=seconds if active < 0.05 else 0, source=ActivitySample.Source.PROMETHEUS,
        gpu_active=active, gpu_observed_at=now, fb_used_mib=rng.uniform(1000, 9000), fb_total_mib=9984.0,
    )  # fmt: skip


@contextmanager
def cluster_at_work(seed: int) -> Iterator[None]:
    """Until the block ends, a thread writes what reconcile and telemetry write for the running workspaces."""
    running = list(Workspace.objects.filter(state=Workspace.State.RUNNING).values_list("pk", flat=True))
    _open_intervals(running)
    stop = threading.Event()
    rng = random.Random(seed)

    def work() -> None:
        reconcile, telemetry = settings.RECONCILE_INTERVAL_SECONDS, settings.TELEMETRY_INTERVAL_SECONDS
        next_reconcile = next_telemetry = time.monotonic()
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_reconcile:
                    UsageInterval.objects.filter(workspace_id__in=running, ended_at=None).update(last_seen_at=Now())
                    next_reconcile = now + reconcile
                if now >= next_telemetry:
                    at = timezone.now()
                    ActivitySample.objects.bulk_create(_sample(pk, at, rng) for pk in running)
                    next_telemetry = now + telemetry
                stop.wait(max(0.0, min(next_reconcile, next_telemetry) - time.monotonic()))
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, name="cluster-at-work", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


# --- the database, the server and the load generator --------------------------------------------------


@contextmanager
def own_database(keep: bool, progress: Callable[[str], None]) -> Iterator[bool]:
    """Switch this process to a database of its own (``test_<name>``, migrated); answers whether it already
    held a kept organisation. Dropped at the end unless ``keep``."""
    if connection.vendor != "postgresql":
        raise BenchError("the load test needs PostgreSQL: set DATABASE_URL")
    original = connection.settings_dict["NAME"]
    progress("making the load test's database (migrations)")
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=keep)
    try:
        yield Team.objects.filter(slug__startswith=f"{chargeback.PREFIX}-").exists()
    finally:
        if not keep:
            connection.creation.destroy_test_db(original, verbosity=0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def served(scenario: Scenario, log: Path) -> Iterator[str]:
    """gunicorn on a free loopback port, serving the load test's database with DEBUG off; answers its URL."""
    port = _free_port()
    env = dict(
        os.environ,
        PORTAL_ENV="demo",  # DEBUG off, static files from the source tree (production wants collectstatic)
        DATABASE_URL=_database_url(),
        DJANGO_SECRET_KEY=settings.SECRET_KEY,  # the sessions made here are signed with it
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    argv = [
        sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"127.0.0.1:{port}",
        "--workers", str(scenario.web_workers), "--threads", str(scenario.web_threads), "--log-level", "warning",
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"gunicorn exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):  # noqa: S310 (our own loopback URL)
                return
        except OSError:
            time.sleep(0.3)
    raise BenchError("gunicorn did not answer /healthz within 60 s")


def run_locust(url: str, users: int, scenario: Scenario, people: Path, out: Path) -> Path:
    """One headless Locust run of ``users`` concurrent users for ``scenario.seconds``; answers its stats CSV."""
    prefix = out / f"users-{users}"
    argv = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", url,
        "--users", str(users), "--spawn-rate", str(max(1, users // 5)), "--run-time", f"{scenario.seconds}s",
        "--stop-timeout", "5", "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", "--reset-stats",
    ]  # fmt: skip
    env = dict(os.environ, GPUPORTAL_LOAD_PEOPLE=str(people), GPUPORTAL_LOAD_SEED=str(scenario.seed))
    with (out / f"locust-{users}.log").open("ab") as log:
        # Locust exits 1 when any request failed; the failures are counted from its figures instead.
        subprocess.run(  # noqa: S603 - our own interpreter and arguments
            argv, cwd=ROOT, env=env, stdout=log, stderr=log, check=False, timeout=scenario.seconds + 120
        )
    stats = Path(f"{prefix}_stats.csv")
    if not stats.exists():
        raise BenchError(f"locust wrote no figures; see {out / f'locust-{users}.log'}")
    return stats


def read_level(stats: Path, users: int, seconds: int, *, strict_ms: float | None) -> Level:
    """Locust's per-endpoint figures, each held to the bare view's p95 (and ``strict_ms`` where given)."""
    rows = [row for row in csv.DictReader(stats.open()) if row["Name"] != "Aggregated"]
    aggregated = next(row for row in csv.DictReader(stats.open()) if row["Name"] == "Aggregated")
    endpoints = [
        Endpoint(
            name=row["Name"],
            requests=int(row["Request Count"]),
            failures=int(row["Failure Count"]),
            p50_ms=float(row["50%"]),
            p95_ms=float(row["95%"]),
            p99_ms=float(row["99%"]),
            per_second=float(row["Requests/s"]),
        )
        for row in rows
        if row["Request Count"] != "0"  # Locust writes N/A for the percentiles of what it never asked
    ]
    bare = next((e for e in endpoints if e.name == BARE), None)
    if bare is None or not bare.requests:
        raise BenchError("the run has no figures for the bare view")
    for endpoint in endpoints:
        endpoint.ratio = endpoint.p95_ms / bare.p95_ms if bare.p95_ms else 0.0
        endpoint.within = endpoint.ratio <= RATIO and (strict_ms is None or endpoint.p95_ms < strict_ms)
    endpoints.sort(key=lambda e: (e.name != BARE, e.name))
    return Level(
        users=users,
        seconds=seconds,
        endpoints=endpoints,
        bare_p95_ms=bare.p95_ms,
        per_second=float(aggregated["Requests/s"]),
        failures=int(aggregated["Failure Count"]),
    )


def run(scenario: Scenario, *, keep: bool, progress: Callable[[str], None], out: Path) -> Result:
    out.mkdir(parents=True, exist_ok=True)
    with own_database(keep, progress) as kept:
        people_file = out / "people.json"
        began = time.perf_counter()
        if kept and people_file.exists():
            progress("using the organisation kept by an earlier run (--keep)")
        else:
            if kept:
                raise BenchError(f"the kept database has no {people_file}: run once without --keep to start over")
            people_file.write_text(json.dumps(populate(scenario, progress)))
        seed_s = time.perf_counter() - began
        people = json.loads(people_file.read_text())
        result = Result(scenario, Workspace.objects.count(), len(people), seed_s)
        connection.close()  # the server's connections, not ours, for the run
        with served(scenario, out / "gunicorn.log") as url:
            for users in scenario.users:
                progress(f"{users} users for {scenario.seconds} s")
                with cluster_at_work(scenario.seed):
                    stats = run_locust(url, users, scenario, people_file, out)
                strict = ABSOLUTE_MS if users <= STRICT_UP_TO_USERS else None
                result.levels.append(read_level(stats, users, scenario.seconds, strict_ms=strict))
    return result


def table(result: Result) -> Sequence[str]:
    lines = [
        f"{result.workspaces:,} workspaces, {result.people} people; web: gunicorn {result.scenario.web_workers} "
        f"workers x {result.scenario.web_threads} threads; organisation ready in {result.seed_s:.0f} s",
    ]
    for level in result.levels:
        lines.append("")
        lines.append(
            f"{level.users} users, {level.seconds} s: {level.per_second:.0f} requests/s, {level.failures} failed; "
            f"bare view p95 {level.bare_p95_ms:.0f} ms"
        )
        lines.append(f"{'endpoint':44} {'requests':>8} {'fail':>5} {'p50':>6} {'p95':>6} {'p99':>6} {'req/s':>6} "
                     f"{'p95/bare':>8}  ok")  # fmt: skip
        for e in level.endpoints:
            lines.append(
                f"{e.name[:44]:44} {e.requests:8d} {e.failures:5d} {e.p50_ms:6.0f} {e.p95_ms:6.0f} {e.p99_ms:6.0f} "
                f"{e.per_second:6.1f} {e.ratio:8.1f}  {'yes' if e.within else 'NO'}"
            )
    lines.append("")
    lines.append(
        f"targets: p95 at most {RATIO:g}x the bare view's in the same run, and under {ABSOLUTE_MS:g} ms with up "
        f"to {STRICT_UP_TO_USERS} users: {'met' if result.met else 'NOT met'}"
    )
    return lines
