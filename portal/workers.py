"""The command line of a Celery worker, as the demo, the benchmarks and the tests start one."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from portal.queue import portal_queues


def worker_argv(
    *, schedule: Path | None, name: str, queue: str | None = None, consume: Sequence[str] | None = None,
    pool: str = "prefork", concurrency: int = 3, loglevel: str = "info",
) -> list[str]:  # fmt: skip
    """``prefork`` uses Celery's event loop on Redis; ``threads`` suits the demo's folder broker (no Redis).
    Embedded beat keeps its state in ``schedule`` (None: no beat). The worker consumes ``consume``, by
    default every queue of ``queue`` (default: the settings'): itself, its control and scheduler queues."""
    argv = [
        sys.executable, "-m", "celery", "-A", "portal", "worker",
        *(["--beat", "--schedule", str(schedule)] if schedule else []),
        "-l", loglevel, "--pool", pool, "--concurrency", str(concurrency),
        # One worker per host here: gossip and mingle would only slow start-up.
        "--without-gossip", "--without-mingle", "-n", f"{name}@%h",
    ]  # fmt: skip
    queues = consume or portal_queues(queue or str(settings.CELERY_TASK_DEFAULT_QUEUE))
    return [*argv, "-Q", ",".join(queues)]
