"""The lab model's working week on the full stack, beside the engines' simulated-time figures for the same
week (``scheduling/benchmarks/lab/stack_week.py`` explains the mapping).

Starts the simulated cluster of the model (its workloads ``--speed`` times faster than real time) and a
real Celery worker with beat as child processes, creates the model's departments, teams, quotas, idle rule,
researchers and offerings, lives the first ``--days`` days of the model through ``workspaces.actions`` as
the API does, prints the arm's figures beside every arm's in simulated time on the same arrivals, and
whether each is within 10% of the same arm's, and removes what it created. One portal arm per run (each
takes the week's real time); a whole-GPU arm runs on the node file rendered with MIG off and no
time-slicing. Needs PostgreSQL and Redis (DATABASE_URL, REDIS_URL) and a database with no other queued or
running workspaces.

    python manage.py bench_lab_week                      # Monday to Friday at 300x: 24 minutes
    python manage.py bench_lab_week --days 1 --speed 600 # one day in 2.4 minutes
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from scheduling.benchmarks.lab.__main__ import DEFAULT_MODEL, table
from scheduling.benchmarks.lab.agreement import agreement, lines
from scheduling.benchmarks.lab.arrivals import draw
from scheduling.benchmarks.lab.figures import figures
from scheduling.benchmarks.lab.model import ModelError, load_model
from scheduling.benchmarks.lab.portal_arm import simulate_portal
from scheduling.benchmarks.lab.stack_week import WeekConfig, run
from scheduling.benchmarks.lab.static_arm import simulate_static


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="organisation model (YAML)")
        parser.add_argument("--arm", default="", help="a portal arm of the model (default: its last)")
        parser.add_argument("--days", type=int, default=5, help="days from the model's start (default 5)")
        parser.add_argument("--speed", type=float, default=300.0, help="model seconds per real second (max 600)")
        parser.add_argument("--concurrency", type=int, default=3, help="worker pool processes")
        parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
        parser.add_argument("--keep", action="store_true", help="keep the run's rows for inspection")

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql" or not settings.REDIS_URL:
            raise CommandError("the full stack needs PostgreSQL and Redis: set DATABASE_URL and REDIS_URL")
        try:
            model = load_model(options["model"])
        except ModelError as exc:
            raise CommandError("the model has problems:\n  " + "\n  ".join(exc.problems)) from exc
        if not 1 <= options["days"] <= model.days:
            raise CommandError(f"--days must be 1-{model.days}")
        model = replace(model, days=options["days"])
        portal = [a for a in model.arms if a.kind == "portal" and not a.dynamic_mig]  # the week runs no MIG loop
        name = options["arm"] or (portal[-1].name if portal else "")
        if name not in {a.name for a in portal}:
            raise CommandError(f"no portal arm {name!r} in the model (it has {', '.join(a.name for a in portal)})")
        arm = model.arm(name)
        requests = draw(model)
        say = self.stdout.write
        say(f"{model.name}: {len(requests)} requests over {model.days} days, arm {arm.name}, "
            f"workloads x{options['speed']:g} (a day in {86400 / options['speed'] / 60:.1f} min)")  # fmt: skip
        engines = []  # every arm of the model in simulated time on the same week, for the table
        for other in model.arms:
            cpu = time.process_time()
            simulated = (
                simulate_static(model, requests, other.name)
                if other.kind == "static"
                else simulate_portal(model, other, requests)
            )
            engines.append((figures(simulated), time.process_time() - cpu))
        engine = next(f for f, _ in engines if f.arm == arm.name)
        config = WeekConfig(model, arm, requests, speed=options["speed"], concurrency=options["concurrency"],
                            keep=options["keep"])  # fmt: skip
        try:
            result = run(config, say=say)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        stack = replace(figures(result.outcome), arm=f"{arm.name} (stack)")
        say("")
        say(table([(stack, 0.0), *engines]))
        m = result.measured
        activity = "-" if m.activity is None else f"{100 * m.activity:.1f}%"
        say(f"the portal's own telemetry: activity of held GPUs {activity}, {m.held_gpu_h:.0f} GPU-h sampled, "
            f"{m.idle_gpu_h:.0f} held idle")  # fmt: skip
        resolution = options["speed"] / 120  # model minutes in the worker's half-second intervals
        checks = agreement(stack, engine, resolution)
        say(f"full stack against the engines, same week (waits to within {resolution:.1f} model min):")
        for line in lines(checks):
            say(line)
        say(f"the week took {result.wall_s / 60:.1f} min, the command {result.run_s / 60:.1f} min; the researchers "
            f"fell behind their schedule by at most {result.behind_s:.2f} s")  # fmt: skip
        if options["json"]:
            data = {
                "model": model.name,
                "days": model.days,
                "speed": options["speed"],
                "stack": stack.as_json(),
                "engine": engine.as_json(),
                "telemetry": {"activity": m.activity, "held_gpu_h": m.held_gpu_h, "idle_gpu_h": m.idle_gpu_h},
                "agreement": [c.__dict__ for c in checks],
                "wall_s": result.wall_s,
                "run_s": result.run_s,
            }
            options["json"].write_text(json.dumps(data, indent=1))
