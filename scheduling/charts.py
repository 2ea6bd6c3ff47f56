"""Figures for the quota pages, as plain plotly figure dicts (no I/O; the page hands them to Plotly.js)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime | None  # None: still holding
    units: Decimal


def usage_series(
    intervals: Sequence[Interval], start: datetime, end: datetime, points: int = 200
) -> tuple[list[datetime], list[float]]:
    """Units held at each of ``points`` evenly spaced instants between ``start`` and ``end``."""
    span = (end - start).total_seconds()
    offsets = np.linspace(0.0, span, points)
    held = np.zeros(points)
    for interval in intervals:
        begin = (interval.start - start).total_seconds()
        finish = span if interval.end is None else (interval.end - start).total_seconds()
        held += np.where((offsets >= begin) & (offsets < finish), float(interval.units), 0.0)
    return [start + timedelta(seconds=float(s)) for s in offsets], [round(float(v), 4) for v in held]


def quota_figure(
    flavour: str, times: list[datetime], used: list[float], guaranteed: float, borrow_limit: float
) -> dict[str, Any]:
    """Used GPU-equivalents over time against the guarantee and the borrowing ceiling."""
    stamps = [t.isoformat() for t in times]
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "used", "x": stamps, "y": used, "line": {"shape": "hv"},
         "fill": "tozeroy"},
        {"type": "scatter", "mode": "lines", "name": "guaranteed", "x": [stamps[0], stamps[-1]],
         "y": [guaranteed, guaranteed], "line": {"dash": "dash"}},
    ]  # fmt: skip
    if borrow_limit:
        ceiling = guaranteed + borrow_limit
        traces.append({"type": "scatter", "mode": "lines", "name": "guaranteed + borrowing",
                       "x": [stamps[0], stamps[-1]], "y": [ceiling, ceiling], "line": {"dash": "dot"}})  # fmt: skip
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"{flavour}: GPU-equivalents in use"},
            "height": 280,
            "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
            "yaxis": {"rangemode": "tozero", "title": {"text": "GPU-equivalents"}},
            "legend": {"orientation": "h"},
        },
    }
