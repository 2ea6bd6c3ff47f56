"""Run the whole demo stack in the foreground: web server and Celery worker as child processes.

On the embedded defaults (SQLite, a folder as the Celery broker) nothing else must be installed.
Ctrl-C stops every child; a child that dies stops the others, so a broken demo never half-runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None


class Command(BaseCommand):
    help = "Serve the portal with its demo stack (web, Celery worker) until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, **options: Any) -> None:
        for folder in ("queue", "processed"):
            (settings.VAR_DIR / "broker" / folder).mkdir(parents=True, exist_ok=True)
        python = sys.executable
        address = f"{options['host']}:{options['port']}"
        children = [
            Child(
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "portal",
                    "worker",
                    "-l",
                    "warning",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "4",
                    "--without-gossip",
                    "--without-mingle",
                ],
            ),
            Child("web", [python, "manage.py", "runserver", address, "--noreload"]),
        ]
        base_env = dict(os.environ, PORTAL_ENV=settings.PORTAL_ENV)
        for child in children:
            child.process = subprocess.Popen(child.argv, env=base_env | child.env, cwd=settings.BASE_DIR)  # noqa: S603
        self.stdout.write(self.style.SUCCESS(f"Portal demo on http://{address}/ (Ctrl-C stops it)"))
        try:
            self._wait(children)
        except KeyboardInterrupt:
            pass
        finally:
            self._stop(children)

    def _wait(self, children: list[Child]) -> None:
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
