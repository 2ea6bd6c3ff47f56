"""Benchmark: time to build and to export one month's chargeback for a large organisation, and the SQL
queries a build makes (20 teams against 200). The scenario and what is timed:
``scheduling/benchmarks/chargeback.py``.

On PostgreSQL (the figures that count; rows go in with COPY), a migrated database::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_chargeback python manage.py migrate
    PORTAL_ENV=demo DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_chargeback python manage.py bench_chargeback

Defaults: 1,000 nodes of 8 GPUs, 200 teams, 150,000 workspaces in January 2026 with about 5,000 running at a
time. ``--history 11`` also gives the 11 months before a copy of the month's usage rows, so that the page's
12-month trend reads a year of ledger. Everything happens in one transaction that is rolled back at the end
(``--keep`` commits it), and on PostgreSQL the tables are vacuumed afterwards, so a demo database may be used
too, as long as the month has no ledger rows of its own (pick one with ``--month``). SQLite works, more
slowly, without ``--history``.
"""

from __future__ import annotations

import argparse
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from scheduling.benchmarks.chargeback import FORMATS, Report, Scenario, run_benchmark
from scheduling.management.commands._bench import add_common_arguments, run, scenario_from

RENDER_TARGET_S = 2.0
EXPORT_TARGET_S = 5.0


def _month(text: str) -> date:
    try:
        return date.fromisoformat(f"{text}-01")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a month like 2026-01") from None


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        d = Scenario()
        parser.add_argument("--workspaces", type=int, default=d.workspaces, help="in the month (150000)")
        parser.add_argument("--concurrent", type=int, default=d.concurrent, help="running at a time (5000)")
        parser.add_argument("--nodes", type=int, default=d.nodes, help="nodes of 8 GPUs (1000)")
        parser.add_argument("--teams", type=int, default=d.teams, help="teams; a fifth as many departments (200)")
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument("--month", type=_month, default=d.month, help="YYYY-MM (2026-01)")
        parser.add_argument("--repeats", type=int, default=d.repeats, help="runs of each timing (3)")
        parser.add_argument(
            "--history",
            type=int,
            default=d.history,
            help="earlier months that get a copy of the month's usage rows, for the page's trend (0; PostgreSQL)",
        )
        add_common_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        run(self, run_benchmark, scenario_from(Scenario, options), options, self._print)

    def _print(self, r: Report) -> None:
        g, s = r.generated, r.scenario
        fleet = ", ".join(f"{model} {gpus}" for model, gpus in sorted(g.fleet.items()))
        self.stdout.write(
            f"chargeback of {s.month:%B %Y} on {r.database}: {s.nodes} nodes ({sum(g.fleet.values())} GPUs: {fleet}), "
            f"{g.departments} departments, {g.teams} teams, {g.users} users"
        )
        self.stdout.write(
            f"{g.workspaces} workspaces, {g.intervals} usage rows; running on average: {g.running_workspaces:.0f} "
            f"workspaces, {g.running_pods:.0f} pods, {100 * g.held_share:.1f} % of the GPU-hours held; "
            f"generated in {g.seconds:.1f} s ({g.write_s:.1f} s of it writing rows)"
        )
        if g.history_rows:
            self.stdout.write(
                f"history: {g.history_rows} usage rows copied into the {s.history} months before in {g.history_s:.1f} s"
            )
        compared = f"queries at {r.compared_teams} teams" if r.compared_teams else ""
        self.stdout.write(f"median of {s.repeats} runs; sizes in kB")
        head = f"{'report.build':<28}{'lines':>6}{'build s':>9}{'SQL s':>8}{'Python s':>9}{'queries':>8}"
        head += "".join(f"{fmt + ' s':>8}{fmt + ' kB':>8}" for fmt in FORMATS)
        self.stdout.write(f"{head}  {compared}")
        for b in r.builds:
            line = f"  {b.label:<26}{b.lines:>6}{b.seconds:>9.3f}{b.gather_s:>8.3f}{b.assemble_s:>9.3f}{b.queries:>8}"
            line += "".join(f"{b.exports[f].seconds:>8.3f}{b.exports[f].size / 1000:>8.1f}" for f in FORMATS)
            self.stdout.write(f"{line}  {r.compared.get(b.label, '')}")
        self.stdout.write(f"{'through the views (team)':<28}{'s':>9}{'queries':>8}{'kB':>9}  {compared}")
        for q in r.requests:
            self.stdout.write(
                f"  {q.label:<26}{q.seconds:>9.3f}{q.queries:>8}{q.size / 1000:>9.1f}  {r.compared.get(q.label, '')}"
            )
        page = [q.seconds for q in r.requests if q.label.startswith("chargeback")]
        render = max([b.seconds for b in r.builds] + page)
        downloads = [q.seconds for q in r.requests if q.label.startswith("download")]
        exported = max([b.seconds + e.seconds for b in r.builds for e in b.exports.values()] + downloads)
        if not r.compared:
            queries = "not compared"
        elif all(r.compared.get(b.label) == b.queries for b in r.builds):
            queries = f"the same at {r.compared_teams} and {s.teams} teams"
        else:
            queries = f"DIFFER between {r.compared_teams} and {s.teams} teams"
        self.stdout.write(
            f"slowest render {render:.3f} s (target {RENDER_TARGET_S:g} s: {_verdict(render, RENDER_TARGET_S)}), "
            f"slowest build + export {exported:.3f} s (target {EXPORT_TARGET_S:g} s: "
            f"{_verdict(exported, EXPORT_TARGET_S)}); build queries {queries}"
        )


def _verdict(seconds: float, target: float) -> str:
    return "met" if seconds < target else "MISSED"
