"""Benchmark: wall time, SQL queries and API calls of one scheduling cycle with many queued requests on a
large simulated cluster (issue #6). The scenario and what is timed: ``scheduling/benchmarks/cycle.py``.

Give it a database of its own, so that no other queue is admitted with the benchmark's and no test run
meets its rows::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_cycle python manage.py migrate
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_cycle python manage.py bench_cycle

(``DATABASE_URL=sqlite:////tmp/bench_cycle.sqlite3`` works too.) Nothing is provisioned: the tasks the cycle
enqueues are counted, never sent. Everything it creates is removed at the end.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.benchmarks.cycle import BenchError, CycleFigures, Report, Scenario, run_benchmark


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = Scenario()
        parser.add_argument("--nodes", type=int, default=defaults.nodes, help="simulated nodes (default 1000)")
        parser.add_argument("--queued", type=int, default=defaults.queued, help="queued requests (default 1000)")
        parser.add_argument("--repeats", type=int, default=defaults.repeats, help="timed cycles (default 5)")
        parser.add_argument("--busy", type=float, default=defaults.busy, help="mean share of GPUs in use (0.5)")
        parser.add_argument("--churn", type=float, default=defaults.churn, help="share finishing per round (0.1)")
        parser.add_argument("--seed", type=int, default=defaults.seed)
        parser.add_argument("--json", type=Path, help="also write the full report (every cycle) to this file")
        parser.add_argument(
            "--profile", type=Path, help="write cProfile statistics of the timed cycles to this file (pstats format)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        scenario = Scenario(
            nodes=options["nodes"],
            queued=options["queued"],
            repeats=options["repeats"],
            busy=options["busy"],
            churn=options["churn"],
            seed=options["seed"],
        )
        profiler = cProfile.Profile() if options["profile"] else None
        try:
            report = run_benchmark(scenario, progress=self.stderr.write, profiler=profiler)
        except BenchError as exc:
            raise CommandError(str(exc)) from exc
        if profiler is not None:
            profiler.dump_stats(options["profile"])
            self._print_profile(options["profile"])
        self._print(report)
        if options["json"]:
            options["json"].write_text(json.dumps(report.as_dict(), indent=2))

    def _print(self, report: Report) -> None:
        summary = report.summary()
        cycles = report.cycles
        self.stdout.write(
            f"scheduling cycle on {report.nodes} nodes ({report.gpu_nodes} with GPUs), {report.teams} teams, "
            f"{report.database}; {report.workspaces_running} workspaces running before the queue arrived"
        )
        self.stdout.write(f"  first cycle:  {self._line(report.first)}")
        for i, figures in enumerate(cycles, 1):
            self.stdout.write(f"  cycle {i:<6} {self._line(figures)}")
        self.stdout.write(
            f"wall time per cycle over {len(cycles)} cycles with ~{report.scenario.queued} queued: median "
            f"{summary['median_s']:.3f} s, min {summary['min_s']:.3f} s, max {summary['max_s']:.3f} s; "
            f"median {summary['median_queries']:.0f} SQL statements+commits, {summary['median_admitted']:.0f} admitted"
        )
        self.stdout.write("most repeated SQL statements in the last cycle (count, shape):")
        for count, shape in cycles[-1].repeated:
            self.stdout.write(f"  {count:>6}  {shape[:160]}")

    def _print_profile(self, path: Path) -> None:
        """The functions where the timed cycles spent the most time, their callees included."""
        out = io.StringIO()
        pstats.Stats(str(path), stream=out).sort_stats("cumulative").print_stats(30)
        self.stdout.write(out.getvalue())

    @staticmethod
    def _line(c: CycleFigures) -> str:
        api = ", ".join(f"{what} {seconds:.3f} s" for what, seconds in sorted(c.api_s.items()))
        return (
            f"{c.wall_s:7.3f} s  admitted {c.admitted:>4} of {c.queued_before:>5} queued "
            f"({c.active_before} active, {c.pods_before} pods)  SQL {c.queries:>5} statements+commits {c.sql_s:.3f} s  "
            f"API {api or 'none'}  rest {c.rest_s:.3f} s (GC {c.gc_s:.3f} s, {c.full_gcs} full)  "
            f"tasks {sum(c.tasks.values())}"
        )
