"""Run the whole demo stack in the foreground: simulated cluster, Celery worker with beat, web server.

On the embedded defaults (SQLite, a folder as the Celery broker, the simulated cluster) nothing else must
be installed. Ctrl-C stops every child; a child that dies stops the others, so a broken demo never
half-runs. The simulated cluster lives in memory: each start begins with an empty cluster, and the
reconcile loop re-creates what the database says should run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from portal.billing.demo import seed_billing_history
from portal.workers import worker_argv
from scheduling.demo import seed_activity_history, seed_demo_history
from scheduling.kube.client import kube, reset_client
from scheduling.loops import metering


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None)
    log: Path | None = None  # its output goes here instead of the terminal


def _prometheus(plain_port: int) -> tuple[Child | None, dict[str, str]]:
    """Debian's Prometheus scraping the simulated dcgm-exporter page, when it is installed and no telemetry
    source was chosen; else the demo reads that page directly (``TELEMETRY_SOURCE=scrape``)."""
    binary = shutil.which("prometheus")
    if "TELEMETRY_SOURCE" in os.environ or binary is None:
        source = os.environ.get("TELEMETRY_SOURCE", "scrape")
        urls = os.environ.get("DCGM_SCRAPE_URLS", f"http://127.0.0.1:{plain_port}/metrics")
        return None, {"TELEMETRY_SOURCE": source, "DCGM_SCRAPE_URLS": urls}
    config = settings.VAR_DIR / "prometheus.yml"
    scrape = {"job_name": "dcgm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{plain_port}"]}]}
    # JSON is YAML: no YAML writer needed.
    config.write_text(json.dumps({"global": {"scrape_interval": "5s"}, "scrape_configs": [scrape]}))
    address = f"127.0.0.1:{_free_port()}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={settings.VAR_DIR / 'prometheus'}",
        "--storage.tsdb.retention.time=2d",
        f"--web.listen-address={address}",
    ]
    child = Child("prometheus", argv, log=settings.VAR_DIR / "prometheus.log")
    return child, {"TELEMETRY_SOURCE": "prometheus", "PROMETHEUS_URL": f"http://{address}"}


class Command(BaseCommand):
    help = "Serve the portal with its demo stack (simulated cluster, worker, beat, web) until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--cluster", type=Path, default=None, help="simulated cluster YAML (default: demo)")

    def handle(self, *args: Any, **options: Any) -> None:
        # `kill` or a supervisor's stop should end the children too, as Ctrl-C does.
        signal.signal(signal.SIGTERM, _interrupt)
        python = sys.executable
        kubeconfig = settings.VAR_DIR / "kubeconfig"
        kubeconfig.unlink(missing_ok=True)
        plain_port = _free_port()
        env = dict(
            os.environ,
            PORTAL_ENV=settings.PORTAL_ENV,
            KUBECONFIG=str(kubeconfig),
            # Short loops keep the demo snappy: a request runs within seconds.
            SCHEDULING_INTERVAL_SECONDS=os.environ.get("SCHEDULING_INTERVAL_SECONDS", "2"),
            RECONCILE_INTERVAL_SECONDS=os.environ.get("RECONCILE_INTERVAL_SECONDS", "1"),
            # Notebook links through the simulator's plain-HTTP door: its API server's certificate is
            # self-signed, which a browser would stop at.
            NOTEBOOK_PROXY_URL=f"http://127.0.0.1:{plain_port}",
        )
        prometheus, telemetry = _prometheus(plain_port)
        env |= telemetry
        cluster_args = ["--nodes", str(options["cluster"])] if options["cluster"] else []
        cluster = Child(
            "simcluster",
            [
                python,
                "-m",
                "scheduling.simcluster",
                "--kubeconfig",
                str(kubeconfig),
                "--start-delay",
                "2",
                "--plain-port",
                str(plain_port),
                *cluster_args,
            ],
        )
        children = [cluster, *([prometheus] if prometheus else [])]
        try:
            for child in children:
                self._start(child, env)
            self._wait_for(kubeconfig, cluster)
            settings.KUBECONFIG = str(kubeconfig)
            reset_client()
            call_command("discover_offerings", "--apply", stdout=self.stdout)
            if made := seed_demo_history(timezone.now()):
                self.stdout.write(f"Added a week of demo history ({made} finished workspaces).")
            fleet = metering.gpus_by_model(kube().list("Node", None, ""))
            if made := seed_billing_history(timezone.now(), fleet):
                seed_activity_history(timezone.now())
                self.stdout.write(f"Added months of billing history ({made} ledger intervals).")
            address = f"{options['host']}:{options['port']}"
            schedule = settings.VAR_DIR / "celerybeat-schedule"
            children += [
                Child(
                    "worker",
                    worker_argv(schedule=schedule, name="demo", pool="threads", concurrency=4, loglevel="warning"),
                ),
                Child("web", [python, "manage.py", "runserver", address, "--noreload"]),
            ]
            for child in children[-2:]:
                self._start(child, env)
            source = f"Prometheus at {env['PROMETHEUS_URL']}" if prometheus else env["TELEMETRY_SOURCE"] or "off"
            self.stdout.write(f"GPU telemetry: {source}.")
            self.stdout.write(self.style.SUCCESS(f"Portal demo on http://{address}/ (Ctrl-C stops it)"))
            self._watch(children)
        except KeyboardInterrupt:
            pass
        finally:
            self._stop(children)

    def _start(self, child: Child, env: dict[str, str]) -> None:
        if child.log is None:
            child.process = subprocess.Popen(child.argv, env=env, cwd=settings.BASE_DIR)  # noqa: S603
            return
        with child.log.open("ab") as out:
            child.process = subprocess.Popen(child.argv, env=env, cwd=settings.BASE_DIR, stdout=out, stderr=out)  # noqa: S603

    def _wait_for(self, kubeconfig: Path, cluster: Child) -> None:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            assert cluster.process is not None
            if cluster.process.poll() is not None or time.monotonic() > deadline:
                raise CommandError("The simulated cluster did not start; see its output above.")
            time.sleep(0.2)

    def _watch(self, children: list[Child]) -> None:
        while True:
            for child in children:
                assert child.process is not None
                code = child.process.poll()
                if code is not None:
                    self.stderr.write(f"{child.name} exited with status {code}; stopping the demo.")
                    return
            time.sleep(0.5)

    def _stop(self, children: list[Child]) -> None:
        for child in reversed(children):
            if child.process and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for child in children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
