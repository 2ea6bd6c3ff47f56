"""Request-to-running latency of notebooks through the full stack on a simulated cluster.

A simulated cluster (16 nodes of 8 H100s) runs in this process and a real Celery worker (with beat) as a
child process; N one-GPU notebooks are requested through ``workspaces.actions`` as the API does, and the
time from request to running is measured per notebook. Everything it creates (a ``bench`` team, user,
offering, catalogue image, quota and workspaces) is removed at the end.
"""

from __future__ import annotations

import itertools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from portal.billing.models import UsageInterval
from portal.models import Department, Membership, Team, User
from scheduling.benchmarks.stack import cluster_file, start_worker, wait_ready, whole_gpu_offering
from scheduling.kube.client import reset_client
from scheduling.models import TeamQuota
from scheduling.simcluster.controllers import Timings
from scheduling.simcluster.testing import running_simcluster
from workspaces import actions
from workspaces.models import GpuOffering, Image, Workspace, WorkspaceEvent

NODES = 16
SLUG = "bench"
IMAGE = "quay.io/jupyter/scipy-notebook:2025-06-02"
STEPS = ("admitted", "provisioning", "running")


@dataclass(frozen=True)
class Latencies:
    requested: int
    seconds: list[float]  # request to running, for those that got there
    # Median seconds of each step, for those that got there: request -> admitted -> objects created -> running.
    steps: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        if not self.seconds:
            return "no notebook reached running"
        ordered = sorted(self.seconds)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
        return (
            f"request-to-running over {len(ordered)}/{self.requested} notebooks "
            f"({settings.DATABASES['default']['ENGINE']}, broker {settings.CELERY_BROKER_URL.split(':')[0]}): "
            f"median {statistics.median(ordered):.2f} s, p95 {p95:.2f} s, max {ordered[-1]:.2f} s "
            "(simulated image start 1 s); median per step: "
            + ", ".join(f"{step} {seconds:.2f} s" for step, seconds in self.steps.items())
        )


def run_benchmark(count: int, timeout: float) -> Latencies:
    count = min(count, NODES * 8)
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_simcluster(cluster_file(Path(tmp), NODES), tmp_dir=tmp, timings=Timings(start_delay_s=1.0)) as cluster,
    ):
        settings.KUBECONFIG = str(cluster.kubeconfig_path)
        reset_client()
        queue = f"bench-{os.getpid()}"
        settings.CELERY_TASK_DEFAULT_QUEUE = queue
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        log = settings.VAR_DIR / "bench-worker.log"
        worker = start_worker(cluster.kubeconfig_path, queue, log)
        try:
            user, team, offering = _setup()
            wait_ready(worker, log)  # what is timed is the portal's latency, not the worker's start
            return _request_and_wait(user, team, offering, count, timeout)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            _cleanup()


def _setup() -> tuple[User, Team, GpuOffering]:
    _cleanup()
    department, _ = Department.objects.get_or_create(slug=SLUG, defaults={"name": "Bench", "cost_centre": "BENCH"})
    team = Team.objects.create(department=department, name="Bench", slug=SLUG)
    user = User.objects.create_user("bench-user")
    Membership.objects.create(team=team, user=user)
    offering = whole_gpu_offering("bench-h100")
    Image.objects.create(slug="bench-notebook", display_name="Bench notebook", reference=IMAGE, kind="notebook")
    TeamQuota.objects.create(team=team, flavour=offering.flavour, guaranteed=Decimal(1000))
    return user, team, offering


def _request_and_wait(user: User, team: Team, offering: GpuOffering, count: int, timeout: float) -> Latencies:
    data = {
        "kind": Workspace.Kind.NOTEBOOK,
        "team": team,
        "offering": offering,
        "gpu_count": 1,
        "workers": 1,
        "image": IMAGE,
        "command": [],
        "env": {},
        "cpu_millis": 2000,
        "memory_mib": 8192,
        "max_runtime_hours": 1,
        "home_volume_gib": 1,
        "gpu_equivalents": offering.gpu_equivalents,
        "priority": Workspace.Priority.INTERACTIVE,
    }
    ids = [actions.do_request_workspace(user, data | {"name": f"nb-{i}"}).pk for i in range(count)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Workspace.objects.filter(pk__in=ids, state=Workspace.State.RUNNING).count() == count:
            break
        time.sleep(0.5)
    # When each workspace first entered each state, from its timeline (one query).
    entered: dict[int, dict[str, datetime]] = {pk: {} for pk in ids}
    events = WorkspaceEvent.objects.filter(workspace__in=ids, to_state__in=STEPS).order_by("at")
    for pk, state, at in events.values_list("workspace", "to_state", "at"):
        entered[pk].setdefault(state, at)
    created = dict(Workspace.objects.filter(pk__in=ids).values_list("pk", "created_at"))
    done = [pk for pk in ids if "running" in entered[pk]]
    seconds = [(entered[pk]["running"] - created[pk]).total_seconds() for pk in done]
    steps: dict[str, float] = {}
    for before, after in itertools.pairwise(["requested", *STEPS]):
        spans = [
            (entered[pk][after] - (created[pk] if before == "requested" else entered[pk][before])).total_seconds()
            for pk in done
            if after in entered[pk] and (before == "requested" or before in entered[pk])
        ]
        if spans:
            steps[f"{before} -> {after}"] = statistics.median(spans)
    return Latencies(count, seconds, steps)


def _cleanup() -> None:
    UsageInterval.objects.filter(team__slug=SLUG).delete()  # the ledger protects the workspaces it bills
    Workspace.objects.filter(team__slug=SLUG).delete()
    TeamQuota.objects.filter(team__slug=SLUG).delete()
    GpuOffering.objects.filter(slug="bench-h100").delete()
    Image.objects.filter(slug="bench-notebook").delete()
    Membership.objects.filter(team__slug=SLUG).delete()
    Team.objects.filter(slug=SLUG).delete()
    User.objects.filter(username="bench-user").delete()
