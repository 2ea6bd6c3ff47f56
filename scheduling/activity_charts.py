"""The workspace detail page's sparkline: GPU activity and memory over the last hours, as a plain plotly
figure dict (no I/O; the page hands it to Plotly.js). Missing figures stay gaps, never zeros."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduling.activity import Point


def sparkline(points: Sequence[Point], fb_total_mib: float | None, threshold: float) -> dict[str, Any]:
    """GPU activity (%, left) and memory used (GiB, right) per sample; the idle threshold as a dotted line."""
    times = [p.at.isoformat() for p in points]
    mode = "lines" if len(points) > 30 else "lines+markers"  # a run's first samples are points, not a line
    activity = [None if p.gpu_active is None else round(100 * p.gpu_active, 1) for p in points]
    memory = [None if p.fb_used_mib is None else round(p.fb_used_mib / 1024, 2) for p in points]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": mode, "name": "GPU activity %", "x": times, "y": activity,
         "line": {"width": 2, "color": "#2563eb"}, "connectgaps": False},
        {"type": "scatter", "mode": mode, "name": "memory GiB", "x": times, "y": memory, "yaxis": "y2",
         "line": {"width": 1, "color": "#9333ea", "dash": "dot"}, "connectgaps": False},
    ]  # fmt: skip
    memory_top = (fb_total_mib / 1024) if fb_total_mib else None
    layout: dict[str, Any] = {
        "height": 160,
        "margin": {"l": 40, "r": 40, "t": 10, "b": 30},
        "showlegend": True,
        "legend": {"orientation": "h", "y": -0.35},
        "yaxis": {"range": [0, 100], "title": {"text": "%"}, "fixedrange": True},
        "yaxis2": {"overlaying": "y", "side": "right", "rangemode": "tozero", "fixedrange": True}
        | ({"range": [0, memory_top]} if memory_top else {}),
        "shapes": [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": 100 * threshold,
                "y1": 100 * threshold,
                "line": {"dash": "dot", "width": 1, "color": "#b45309"},
            },
        ],
    }
    return {"data": data, "layout": layout}
