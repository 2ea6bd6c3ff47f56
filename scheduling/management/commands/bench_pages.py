"""Load test: the pages and the API with many people at once, each endpoint's p50/p95/p99 and requests per
second beside a bare view (``/healthz``) measured in the same run. Scenario: ``scheduling/benchmarks/pages.py``.

Needs PostgreSQL (``DATABASE_URL``); the test runs in a database of its own (``test_`` + the configured name,
which need not exist), dropped afterwards unless ``--keep``. ``PORTAL_ENV=demo`` serves it with the demo's
settings (DEBUG off, a fixed secret key)::

    PORTAL_ENV=demo DATABASE_URL=postgres://postgres@127.0.0.1:5432/pages REDIS_URL=redis://127.0.0.1:6379/12 \
        python manage.py bench_pages

Defaults: 10,000 workspaces, 12 teams of five (60 people), gunicorn 2 workers x 8 threads, 50 then 200
concurrent users for 30 s each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.benchmarks.chargeback import BenchError
from scheduling.benchmarks.pages import Scenario, run, table
from scheduling.management.commands._bench import add_common_arguments, scenario_from


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of user counts like 50,200") from None
    if not counts or min(counts) < 1 or max(counts) > 1000:
        raise argparse.ArgumentTypeError("user counts go from 1 to 1000")
    return counts


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        d = Scenario()
        parser.add_argument("--users", type=_counts, default=d.users, help="concurrent users, one run each (50,200)")
        parser.add_argument("--seconds", type=_positive, default=d.seconds, help="of each run (30)")
        parser.add_argument("--workspaces", type=_positive, default=d.workspaces, help="(10000)")
        parser.add_argument("--teams", type=_positive, default=d.teams, help="of five people each (12)")
        parser.add_argument("--web-workers", type=_positive, default=d.web_workers, help="gunicorn processes (2)")
        parser.add_argument("--web-threads", type=_positive, default=d.web_threads, help="threads each (8)")
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument("--out", type=Path, help="where Locust's figures and logs go (a temporary folder)")
        add_common_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        scenario = scenario_from(Scenario, options)
        out = options["out"] or Path(tempfile.mkdtemp(prefix="bench-pages-"))
        try:
            result = run(scenario, keep=options["keep"], progress=self.stderr.write, out=out)
        except BenchError as exc:
            raise CommandError(str(exc)) from exc
        for line in table(result):
            self.stdout.write(line)
        self.stdout.write(f"Locust's figures and the server's log: {out}")
        if options["json"]:
            options["json"].write_text(json.dumps(result.as_dict(), indent=2, default=str))
