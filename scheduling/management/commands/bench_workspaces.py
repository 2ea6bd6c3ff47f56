"""Benchmark: request-to-running latency of notebooks through the full stack on a simulated cluster.

Starts a simulated cluster (16 nodes of 8 H100s) in this process and a real Celery worker (with beat) as a
child process, requests N one-GPU notebooks the way the API does, and prints the median, p95 and worst
time from request to running (``scheduling/benchmarks/workspaces.py``). Use PostgreSQL and Redis
(DATABASE_URL, REDIS_URL) for figures that mean something; the embedded SQLite demo database serialises the
worker's writes. Everything it creates is removed at the end.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from scheduling.benchmarks.workspaces import run_benchmark


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=100, help="notebooks to request (default 100, at most 128)")
        parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        latencies = run_benchmark(options["count"], options["timeout"])
        style = self.style.SUCCESS if latencies.seconds else self.style.ERROR
        self.stdout.write(style(latencies.summary()))
