"""Arm "static": one person, one card. Every researcher owns one whole GPU of the cluster (in node order)
and runs their own requests on it one after another, first come first served. A job asking for k GPUs
runs on the one card k times as long (data parallel on fewer GPUs); a notebook holds the card as it would
any GPU. Nobody else may use an idle card: that is the arm's point.

The what-if: how many cards the static way would need for the waits of another arm. Cards beyond one each
go, one at a time, to the researchers who ask for the most GPU-hours (as a budget round would hand them
out); a researcher with c cards runs a k-GPU job on min(k, c) of them, k / min(k, c) times as long, and
still takes requests in order. The smallest total whose median waits of each kind are at most the
target's is found by bisection (waits only fall as cards are added).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from scheduling.benchmarks.lab.arrivals import Calendar, Request
from scheduling.benchmarks.lab.figures import KINDS, wait_minutes
from scheduling.benchmarks.lab.fleet import cards
from scheduling.benchmarks.lab.model import LabModel
from scheduling.benchmarks.lab.outcome import ArmOutcome, Step
from scheduling.benchmarks.lab.runs import Run, Wait, plan


def simulate_static(
    model: LabModel, requests: Sequence[Request], name: str = "static", cards_each: Sequence[int] | None = None
) -> ArmOutcome:
    """``cards_each``: cards per researcher (default: one each, the cluster's GPUs in node order)."""
    owned = cards(model.cluster)
    if cards_each is None:
        if len(owned) < model.researchers:
            raise ValueError(
                f"the static arm needs a card per researcher: {model.researchers} researchers, {len(owned)} GPUs"
            )
        cards_each = [1] * model.researchers
    cal = Calendar(model)
    horizon = model.days * 86400.0
    mine: dict[int, list[Request]] = defaultdict(list)
    for q in requests:
        mine[q.researcher].append(q)
    runs: list[Run] = []
    waits: list[Wait] = []
    changes: list[tuple[float, float, float]] = []  # (time, held change, asked change)
    for researcher, queue in mine.items():
        free = [0.0] * cards_each[researcher]  # when each of the researcher's cards is next free
        last_start = 0.0
        for q in queue:  # already in arrival order
            n = min(q.total_gpus, len(free)) if q.kind == "job" else 1
            free.sort()
            start = max(q.at, last_start, free[n - 1])
            changes.append((q.at, 0.0, float(n)))
            if start >= horizon:
                waits.append(Wait(q, True, None))
                continue
            p = plan(q, start, cal, model.seed, slowdown=q.total_gpus / n if q.kind == "job" else 1.0)
            end = min(start + p.length, horizon)
            free[:n] = [start + p.length] * n
            last_start = start
            outcome = "month-ended" if end < start + p.length else ("done" if q.kind == "job" else "closed")
            label = owned[researcher] if researcher < len(owned) else f"card-{researcher}"
            runs.append(Run(q, label, float(n), start, end, outcome, p))
            waits.append(Wait(q, True, start))
            changes += [(start, float(n), 0.0), (end, -float(n), -float(n))]
    total = float(max(len(owned), sum(cards_each)))
    return ArmOutcome(name, total, horizon, runs, waits, Step.from_changes("cards", total, changes))


def median_waits(outcome: ArmOutcome) -> dict[str, float]:
    """Median in-quota wait in minutes per kind."""
    waits = {kind: wait_minutes(outcome, kind)[0] for kind in KINDS}
    return {kind: float(np.median(minutes)) for kind, minutes in waits.items() if minutes}


def cards_for(model: LabModel, requests: Sequence[Request], total: int) -> list[int]:
    """``total`` cards (at least one each) handed out: one each, the rest to the biggest users first."""
    asked: dict[int, float] = defaultdict(float)
    for q in requests:
        asked[q.researcher] += q.run_s * q.total_gpus if q.kind == "job" else q.session_s
    order = sorted(range(model.researchers), key=lambda r: (-asked[r], r))
    each = [1] * model.researchers
    for extra in range(max(0, total - model.researchers)):
        each[order[extra % len(order)]] += 1
    return each


def cards_needed(
    model: LabModel, requests: Sequence[Request], target: Mapping[str, float], *, most: int | None = None
) -> int | None:
    """The fewest cards with which the static way's median wait of each kind is at most ``target``'s (None:
    not even with ``most``, by default 8 per researcher)."""

    def meets(total: int) -> bool:
        got = median_waits(simulate_static(model, requests, cards_each=cards_for(model, requests, total)))
        return all(got.get(kind, 0.0) <= limit + 1e-9 for kind, limit in target.items())

    low, high = model.researchers, most or 8 * model.researchers
    if not meets(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if meets(mid):
            high = mid
        else:
            low = mid + 1
    return low
