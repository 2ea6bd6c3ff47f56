"""Figures for the quota pages, as plain plotly figure dicts (no I/O; the page hands them to Plotly.js)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduling.engine import quota as engine_quota

# Series are summed in ten-thousandths of a GPU-equivalent (the models' four decimal places), so the
# step functions are exact integers and hand-computed values compare equal.
_SCALE = 10_000


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime | None  # None: still holding
    units: Decimal
    borrowing: bool = False  # admitted beyond the team's guarantee


@dataclass(frozen=True)
class QuotaSeries:
    """One team's GPU-equivalents in one flavour at each sample instant."""

    times: list[datetime]
    used: list[float]  # everything the team held, borrowed units included
    borrowed: list[float]  # held by the team's borrowing workspaces
    lent: list[float]  # the team's idle guarantee that other teams of its department were borrowing


def _offsets(start: datetime, end: datetime, points: int) -> npt.NDArray[np.float64]:
    return np.linspace(0.0, (end - start).total_seconds(), points)


def _held(intervals: Sequence[Interval], start: datetime, offsets: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Ten-thousandths held at each offset: what began at or before it minus what ended at or before it."""
    if not intervals:
        return np.zeros(len(offsets), dtype=np.int64)
    span = float(offsets[-1])
    begins = np.array([(i.start - start).total_seconds() for i in intervals])
    finishes = np.array([span + 1.0 if i.end is None else (i.end - start).total_seconds() for i in intervals])
    finishes = np.maximum(finishes, begins)  # an end before its start holds nothing
    units = np.array([int(i.units * _SCALE) for i in intervals], dtype=np.int64)

    def reached(edges: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        order = np.argsort(edges, kind="stable")
        totals = np.concatenate(([0], np.cumsum(units[order])))
        return totals[np.searchsorted(edges[order], offsets, side="right")]

    return reached(begins) - reached(finishes)


def _floats(values: npt.NDArray[np.int64]) -> list[float]:
    return [round(float(v) / _SCALE, 4) for v in values]


def usage_series(
    intervals: Sequence[Interval], start: datetime, end: datetime, points: int = 200
) -> tuple[list[datetime], list[float]]:
    """Units held at each of ``points`` evenly spaced instants between ``start`` and ``end``."""
    offsets = _offsets(start, end, points)
    return [start + timedelta(seconds=float(s)) for s in offsets], _floats(_held(intervals, start, offsets))


def quota_series(
    own: Sequence[Interval],
    others: Sequence[Interval],
    guaranteed: Decimal,
    start: datetime,
    end: datetime,
    points: int = 200,
) -> QuotaSeries:
    """Used, borrowed and lent GPU-equivalents of one team in one flavour over time.

    ``own`` are the team's intervals, ``others`` those of the other teams of its department in the same
    flavour (only their borrowing ones count). Borrowing stays within a department, so at each instant
    the team lends min(its idle guarantee, what its department's other teams borrow).
    """
    offsets = _offsets(start, end, points)
    used = _held(own, start, offsets)
    borrowed = _held([i for i in own if i.borrowing], start, offsets)
    others_borrowing = _held([i for i in others if i.borrowing], start, offsets)
    idle = np.maximum(0, int(guaranteed * _SCALE) - used)
    lent = np.minimum(idle, others_borrowing)
    return QuotaSeries(
        times=[start + timedelta(seconds=float(s)) for s in offsets],
        used=_floats(used),
        borrowed=_floats(borrowed),
        lent=_floats(lent),
    )


def worth_charting(flavour: str, series: QuotaSeries, guaranteed: float, borrow_limit: float) -> bool:
    """Whether a flavour's figure would show anything: a GPU model (CPU-only work has no GPU-equivalents,
    so its figure is always empty) with a guarantee, a borrowing limit, or some use in the window."""
    if not flavour:
        return False
    return bool(guaranteed or borrow_limit or any(series.used) or any(series.borrowed) or any(series.lent))


def quota_figure(flavour: str, series: QuotaSeries, guaranteed: float, borrow_limit: float) -> dict[str, Any]:
    """Used, borrowed and lent GPU-equivalents over time against the guarantee and the borrowing ceiling."""
    stamps = [t.isoformat() for t in series.times]
    ends = [stamps[0], stamps[-1]]
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "used", "x": stamps, "y": series.used,
         "line": {"shape": "hv", "color": "#1f77b4"}, "fill": "tozeroy"},
        {"type": "scatter", "mode": "lines", "name": "borrowed", "x": stamps, "y": series.borrowed,
         "line": {"shape": "hv", "color": "#d62728"}},
        {"type": "scatter", "mode": "lines", "name": "lent", "x": stamps, "y": series.lent,
         "line": {"shape": "hv", "color": "#2ca02c"}},
        {"type": "scatter", "mode": "lines", "name": "guaranteed", "x": ends, "y": [guaranteed, guaranteed],
         "line": {"dash": "dash", "color": "#444"}},
    ]  # fmt: skip
    if borrow_limit:
        ceiling = engine_quota.ceiling(guaranteed, borrow_limit, may_borrow=True)
        traces.append({"type": "scatter", "mode": "lines", "name": "guaranteed + borrowing", "x": ends,
                       "y": [ceiling, ceiling], "line": {"dash": "dot", "color": "#888"}})  # fmt: skip
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"{flavour}: GPU-equivalents"},
            "height": 280,
            "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
            "yaxis": {"rangemode": "tozero", "title": {"text": "GPU-equivalents"}},
            "legend": {"orientation": "h"},
        },
    }
