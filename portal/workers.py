"""The command line of a Celery worker with embedded beat, as the demo, the benchmarks and the tests start one."""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings

from portal.queue import control_queue


def worker_argv(
    *, schedule: Path, name: str, queue: str | None = None, pool: str = "prefork", concurrency: int = 3,
    loglevel: str = "info",
) -> list[str]:  # fmt: skip
    """``prefork`` uses Celery's event loop on Redis; ``threads`` suits the demo's folder broker (no Redis).
    It consumes ``queue`` (default: the settings') and its control queue."""
    argv = [
        sys.executable, "-m", "celery", "-A", "portal", "worker", "--beat", "--schedule", str(schedule),
        "-l", loglevel, "--pool", pool, "--concurrency", str(concurrency),
        # One worker per host here: gossip and mingle would only slow start-up.
        "--without-gossip", "--without-mingle", "-n", f"{name}@%h",
    ]  # fmt: skip
    default = queue or str(settings.CELERY_TASK_DEFAULT_QUEUE)
    return [*argv, "-Q", f"{default},{control_queue(default)}"]
