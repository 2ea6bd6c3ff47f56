"""The lab-month benchmark's HTML report: one self-contained file (Plotly.js inlined, nothing fetched) with
the figures table, what arms whose MIG layouts follow demand change, GPUs held and busy over the month per
arm, and the in-quota waits per arm and kind."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from scheduling.benchmarks.lab.figures import KINDS, Figures

_PALETTE = ("#6b7280", "#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626")


def usage_chart(arms: Sequence[Figures], start: datetime) -> go.Figure:
    """GPU-equivalents held (solid) and their activity-weighted part (dotted), per hour, per arm."""
    fig = go.Figure()
    for i, f in enumerate(arms):
        hours = [start + timedelta(hours=h) for h in range(len(f.hourly_allocated))]
        colour = _PALETTE[i % len(_PALETTE)]
        fig.add_scatter(x=hours, y=f.hourly_allocated, name=f"{f.arm}: held", line={"color": colour, "width": 1.5})
        fig.add_scatter(
            x=hours, y=f.hourly_active, name=f"{f.arm}: busy", line={"color": colour, "width": 1, "dash": "dot"}
        )
    capacity = max((f.capacity for f in arms), default=0.0)
    fig.add_hline(y=capacity, line={"color": "#111827", "width": 1}, annotation_text=f"{capacity:g} GPUs")
    fig.update_layout(
        title="GPUs held and busy, hourly means", yaxis_title="GPU-equivalents", height=420, margin={"t": 50}
    )
    return fig


def wait_chart(arms: Sequence[Figures]) -> go.Figure:
    """The in-quota waits' distribution per arm and kind: minutes against the share of requests."""
    fig = go.Figure()
    share = list(range(101))
    for i, f in enumerate(arms):
        for kind, dash in zip(KINDS, ("solid", "dash"), strict=True):
            values = f.wait_percentiles.get(kind) or []
            if values:
                # A wait of 0 cannot sit on a log axis: such requests are drawn at 0.01 min.
                fig.add_scatter(
                    x=[max(v, 0.01) for v in values],
                    y=share,
                    name=f"{f.arm}: {kind}",
                    line={"color": _PALETTE[i % len(_PALETTE)], "dash": dash},
                )
    fig.update_layout(
        title="Waits of in-quota requests",
        xaxis={"title": "minutes (log)", "type": "log"},
        yaxis_title="% of requests started within",
        height=420,
        margin={"t": 50},
    )
    return fig


def _table(arms: Sequence[Figures]) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def wait(f: Figures, kind: str) -> str:
        w = f.waits_in_quota[kind]
        return "-" if w.median_min is None or w.p95_min is None else f"{w.median_min:.1f} / {w.p95_min:.1f}"

    head = (
        "<tr><th>arm</th><th>GPUs held</th><th>held while short</th><th>busy of held</th><th>busy of fleet</th>"
        "<th>notebook wait, min (median / p95)</th><th>job wait, min</th><th>notebooks lost in use</th>"
        "<th>jobs done</th><th>idle GPU-hours</th><th>MIG repartitions</th></tr>"
    )
    rows = [
        f"<tr><td>{html.escape(f.arm)}</td><td>{pct(f.allocated)}</td><td>{pct(f.allocated_while_short)}</td>"
        f"<td>{pct(f.activity_of_allocated)}</td><td>{pct(f.fleet_activity)}</td><td>{wait(f, 'notebook')}</td>"
        f"<td>{wait(f, 'job')}</td><td>{f.lost_in_use}</td><td>{f.jobs_done} / {f.jobs}</td>"
        f"<td>{f.idle_gpu_hours:,.0f}</td><td>{f.repartitions}</td></tr>"
        for f in arms
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def render(title: str, summary: str, arms: Sequence[Figures], start: datetime, differences: Sequence[str] = ()) -> str:
    """``differences``: lines saying what an arm changes against another (``__main__.difference``)."""
    charts: list[Any] = [usage_chart(arms, start), wait_chart(arms)]
    parts = [
        pio.to_html(fig, include_plotlyjs=(i == 0), full_html=False, config={"displaylogo": False})
        for i, fig in enumerate(charts)
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>body{{font-family:system-ui,sans-serif;margin:2em;color:#111827}}"
        "table{border-collapse:collapse}th,td{border:1px solid #d1d5db;padding:4px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>{_table(arms)}"
        f"{''.join(f'<p class=difference>{html.escape(d)}</p>' for d in differences)}{''.join(parts)}</body></html>"
    )
