"""A month in a research lab, replayed through each arm on the same arrivals, in simulated time.

    python -m scheduling.benchmarks.lab [--model scheduling/benchmarks/scenarios/lab-month.yaml]
        [--arms static,portal-shared] [--days 7] [--json results.json] [--html report.html]

The organisation, cluster and arms are the model file's (``model.py`` explains every key). Prints one row
of figures per arm (``figures.py`` defines them): GPUs held over the month (held%) and while work of a GPU
model waits beyond what it has (held short%, for short h hours), GPU activity of what is held and of the
fleet, in-quota waits, notebooks lost while in use, jobs done, idle GPU-hours, MIG repartitions, CPU seconds
of the arm; then what each arm whose MIG layouts follow demand changes against the last portal arm before it
whose layouts are fixed (``difference``), the targets for the last portal arm with fixed layouts (the arm the
targets were set for), and how many GPUs the static way would need for that arm's median waits
(``static_arm.cards_needed``). ``--html`` writes a self-contained report (``report.py``) that opens
offline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from scheduling.benchmarks.lab import report
from scheduling.benchmarks.lab.arrivals import draw
from scheduling.benchmarks.lab.figures import Figures, figures
from scheduling.benchmarks.lab.model import ModelError, load_model
from scheduling.benchmarks.lab.portal_arm import simulate_portal
from scheduling.benchmarks.lab.static_arm import cards_needed, simulate_static

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "scenarios" / "lab-month.yaml"


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def table(rows: Sequence[tuple[Figures, float]]) -> str:
    width = max([14, *(len(f.arm) for f, _ in rows)])
    head = (
        f"{'arm':<{width}} {'held%':>6} {'held short%':>11} {'short h':>7} {'busy held%':>10} {'busy fleet%':>11} "
        f"{'nb wait p50/p95 min':>20} {'job wait p50/p95 min':>21} {'lost nb':>7} {'jobs done':>11} "
        f"{'idle GPU-h':>10} {'repart':>6} {'cpu s':>6}"
    )
    lines = [head]
    for f, cpu in rows:
        nb, job = f.waits_in_quota["notebook"], f.waits_in_quota["job"]
        lines.append(
            f"{f.arm:<{width}} {_fmt(f.allocated, 100):>6} {_fmt(f.allocated_while_short, 100):>11} "
            f"{f.short_hours:7.0f} "
            f"{_fmt(f.activity_of_allocated, 100):>10} {_fmt(f.fleet_activity, 100):>11} "
            f"{_fmt(nb.median_min) + '/' + _fmt(nb.p95_min):>20} {_fmt(job.median_min) + '/' + _fmt(job.p95_min):>21} "
            f"{f.lost_in_use:>7} {f'{f.jobs_done}/{f.jobs}':>11} {f.idle_gpu_hours:10.0f} {f.repartitions:6d} "
            f"{cpu:6.1f}"
        )
    return "\n".join(lines)


def _delta(new: float | None, old: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if new is None or old is None else f"{(new - old) * scale:+.{digits}f}"


def difference(new: Figures, old: Figures) -> str:
    """What arm ``new`` changes against arm ``old``: percentage points of GPUs held, held while short and
    busy of held; minutes of in-quota waits (median / p95) by kind; idle GPU-hours; jobs done; job runs
    preempted and their GPU-hours (work thrown away, counted in held and busy)."""
    waits = [
        f"{kind} wait p50/p95 {_delta(new.waits_in_quota[kind].median_min, old.waits_in_quota[kind].median_min)}/"
        f"{_delta(new.waits_in_quota[kind].p95_min, old.waits_in_quota[kind].p95_min)} min"
        for kind in ("notebook", "job")
    ]
    return (
        f"{new.arm} against {old.arm} ({new.repartitions} repartitions): "
        f"held {_delta(new.allocated, old.allocated, 100)} pt, "
        f"held while short {_delta(new.allocated_while_short, old.allocated_while_short, 100)} pt, "
        f"busy of held {_delta(new.activity_of_allocated, old.activity_of_allocated, 100)} pt, "
        f"{', '.join(waits)}, idle GPU-h {_delta(new.idle_gpu_hours, old.idle_gpu_hours, digits=0)}, "
        f"jobs done {new.jobs_done - old.jobs_done:+d}, jobs preempted {new.jobs_preempted - old.jobs_preempted:+d} "
        f"({_delta(new.preempted_gpu_hours, old.preempted_gpu_hours, digits=0)} GPU-h)"
    )


def targets(f: Figures) -> str:
    """The issue's targets for the shared portal arm, each with whether it is met."""
    waits = [w.median_min for w in f.waits_in_quota.values() if w.median_min is not None]
    checks = [
        (
            "allocated >= 90% of capacity while demand exceeds supply",
            f.allocated_while_short is not None and f.allocated_while_short >= 0.9,
            _fmt(f.allocated_while_short, 100) + "%",
        ),
        (
            "activity-weighted utilisation of allocated GPUs >= 75%",
            f.activity_of_allocated >= 0.75,
            _fmt(f.activity_of_allocated, 100) + "%",
        ),
        (
            "median wait of in-quota requests <= 5 min, each kind",
            bool(waits) and max(waits) <= 5,
            " / ".join(f"{k} {_fmt(w.median_min)}" for k, w in f.waits_in_quota.items()),
        ),
        ("0 in-quota notebooks preempted", f.notebooks_preempted == 0, str(f.notebooks_preempted)),
        ("0 notebooks lost while in use", f.lost_in_use == 0, str(f.lost_in_use)),
    ]
    return "\n".join(f"  [{'met' if ok else 'NOT met'}] {what}: {value}" for what, ok, value in checks)


def what_if_line(w: Mapping[str, object]) -> str:
    needed, gpus = w["static_gpus_needed"], w["gpus"]
    if needed is None:
        return f"hardware what-if: one card per person does not reach arm {w['arm']}'s median waits even at 8 each"
    return (
        f"hardware what-if: one card per person needs {needed} GPUs for arm {w['arm']}'s median waits, which it "
        f"gets from {gpus:g}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduling.benchmarks.lab", description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="organisation model (YAML)")
    ap.add_argument("--arms", default="", help="comma-separated arm names (default: every arm of the model)")
    ap.add_argument("--days", type=int, help="replay only the first DAYS days")
    ap.add_argument("--json", metavar="PATH", help="write every figure, per arm, as JSON ('-' for stdout)")
    ap.add_argument("--html", metavar="PATH", type=Path, help="write the report with its charts (one offline file)")
    args = ap.parse_args(argv)
    try:
        model = load_model(args.model)
    except ModelError as exc:
        ap.error("the model has problems:\n  " + "\n  ".join(exc.problems))
    if args.days is not None:
        if not 1 <= args.days <= model.days:
            ap.error(f"--days must be 1-{model.days}")
        model = replace(model, days=args.days)
    names = [a for a in args.arms.split(",") if a] or [a.name for a in model.arms]
    unknown = [n for n in names if n not in {a.name for a in model.arms}]
    if unknown:
        ap.error(f"no arm {', '.join(unknown)} in the model (it has {', '.join(a.name for a in model.arms)})")

    requests = draw(model)
    summary = (
        f"{model.name}: {model.researchers} researchers in {len(model.teams)} teams, {model.days} days from "
        f"{model.start:%Y-%m-%d}, {len(requests)} requests; cluster {model.cluster.name}"
    )
    print(summary, flush=True)
    rows: list[tuple[Figures, float]] = []
    for name in names:
        arm = model.arm(name)
        start = time.process_time()
        try:
            outcome = (
                simulate_static(model, requests, name)
                if arm.kind == "static"
                else simulate_portal(model, arm, requests)
            )
        except ValueError as exc:
            ap.error(str(exc))
        rows.append((figures(outcome), time.process_time() - start))
        print(table(rows[-1:]).splitlines()[-1] if len(rows) > 1 else table(rows), flush=True)
    print()
    print(table(rows))
    differences = []
    for i, (f, _) in enumerate(rows):
        if model.arm(f.arm).dynamic_mig:
            fixed = [g for g, _ in rows[:i] if model.arm(g.arm).kind == "portal" and not model.arm(g.arm).dynamic_mig]
            if fixed:
                differences.append(difference(f, fixed[-1]))
    if differences:
        print("\n" + "\n".join(differences))
    portal = [f for f, _ in rows if model.arm(f.arm).kind == "portal"]
    portal = [f for f in portal if not model.arm(f.arm).dynamic_mig] or portal
    whatif: dict[str, object] = {}
    if portal:
        print(f"\ntargets, arm {portal[-1].arm}:\n{targets(portal[-1])}")
        goal = {k: w.median_min for k, w in portal[-1].waits_in_quota.items() if w.median_min is not None}
        needed = cards_needed(model, requests, goal)
        whatif = {
            "arm": portal[-1].arm,
            "median_wait_min": goal,
            "static_gpus_needed": needed,
            "gpus": portal[-1].capacity,
        }
        summary += "; " + what_if_line(whatif)
        print(f"\n{what_if_line(whatif)}")
    if args.json:
        data = {
            "model": model.name,
            "days": model.days,
            "arms": [f.as_json() for f, _ in rows],
            "differences": differences,
            "whatif": whatif,
        }
        text = json.dumps(data, indent=1)
        sys.stdout.write(text + "\n") if args.json == "-" else Path(args.json).write_text(text)
    if args.html:
        page = report.render(f"A month in {model.name}", summary, [f for f, _ in rows], model.start, differences)
        args.html.write_text(page)
        print(f"report: {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
