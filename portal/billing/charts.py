"""Figures for the billing pages, as plain plotly figure dicts (no I/O; the page hands them to Plotly.js).

Everything in a figure is JSON as it stands: money and hours become floats (money rounded to the cent,
hours to the hundredth), dates ISO strings, missing values ``None`` (null: a gap, never a zero). A builder
given nothing to draw returns a figure without traces that says so (``has_data`` tells the page).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the report module needs Django; these builders don't
    from portal.billing.report import Line

NO_DATA = "No data for this period"
OTHER = "Other"
TOP_GROUPS = 8  # cost_by_month: groups beyond these are one "Other" trace
GPU_HOURS = "GPU-h"

# Plotly's default colour cycle, spelt out so that a model or group keeps its colour across traces.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
OTHER_COLOUR = "#b0b0b0"
IDLE_COLOUR = "#d62728"
BUSY_COLOUR = "#1f77b4"

_CENT = Decimal("0.01")
_MARGIN = {"l": 50, "r": 20, "t": 40, "b": 30}  # the axes grow it to fit their labels (automargin)
_HEIGHT = 300

WaitRow = tuple[str, float | None, float | None, float | None]  # label, p50, p95, p99 in seconds


# -- helpers ------------------------------------------------------------------------------------------


def _num(value: Decimal | float | int | None, places: int = 2) -> float | None:
    """A plain float for the figure (numpy scalars and Decimals included); None, NaN and infinities are
    gaps (JSON has no NaN)."""
    if value is None:
        return None
    number = float(value)
    return round(number, places) if math.isfinite(number) else None


def _money(value: Decimal) -> float:
    return float(value.quantize(_CENT, rounding=ROUND_HALF_UP))


def _month(month: date) -> str:
    return f"{month.year:04d}-{month.month:02d}"


def _layout(title: str, x_title: str, y_title: str, height: int = _HEIGHT, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title},
        "height": height,
        "margin": dict(_MARGIN),
        "xaxis": {"automargin": True} | ({"title": {"text": x_title}} if x_title else {}),
        "yaxis": {"automargin": True} | ({"title": {"text": y_title}} if y_title else {}),
        # Under the axis title, in a strip of its own (a container-anchored legend reserves its margin).
        "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
    }
    for key, value in extra.items():
        if key in ("xaxis", "yaxis"):
            layout[key] = layout[key] | value
        else:
            layout[key] = value
    return layout


def _bars_height(count: int, per_bar: int = 26) -> int:
    """A horizontal bar chart's height: room for each bar, within what a card can take."""
    return max(220, min(900, 110 + per_bar * count))


def text(label: str) -> str:
    """A name as plotly should show it: plotly renders a subset of HTML (links, bold) in labels and legends,
    and names come from people (teams, users), so their markup is escaped."""
    return html.escape(label, quote=False)


def _distinct(lines: Sequence[Line]) -> list[str]:
    """The lines' labels, escaped, with the key added to any label two lines share (a category axis would
    merge them into one bar)."""
    seen: dict[str, int] = {}
    for line in lines:
        seen[line.label] = seen.get(line.label, 0) + 1
    return [text(f"{line.label} ({line.key})" if seen[line.label] > 1 else line.label) for line in lines]


def _same_length(name: str, values: Sequence[Any], expected: int) -> None:
    if len(values) != expected:
        raise ValueError(f"{name} has {len(values)} values for {expected} points")


def empty_figure(title: str, height: int = _HEIGHT) -> dict[str, Any]:
    """A figure with no traces that says there is nothing to show."""
    return {
        "data": [],
        "layout": {
            "title": {"text": title},
            "height": height,
            "margin": dict(_MARGIN),
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {
                    "text": NO_DATA,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "showarrow": False,
                    "font": {"size": 14, "color": "#666"},
                }
            ],
        },
    }


def has_data(figure: Mapping[str, Any]) -> bool:
    """Whether some trace of the figure has a value to draw (a horizontal bar's values are its x)."""
    for trace in figure.get("data") or []:
        values = trace.get("x" if trace.get("orientation") == "h" else "y") or []
        if any(v is not None for v in values):
            return True
    return False


# -- finance ------------------------------------------------------------------------------------------


def cost_by_month(
    months: Sequence[date], costs: Mapping[str, Sequence[Decimal]], currency: str, title: str
) -> dict[str, Any]:
    """Stacked bars of cost per month, one trace per group (cost centre, team), the largest total at the
    bottom and first in the legend. Beyond the top ``TOP_GROUPS`` the groups are summed into one "Other"
    trace (only when that merges two or more: one would merely lose its name). Groups with no cost in
    the months are left out. Credits (negative costs) stack below zero."""
    for group, values in costs.items():
        _same_length(f"costs[{group!r}]", values, len(months))
    totals = {group: sum(values, Decimal(0)) for group, values in costs.items()}
    groups = sorted((g for g in costs if any(costs[g])), key=lambda g: (-totals[g], g))
    if not months or not groups:
        return empty_figure(title)
    shown = groups if len(groups) <= TOP_GROUPS + 1 else groups[:TOP_GROUPS]
    rest = groups[len(shown) :]
    x = [_month(m) for m in months]
    hover = f"%{{fullData.name}}<br>%{{x}}: %{{y:,.2f}} {currency}<extra></extra>"
    traces: list[dict[str, Any]] = [
        {"type": "bar", "name": text(group), "x": x, "y": [_money(v) for v in costs[group]],
         "marker": {"color": PALETTE[index % len(PALETTE)]}, "hovertemplate": hover}
        for index, group in enumerate(shown)
    ]  # fmt: skip
    if rest:
        merged = [sum((costs[g][i] for g in rest), Decimal(0)) for i in range(len(months))]
        traces.append(
            {"type": "bar", "name": OTHER, "x": x, "y": [_money(v) for v in merged],
             "marker": {"color": OTHER_COLOUR},
             "hovertemplate": f"{OTHER} ({len(rest)} groups)<br>%{{x}}: %{{y:,.2f}} {currency}<extra></extra>"}
        )  # fmt: skip
    layout = _layout(
        title,
        "Month",
        f"Cost ({currency})",
        height=340,
        barmode="relative",
        xaxis={"type": "category"},
        yaxis={"tickformat": ",.0f"},
    )
    layout["legend"] |= {"traceorder": "normal"}
    return {"data": traces, "layout": layout}


def monthly_trend(
    months: Sequence[date], totals: Sequence[Decimal], idle_costs: Sequence[Decimal], currency: str
) -> dict[str, Any]:
    """Total cost per month (a line, left axis) and the share of it that paid for idle GPUs (%, right
    axis, dotted; a gap for a month that cost nothing). The page passes the last 12 months."""
    title = "Cost per month"
    _same_length("totals", totals, len(months))
    _same_length("idle_costs", idle_costs, len(months))
    if not months or not (any(totals) or any(idle_costs)):
        return empty_figure(title)
    x = [_month(m) for m in months]
    share = [_num(100 * idle / total, 1) if total else None for total, idle in zip(totals, idle_costs, strict=True)]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "name": "total cost", "x": x,
         "y": [_money(v) for v in totals], "line": {"color": BUSY_COLOUR, "width": 2},
         "hovertemplate": f"%{{x}}: %{{y:,.2f}} {currency}<extra>total</extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": "idle share", "x": x, "y": share, "yaxis": "y2",
         "line": {"color": IDLE_COLOUR, "dash": "dot"}, "connectgaps": False,
         "hovertemplate": "%{x}: %{y:.1f}% idle<extra></extra>"},
    ]  # fmt: skip
    layout = _layout(
        title,
        "Month",
        f"Cost ({currency})",
        xaxis={"type": "category"},
        yaxis={"rangemode": "tozero", "tickformat": ",.0f"},
        yaxis2={
            "title": {"text": "Idle share (%)"},
            "overlaying": "y",
            "side": "right",
            "range": [0, 100],
            "ticksuffix": "%",
            "showgrid": False,
            "automargin": True,
        },
    )
    layout["margin"] |= {"r": 60}
    return {"data": data, "layout": layout}


def top_spenders(lines: Sequence[Line], currency: str, n: int = 10) -> dict[str, Any]:
    """The ``n`` lines that cost most (their total, spread platform share included) as horizontal bars,
    the largest at the top. Lines that cost nothing are left out."""
    title = f"Top {n} by cost"
    top = sorted((line for line in lines if line.total > 0), key=lambda line: (-line.total, line.label))[:n]
    if not top:
        return empty_figure(title)
    trace = {
        "type": "bar",
        "orientation": "h",
        "name": "cost",
        "x": [_money(line.total) for line in top],
        "y": _distinct(top),
        "customdata": [_num(line.gpu_hours, 1) for line in top],
        "marker": {"color": BUSY_COLOUR},
        "hovertemplate": f"%{{y}}<br>%{{x:,.2f}} {currency}<br>%{{customdata:,.1f}} {GPU_HOURS}<extra></extra>",
    }
    layout = _layout(
        title,
        f"Cost ({currency})",
        "",
        height=_bars_height(len(top)),
        showlegend=False,
        yaxis={"autorange": "reversed"},
        xaxis={"rangemode": "tozero", "tickformat": ",.0f"},
    )
    return {"data": [trace], "layout": layout}


def idle_cost(line: Line) -> Decimal:
    """What of the line's cost paid for idle GPU time: cost x idle GPU-hours / GPU-hours, to the cent
    (hours that were never measured count as not idle)."""
    if line.gpu_hours <= 0 or line.cost == 0:
        return Decimal(0)
    share = min(max(line.idle_gpu_hours / line.gpu_hours, Decimal(0)), Decimal(1))
    return (line.cost * share).quantize(_CENT, rounding=ROUND_HALF_UP)


def idle_cost_share(lines: Sequence[Line], currency: str) -> dict[str, Any]:
    """Per line, its cost split into what paid for idle GPUs and the rest (stacked horizontal bars, the
    largest idle cost at the top). The split is of the held cost; a spread platform share is not in it."""
    title = "Cost of idle GPUs"
    priced = [line for line in lines if line.cost > 0]
    if not priced:
        return empty_figure(title)
    split = sorted(((idle_cost(line), line) for line in priced), key=lambda p: (-p[0], -p[1].cost, p[1].label))
    ordered = [line for _, line in split]
    idle = [amount for amount, _ in split]
    labels = _distinct(ordered)
    shares = [_num(100 * line.idle_share, 1) if line.idle_share is not None else None for line in ordered]
    hover = (
        f"%{{y}}<br>%{{x:,.2f}} {currency}<br>%{{customdata:.1f}}% of GPU-hours idle<extra>%{{fullData.name}}</extra>"
    )
    data: list[dict[str, Any]] = [
        {"type": "bar", "orientation": "h", "name": "idle", "y": labels,
         "x": [_money(amount) for amount in idle], "customdata": shares,
         "marker": {"color": IDLE_COLOUR}, "hovertemplate": hover},
        {"type": "bar", "orientation": "h", "name": "rest", "y": labels,
         "x": [_money(line.cost - amount) for line, amount in zip(ordered, idle, strict=True)],
         "customdata": shares,
         "marker": {"color": BUSY_COLOUR}, "hovertemplate": hover},
    ]  # fmt: skip
    layout = _layout(
        title,
        f"Cost ({currency})",
        "",
        height=_bars_height(len(ordered)),
        barmode="stack",
        yaxis={"autorange": "reversed"},
        xaxis={"rangemode": "tozero", "tickformat": ",.0f"},
    )
    layout["legend"] |= {"traceorder": "normal"}
    return {"data": data, "layout": layout}


# -- team leads ---------------------------------------------------------------------------------------


def member_usage(lines: Sequence[Line]) -> dict[str, Any]:
    """Per member (lines grouped by user), grouped horizontal bars: GPU-hours held, GPU-hours used
    (activity-weighted) and GPU-hours idle; the member who held most at the top."""
    title = "GPU-hours per member"
    members = sorted(
        (line for line in lines if line.gpu_hours or line.used_gpu_hours or line.idle_gpu_hours),
        key=lambda line: (-line.gpu_hours, line.label),
    )
    if not members:
        return empty_figure(title)
    labels = _distinct(members)
    series = (
        ("held", "#7f7f7f", [line.gpu_hours for line in members]),
        ("used", "#2ca02c", [line.used_gpu_hours for line in members]),
        ("idle", IDLE_COLOUR, [line.idle_gpu_hours for line in members]),
    )
    data = [
        {"type": "bar", "orientation": "h", "name": name, "y": labels, "x": [_num(v) for v in values],
         "marker": {"color": colour}, "hovertemplate": f"%{{y}}<br>%{{x:,.2f}} {GPU_HOURS} {name}<extra></extra>"}
        for name, colour, values in series
    ]  # fmt: skip
    layout = _layout(
        title,
        f"GPU-hours ({GPU_HOURS})",
        "",
        height=_bars_height(len(members), per_bar=48),
        barmode="group",
        yaxis={"autorange": "reversed"},
        xaxis={"rangemode": "tozero"},
    )
    layout["legend"] |= {"traceorder": "normal"}
    return {"data": data, "layout": layout}


def budget_burndown(
    days: Sequence[date],
    spent_cumulative: Sequence[Decimal],
    budget: Decimal,
    forecast_end: Decimal | None,
    unit: str,
    month_end: date,
) -> dict[str, Any]:
    """Spend so far this month (cumulative, a line through today = the last day), the budget (a thin
    horizontal line over the month) and, when there is a forecast, a dashed segment from today's spend to
    the forecast at ``month_end`` (red when it ends over budget). ``unit``: a currency code or "GPU-h"."""
    title = "Budget this month"
    _same_length("spent_cumulative", spent_cumulative, len(days))
    if not days:
        return empty_figure(title)
    places = 1 if unit == GPU_HOURS else 2
    fmt = f",.{places}f"
    x = [d.isoformat() for d in days]
    spent = [_num(v, places) for v in spent_cumulative]
    first = days[0].replace(day=1)
    end = max(month_end, days[-1])
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers" if len(days) <= 3 else "lines", "name": "spent", "x": x,
         "y": spent, "line": {"color": BUSY_COLOUR, "width": 2},
         "hovertemplate": f"%{{x}}: %{{y:{fmt}}} {unit}<extra>spent</extra>"},
        {"type": "scatter", "mode": "lines", "name": "budget", "x": [first.isoformat(), end.isoformat()],
         "y": [_num(budget, places)] * 2, "line": {"color": "#444", "width": 1},
         "hovertemplate": f"budget: %{{y:{fmt}}} {unit}<extra></extra>"},
    ]  # fmt: skip
    if forecast_end is not None and month_end > days[-1]:
        over = forecast_end > budget
        data.append(
            {"type": "scatter", "mode": "lines+markers", "name": "forecast",
             "x": [x[-1], month_end.isoformat()], "y": [spent[-1], _num(forecast_end, places)],
             "line": {"color": IDLE_COLOUR if over else BUSY_COLOUR, "dash": "dash"}, "marker": {"size": [0, 7]},
             "hovertemplate": f"%{{x}}: %{{y:{fmt}}} {unit}<extra>forecast</extra>"}
        )  # fmt: skip
    layout = _layout(
        title,
        "Day",
        f"Spent ({unit})",
        xaxis={"type": "date", "range": [first.isoformat(), end.isoformat()]},
        yaxis={"rangemode": "tozero"},
    )
    return {"data": data, "layout": layout}


# -- operators ----------------------------------------------------------------------------------------


def allocated_vs_active(
    times: Sequence[datetime],
    allocated: Mapping[str, Sequence[float]],
    active: Mapping[str, Sequence[float | None]],
) -> dict[str, Any]:
    """Per GPU model, the GPUs allocated to workspaces (solid steps) and the GPUs actually busy (dotted;
    gaps where telemetry is missing), both in the model's colour and one legend group."""
    title = "Allocated vs active GPUs"
    for name, series in (("allocated", allocated), ("active", active)):
        for model, values in series.items():
            _same_length(f"{name}[{model!r}]", values, len(times))
    models = sorted(set(allocated) | set(active))
    if not times or not models:
        return empty_figure(title)
    x = [t.isoformat() for t in times]
    data: list[dict[str, Any]] = []
    for index, model in enumerate(models):
        colour = PALETTE[index % len(PALETTE)]
        if model in allocated:
            data.append(
                {"type": "scatter", "mode": "lines", "name": f"{model} allocated", "legendgroup": model,
                 "x": x, "y": [_num(v) for v in allocated[model]], "line": {"color": colour, "shape": "hv"},
                 "hovertemplate": "%{x}: %{y:.2f} GPUs allocated<extra>" + model + "</extra>"}
            )  # fmt: skip
        if model in active:
            data.append(
                {"type": "scatter", "mode": "lines", "name": f"{model} active", "legendgroup": model,
                 "x": x, "y": [_num(v) for v in active[model]], "connectgaps": False,
                 "line": {"color": colour, "dash": "dot"},
                 "hovertemplate": "%{x}: %{y:.2f} GPUs active<extra>" + model + "</extra>"}
            )  # fmt: skip
    if not has_data({"data": data}):
        return empty_figure(title)
    layout = _layout(title, "Time", "GPUs", yaxis={"rangemode": "tozero"})
    return {"data": data, "layout": layout}


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else _num(float(seconds) / 60, 2)


def queue_wait_percentiles(rows: Sequence[WaitRow]) -> dict[str, Any]:
    """Queue wait per row (a GPU model, a kind of workspace): p50, p95 and p99 as grouped bars, in
    minutes; a missing percentile has no bar."""
    title = "Queue wait"
    if not any(v is not None for row in rows for v in row[1:]):
        return empty_figure(title)
    labels = [label for label, *_ in rows]
    columns = [[_minutes(p50) for _, p50, _, _ in rows], [_minutes(p95) for _, _, p95, _ in rows],
               [_minutes(p99) for _, _, _, p99 in rows]]  # fmt: skip
    colours = ("#9ecae1", "#4292c6", "#08519c")
    data = [
        {"type": "bar", "name": name, "x": labels, "y": values, "marker": {"color": colour},
         "hovertemplate": f"%{{x}}<br>{name}: %{{y:,.1f}} min<extra></extra>"}
        for values, name, colour in zip(columns, ("p50", "p95", "p99"), colours, strict=True)
    ]  # fmt: skip
    layout = _layout(
        title, "", "Wait (minutes)", barmode="group", xaxis={"type": "category"}, yaxis={"rangemode": "tozero"}
    )
    layout["legend"] |= {"traceorder": "normal"}
    return {"data": data, "layout": layout}


__all__ = [
    "NO_DATA",
    "OTHER",
    "TOP_GROUPS",
    "WaitRow",
    "allocated_vs_active",
    "budget_burndown",
    "cost_by_month",
    "empty_figure",
    "has_data",
    "idle_cost",
    "idle_cost_share",
    "member_usage",
    "monthly_trend",
    "queue_wait_percentiles",
    "top_spenders",
]
