"""Benchmark: request-to-running latency of notebooks through the full stack on a simulated cluster.

Starts a simulated cluster (16 nodes of 8 H100s) in this process and a real Celery worker (with beat) as a
child process, requests N one-GPU notebooks the way the API does, and prints the median, p95 and worst
time from request to running. Use PostgreSQL and Redis (DATABASE_URL, REDIS_URL) for figures that mean
something; the embedded SQLite demo database serialises the worker's writes. Everything it creates (a
``bench`` team, user, offering, quota and workspaces) is removed at the end.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.models import Department, Membership, Team, User
from scheduling.benchmarks.stack import cluster_file, start_worker, whole_gpu_offering
from scheduling.kube.client import reset_client
from scheduling.models import TeamQuota
from scheduling.simcluster.controllers import Timings
from scheduling.simcluster.testing import running_simcluster
from workspaces import actions
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

NODES = 16


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--count", type=int, default=100, help="notebooks to request (default 100)")
        parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        count = min(options["count"], NODES * 8)
        with (
            tempfile.TemporaryDirectory() as tmp,
            running_simcluster(
                cluster_file(Path(tmp), NODES), tmp_dir=tmp, timings=Timings(start_delay_s=1.0)
            ) as cluster,
        ):
            settings.KUBECONFIG = str(cluster.kubeconfig_path)
            reset_client()
            queue = f"bench-{os.getpid()}"
            settings.CELERY_TASK_DEFAULT_QUEUE = queue
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            worker = start_worker(cluster.kubeconfig_path, queue, settings.VAR_DIR / "bench-worker.log")
            try:
                user, team, offering = self._setup()
                latencies = self._run(user, team, offering, count, options["timeout"])
            finally:
                worker.terminate()
                worker.wait(timeout=30)
                self._cleanup()
        self._report(latencies, count)

    def _setup(self) -> tuple[User, Team, GpuOffering]:
        self._cleanup()
        department, _ = Department.objects.get_or_create(
            slug="bench", defaults={"name": "Bench", "cost_centre": "BENCH"}
        )
        team = Team.objects.create(department=department, name="Bench", slug="bench")
        user = User.objects.create_user("bench-user")
        Membership.objects.create(team=team, user=user)
        offering = whole_gpu_offering("bench-h100")
        TeamQuota.objects.create(team=team, flavour=offering.flavour, guaranteed=Decimal(1000))
        return user, team, offering

    def _run(self, user: User, team: Team, offering: GpuOffering, count: int, timeout: float) -> list[float]:
        data = {
            "kind": "notebook",
            "team": team,
            "offering": offering,
            "gpu_count": 1,
            "workers": 1,
            "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
            "command": [],
            "env": {},
            "cpu_millis": 2000,
            "memory_mib": 8192,
            "max_runtime_seconds": 3600,
            "home_volume_gib": 1,
            "gpu_equivalents": offering.gpu_equivalents,
            "priority": Workspace.Priority.INTERACTIVE,
        }
        started = time.monotonic()
        ids = [actions.do_request_workspace(user, data | {"name": f"nb-{i}"}).pk for i in range(count)]
        self.stdout.write(f"requested {count} notebooks in {time.monotonic() - started:.1f} s; waiting")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = Workspace.objects.filter(pk__in=ids, state=Workspace.State.RUNNING).count()
            if running == count:
                break
            time.sleep(0.5)
        latencies = []
        for workspace in Workspace.objects.filter(pk__in=ids):
            event = WorkspaceEvent.objects.filter(workspace=workspace, to_state="running").order_by("at").first()
            if event:
                latencies.append((event.at - workspace.created_at).total_seconds())
        return latencies

    def _cleanup(self) -> None:
        Workspace.objects.filter(team__slug="bench").delete()
        TeamQuota.objects.filter(team__slug="bench").delete()
        GpuOffering.objects.filter(slug="bench-h100").delete()
        Membership.objects.filter(team__slug="bench").delete()
        Team.objects.filter(slug="bench").delete()
        User.objects.filter(username="bench-user").delete()

    def _report(self, latencies: list[float], count: int) -> None:
        if not latencies:
            self.stdout.write(self.style.ERROR("no notebook reached running"))
            return
        ordered = sorted(latencies)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
        self.stdout.write(
            f"request-to-running over {len(latencies)}/{count} notebooks ({settings.DATABASES['default']['ENGINE']}, "
            f"broker {settings.CELERY_BROKER_URL.split(':')[0]}): median {statistics.median(ordered):.2f} s, "
            f"p95 {p95:.2f} s, max {ordered[-1]:.2f} s (simulated image start 1 s)"
        )
