"""Arm "static": one person, one card. Every researcher owns one whole GPU of the cluster (in node order)
and runs their own requests on it one after another, first come first served. A job asking for k GPUs
runs on the one card k times as long (data parallel on fewer GPUs); a notebook holds the card as it would
any GPU. Nobody else may use an idle card: that is the arm's point.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from scheduling.benchmarks.lab.arrivals import Calendar, Request
from scheduling.benchmarks.lab.fleet import cards
from scheduling.benchmarks.lab.model import LabModel
from scheduling.benchmarks.lab.outcome import ArmOutcome, Step
from scheduling.benchmarks.lab.runs import Run, Wait, plan


def simulate_static(model: LabModel, requests: Sequence[Request], name: str = "static") -> ArmOutcome:
    owned = cards(model.cluster)
    if len(owned) < model.researchers:
        raise ValueError(
            f"the static arm needs a card per researcher: {model.researchers} researchers, {len(owned)} GPUs"
        )
    cal = Calendar(model)
    horizon = model.days * 86400.0
    mine: dict[int, list[Request]] = defaultdict(list)
    for q in requests:
        mine[q.researcher].append(q)
    runs: list[Run] = []
    waits: list[Wait] = []
    changes: list[tuple[float, float, float]] = []  # (time, held change, asked change)
    for researcher, queue in mine.items():
        free_at = 0.0
        for q in queue:  # already in arrival order
            start = max(q.at, free_at)
            changes.append((q.at, 0.0, 1.0))
            if start >= horizon:
                waits.append(Wait(q, True, None))
                continue
            p = plan(q, start, cal, model.seed, slowdown=float(q.total_gpus) if q.kind == "job" else 1.0)
            end = min(start + p.length, horizon)
            free_at = start + p.length
            outcome = "month-ended" if end < start + p.length else ("done" if q.kind == "job" else "closed")
            runs.append(Run(q, owned[researcher], 1.0, start, end, outcome, p))
            waits.append(Wait(q, True, start))
            changes += [(start, 1.0, 0.0), (end, -1.0, -1.0)]
    return ArmOutcome(
        name, float(len(owned)), horizon, runs, waits, Step.from_changes("cards", float(len(owned)), changes)
    )
