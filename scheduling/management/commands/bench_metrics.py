"""Benchmark: a Prometheus scrape of ``/metrics`` on a busy portal (``exposition.render``): seconds, SQL queries
and page size with the event-log counters counted from scratch (cache lost), already counted, and after new
events. The scenario and what is timed: ``scheduling/benchmarks/metrics.py``.

On PostgreSQL (rows go in with COPY), a migrated database of its own::

    PORTAL_ENV=demo DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_metrics python manage.py migrate
    PORTAL_ENV=demo DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_metrics python manage.py bench_metrics

Defaults: the chargeback benchmark's organisation and fleet (1,000 nodes of 8 GPUs, 200 teams), 14,000
queued and 5,000 running workspaces, an event log of 1,000,000 rows over the last 30 days, 1,000 events added
before each incremental scrape, the median of 5 scrapes. Everything happens in one transaction that is
rolled back at the end (``--keep`` commits it), and the event totals' cache entry is put back as it was. A
database that already holds workspaces or records a fleet is refused.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from scheduling.benchmarks.metrics import Report, Scenario, run_benchmark
from scheduling.management.commands._bench import add_common_arguments, run, scenario_from

SCRAPE_TARGET_S = 1.0  # warm and incremental: well inside a 10 s scrape timeout at a 15-30 s interval
COLD_TARGET_S = 10.0  # once after the cache is lost: Prometheus's default scrape timeout


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        d = Scenario()
        parser.add_argument("--nodes", type=int, default=d.nodes, help="nodes of 8 GPUs (1000)")
        parser.add_argument("--teams", type=int, default=d.teams, help="teams; a fifth as many departments (200)")
        parser.add_argument("--queued", type=int, default=d.queued, help="workspaces waiting now (14000)")
        parser.add_argument("--running", type=int, default=d.running, help="workspaces running now (5000)")
        parser.add_argument("--events", type=int, default=d.events, help="rows of the event log (1000000)")
        parser.add_argument("--days", type=int, default=d.days, help="the log's span, up to now (30)")
        parser.add_argument("--added", type=int, default=d.added, help="new events before each incremental scrape")
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument("--repeats", type=int, default=d.repeats, help="scrapes of each kind (5)")
        add_common_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        run(self, run_benchmark, scenario_from(Scenario, options), options, self._print)

    def _print(self, r: Report) -> None:
        g, s = r.generated, r.scenario
        fleet = ", ".join(f"{model} {gpus}" for model, gpus in sorted(g.fleet.items()))
        self.stdout.write(
            f"/metrics on {r.database}: {s.nodes} nodes ({sum(g.fleet.values())} GPUs: {fleet}), "
            f"{g.departments} departments, {g.teams} teams, {g.users} users"
        )
        self.stdout.write(
            f"now: {g.queued} queued ({g.requeued} queued again after a preemption or a stop, {g.within_quota} "
            f"within quota), {g.running} running ({g.borrowing} borrowing, {g.pods} pods with open usage rows, "
            f"{g.samples} activity samples)"
        )
        self.stdout.write(
            f"log: {g.events} events over {s.days} days ({g.admissions} admissions), {g.finished} finished "
            f"workspaces, {g.workspaces} in all, {g.usage_rows} usage rows, {g.quotas} quotas, {g.budgets} budgets, "
            f"{g.loops} loops; generated in {g.seconds:.1f} s ({g.write_s:.1f} s of it writing rows)"
        )
        self.stdout.write(f"median of {s.repeats} scrapes; page in kB")
        self.stdout.write(
            f"{'render(now)':<30}{'s':>8}{'range s':>14}{'queries':>8}{'kB':>8}{'series':>8}{'queued':>8}{'within':>8}"
            f"{'admitted':>10}"
        )
        for scrape in r.scrapes:
            p = scrape.page
            self.stdout.write(
                f"  {scrape.label:<28}{scrape.seconds:>8.3f}{f'{min(scrape.runs):.3f}-{max(scrape.runs):.3f}':>14}"
                f"{scrape.queries:>8}{p.size / 1000:>8.1f}{p.series:>8}"
                f"{p.queue_requests:>8.0f}{p.within_quota_requests:>8.0f}{p.admitted:>10.0f}"
            )
        cold, warm, new = r.scrapes
        made = g.admissions + r.added_admissions
        counted = "as made" if (cold.page.admitted, new.page.admitted) == (g.admissions, made) else "DIFFER"
        queue = "as made" if cold.page.queue_requests == g.queued else "DIFFERS"
        within = "as made" if cold.page.within_quota_requests == g.within_quota else "DIFFERS"
        self.stdout.write(
            f"page: queue {queue} ({g.queued}), within quota {within} ({g.within_quota}), admissions {counted} "
            f"({g.admissions}, then {made} with the {r.added_events} events added); {cold.page.capacity:.0f} GPUs, "
            f"{cold.page.allocated:.1f} allocated, {cold.page.borrowed:.1f} borrowed, {cold.page.budgets} budgets"
        )
        slowest = max(warm.seconds, new.seconds)
        self.stdout.write(
            f"cold scrape {cold.seconds:.3f} s (target {COLD_TARGET_S:g} s: {_verdict(cold.seconds, COLD_TARGET_S)}), "
            f"slowest warm or incremental {slowest:.3f} s (target {SCRAPE_TARGET_S:g} s: "
            f"{_verdict(slowest, SCRAPE_TARGET_S)})"
        )


def _verdict(seconds: float, target: float) -> str:
    return "met" if seconds < target else "MISSED"
