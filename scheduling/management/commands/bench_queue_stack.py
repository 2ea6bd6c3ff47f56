"""Queue benchmark, full-stack mode: Kueue's baseline scenario in real time through the whole portal.

Starts a simulated cluster sized to the scenario's total nominal quota and a real Celery worker with beat
as child processes, creates the scenario's teams, quotas and workspaces (training jobs) as the API does,
waits until every job has run, prints Kueue's five figures beside Kueue's averages plus admissions per
second, preemptions and where the CPU time went, and removes what it created. Needs PostgreSQL and Redis
(DATABASE_URL, REDIS_URL), a migrated database of its own (it refuses one with other queued or running
workspaces, which its worker would act on). See ``scheduling/benchmarks/stack_queue.py`` for the mapping and
the definitions.

    manage.py bench_queue_stack --scale 0.02        # a fiftieth of every stream: 300 workloads
    manage.py bench_queue_stack --json out.json     # the full scenario (15,000 workloads)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from scheduling.benchmarks.queue_sim import DEFAULT_SCENARIO
from scheduling.benchmarks.stack_queue import StackConfig, report_lines, run, to_json


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: Any) -> None:
        defaults = StackConfig()
        parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario YAML (Kueue's shape)")
        parser.add_argument("--scale", type=float, default=1.0, help="fraction of every stream's count (default 1)")
        parser.add_argument(
            "--speed",
            type=float,
            default=None,
            help="simulated cluster clock (default: slowest with whole-second runtimes)",
        )
        parser.add_argument("--concurrency", type=int, default=defaults.concurrency, help="worker pool processes")
        parser.add_argument("--creators", type=int, default=defaults.creators, help="threads creating workspaces")
        parser.add_argument("--notice", type=float, default=defaults.notice_s, help="preemption notice (s)")
        parser.add_argument(
            "--reconcile-interval",
            type=float,
            default=defaults.reconcile_interval_s,
            help=f"beat's reconcile pass (s; default {defaults.reconcile_interval_s:g}; the portal's own is 5)",
        )
        parser.add_argument("--timeout", type=float, default=defaults.timeout_s, help="give up after (s)")
        parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
        parser.add_argument("--keep", action="store_true", help="keep the benchmark's rows for inspection")

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql" or not settings.REDIS_URL:
            raise CommandError("the full stack needs PostgreSQL and Redis: set DATABASE_URL and REDIS_URL")
        config = stack_config(options)
        try:
            result = run(config, say=lambda line: self.stdout.write(line))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("\n".join(report_lines(result)))
        if options["json"]:
            options["json"].write_text(json.dumps(to_json(result), indent=2) + "\n")
            self.stdout.write(f"figures written to {options['json']}")


def stack_config(options: dict[str, Any]) -> StackConfig:
    """The run the command line asks for."""
    return StackConfig(
        scenario=options["scenario"],
        scale=options["scale"],
        speed=options["speed"],
        concurrency=options["concurrency"],
        creators=options["creators"],
        notice_s=options["notice"],
        reconcile_interval_s=options["reconcile_interval"],
        timeout_s=options["timeout"],
        keep=options["keep"],
    )
