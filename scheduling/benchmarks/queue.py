"""Queue benchmark, engine-alone mode (``shared/benchmarks/QUEUE.md``).

    python -m scheduling.benchmarks.queue                      # Kueue's baseline scenario
    python -m scheduling.benchmarks.queue --scenario my.yaml --json
    python -m scheduling.benchmarks.queue --decide-timing      # one cycle, 1,000 queued x 1,000 running

Replays the scenario in simulated time through :func:`scheduling.engine.admission.decide` (see
:mod:`scheduling.benchmarks.queue_sim` for the event model and the exact figure definitions) and prints
Kueue's five figures beside Kueue's published averages, plus admissions per second of simulated and of
CPU time, preemptions and the CPU time the replay took.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduling.benchmarks.queue_sim import DEFAULT_SCENARIO, SimConfig, SimResult, load_scenario, simulate
from scheduling.engine.admission import AdmissionState, Strategy, decide
from scheduling.engine.quota import UNIT, Kind, QuotaConfig, TeamQuota, Workload

# QUEUE.md: averages of five runs of Kueue's minimal scheduler on the baseline scenario.
KUEUE_WALL_S = 351.0
KUEUE_MIN_USAGE_PCT = 55.9
KUEUE_ADMISSION_S = {"large": 16.5, "medium": 76.8, "small": 215.5}
KUEUE_ADMISSIONS_PER_S = 43.0  # QUEUE.md's estimate of its throughput
KUEUE = {
    "wall_s": KUEUE_WALL_S,
    "min_usage_pct": KUEUE_MIN_USAGE_PCT,
    "admission_s": KUEUE_ADMISSION_S,
    "admissions_per_s": KUEUE_ADMISSIONS_PER_S,
}


@dataclass(frozen=True)
class Row:
    figure: str
    ours: float
    kueue: float | None
    lower_is_better: bool

    @property
    def beats(self) -> bool | None:
        if self.kueue is None:
            return None
        return self.ours < self.kueue if self.lower_is_better else self.ours > self.kueue


def rows(r: SimResult) -> list[Row]:
    out = [
        Row("wall time (s)", r.wall_ms / 1000, KUEUE_WALL_S, True),
        Row("lowest queue usage of nominal (%)", 100 * r.min_usage, KUEUE_MIN_USAGE_PCT, False),
    ]
    for cls in sorted(r.admission_ms, key=lambda c: (-KUEUE_ADMISSION_S.get(c, 0.0), c)):
        out.append(
            Row(f"mean time to admission, {cls} (s)", r.admission_ms[cls] / 1000, KUEUE_ADMISSION_S.get(cls), True)
        )
    return out


def figures(r: SimResult) -> dict[str, object]:
    wall_s = r.wall_ms / 1000
    return {
        "wall_s": wall_s,
        "min_usage_pct": 100 * r.min_usage,
        "mean_usage_pct": 100 * sum(r.queue_usage.values()) / max(len(r.queue_usage), 1),
        "min_useful_usage_pct": 100 * r.min_useful,
        "admission_s": {c: v / 1000 for c, v in sorted(r.admission_ms.items())},
        "workloads": r.workloads,
        "finished": r.finished,
        "admissions": r.admissions,
        "preemptions": r.preemptions,
        "admissions_per_sim_s": r.admissions / wall_s if wall_s else 0.0,
        "admissions_per_cpu_s": r.admissions / r.cpu_s if r.cpu_s else 0.0,
        "cycles": r.cycles,
        "decide_calls": r.decide_calls,
        "cpu_s": r.cpu_s,
        "decide_cpu_ms_mean": 1000 * r.decide_cpu_s / max(r.decide_calls, 1),
    }


def print_report(r: SimResult, scenario: Path) -> None:
    f = figures(r)
    print(f"scenario {scenario}: {r.workloads} workloads, {r.finished} finished")
    print(f"{'figure':<40} {'engine':>10} {'Kueue avg':>10}  better")
    for row in rows(r):
        kueue = "" if row.kueue is None else f"{row.kueue:10.1f}"
        verdict = {True: "yes", False: "NO", None: ""}[row.beats]
        print(f"{row.figure:<40} {row.ours:10.1f} {kueue:>10}  {verdict}")
        if row.figure.startswith("lowest queue usage"):
            print(f"{'  the same, completed runs only (%)':<40} {f['min_useful_usage_pct']:10.1f}")
    sim_rate = f"{f['admissions_per_sim_s']:10.1f} {KUEUE_ADMISSIONS_PER_S:10.1f}"
    print(f"{'admissions per second, simulated time':<40} {sim_rate}")
    print(f"{'admissions per second, CPU time':<40} {f['admissions_per_cpu_s']:10.0f}")
    print(f"{'admissions (re-admissions included)':<40} {r.admissions:10d}")
    print(f"{'preemptions':<40} {r.preemptions:10d}")
    print(f"{'CPU time of the replay (s)':<40} {r.cpu_s:10.2f}")
    print(f"{'decide() calls, mean CPU ms per call':<40} {r.decide_calls:10d} {f['decide_cpu_ms_mean']:10.2f}")


def timing_case(pending: int = 1000, admitted: int = 1000, seed: int = 0) -> tuple[AdmissionState, list[Workload]]:
    """A busy cluster: 30 teams in 5 departments on two flavours, ~``admitted`` workloads running
    (borrowing included), ``pending`` more queued with mixed sizes, priorities and kinds."""
    rng = random.Random(seed)
    teams = [f"team-{i}" for i in range(30)]
    flavours = ("H100", "A100")
    quotas = {(t, f): TeamQuota(20 * UNIT, 40 * UNIT) for t in teams for f in flavours}
    config = QuotaConfig(quotas, {t: f"dept-{i // 6}" for i, t in enumerate(teams)})
    team_use = dict.fromkeys(quotas, 0)
    dept_use: dict[tuple[str, str], int] = defaultdict(int)
    running: list[Workload] = []
    for _ in range(50 * admitted):  # random fill up to the limits; stops early on a full cluster
        if len(running) == admitted:
            break
        t, f = rng.choice(teams), rng.choice(flavours)
        units = rng.choice((UNIT // 2, UNIT, UNIT, 2 * UNIT))
        dept = config.department(t)
        if team_use[t, f] + units > quotas[t, f].limit(Kind.BATCH) or dept_use[dept, f] + units > config.ceiling(
            dept, f
        ):
            continue
        team_use[t, f] += units
        dept_use[dept, f] += units
        within = team_use[t, f] <= quotas[t, f].guaranteed
        kind = Kind.INTERACTIVE if within and rng.random() < 0.2 else Kind.BATCH
        priority = rng.choice((0, 50, 100))
        running.append(Workload(f"r{len(running)}", t, f, units, priority, kind, 0.0, rng.uniform(0, 100), not within))
    queue = [
        Workload(
            f"p{i}",
            rng.choice(teams),
            rng.choice(flavours),
            rng.choice((1, 1, 2, 4, 8)) * UNIT,
            rng.choice((0, 50, 100, 200)),
            Kind.INTERACTIVE if rng.random() < 0.2 else Kind.BATCH,
            rng.uniform(100, 200),
        )
        for i in range(pending)
    ]
    return AdmissionState(config, running), queue


def decide_timing(pending: int = 1000, admitted: int = 1000, repeats: int = 20) -> dict[str, float]:
    state, queue = timing_case(pending, admitted)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        d = decide(state, queue)
        times.append(1000 * (time.perf_counter() - start))
    return {
        "pending": pending,
        "admitted": admitted,
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "admit": len(d.admit),
        "preempt": len(d.preempt),
        "waiting": len(d.waiting),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--cycle-ms", type=int, default=0, help="fixed cycle period; 0: a cycle per event time")
    parser.add_argument("--half-life", type=float, default=SimConfig.half_life_s, help="fair-share half-life (s)")
    parser.add_argument("--charge-cpu", action="store_true", help="decisions take effect after their CPU time")
    parser.add_argument("--strategy", type=Strategy, choices=list(Strategy), default=Strategy.BEST_EFFORT_FIFO)
    parser.add_argument("--decide-timing", action="store_true", help="time one decide() at 1,000 x 1,000 and exit")
    args = parser.parse_args(argv)
    if args.decide_timing:
        print(json.dumps(decide_timing(), indent=2))
        return 0
    result = simulate(
        load_scenario(args.scenario), SimConfig(args.cycle_ms, args.half_life, args.strategy, args.charge_cpu)
    )
    if args.json:
        out = figures(result) | {"kueue": KUEUE, "beats_kueue": {row.figure: row.beats for row in rows(result)}}
        print(json.dumps(out, indent=2))
    else:
        print_report(result, args.scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main())
