"""The billing figures, built from hand-made lines and series: values, order, gaps and emptiness. No db."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from portal.billing import charts
from portal.billing.report import Line

D = Decimal
MONTHS = [date(2026, 1, 1), date(2026, 2, 1), date(2026, 3, 1)]
T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def line(key: str, cost: str, gpu_hours: str = "10", idle: str = "0", used: str = "0", **extra: Any) -> Line:
    return Line(
        key=key,
        label=extra.pop("label", key.title()),
        cost=D(cost),
        gpu_hours=D(gpu_hours),
        idle_gpu_hours=D(idle),
        used_gpu_hours=D(used),
        **extra,
    )


def traces(figure: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in figure["data"]}


def is_empty(figure: dict[str, Any]) -> bool:
    texts = [a["text"] for a in figure["layout"].get("annotations", [])]
    return figure["data"] == [] and texts == [charts.NO_DATA] and not charts.has_data(figure)


def plain(figure: dict[str, Any]) -> dict[str, Any]:
    """The figure through JSON and back: no Decimal, datetime or NaN may be left in it."""
    assert charts.has_data(figure)
    parsed: dict[str, Any] = json.loads(json.dumps(figure, allow_nan=False))
    assert parsed == figure
    return parsed


# -- cost by month ------------------------------------------------------------------------------------


def test_cost_by_month_stacks_groups_largest_first_with_month_labels() -> None:
    costs = {
        "RES-2": [D("1.00"), D("2.00"), D("3.00")],
        "RES-1": [D("10.00"), D("0.00"), D("5.50")],
        "idle": [D(0), D(0), D(0)],  # no cost at all: not drawn
        "RES-3": [D("3.00"), D("3.00"), D("0.005")],  # half a cent rounds up
    }
    figure = plain(charts.cost_by_month(MONTHS, costs, "EUR", "Cost per cost centre"))
    assert [t["name"] for t in figure["data"]] == ["RES-1", "RES-3", "RES-2"]
    first = figure["data"][0]
    assert first["type"] == "bar" and first["x"] == ["2026-01", "2026-02", "2026-03"]
    assert first["y"] == [10.0, 0.0, 5.5]
    assert traces(figure)["RES-3"]["y"] == [3.0, 3.0, 0.01]
    assert "EUR" in first["hovertemplate"]
    layout = figure["layout"]
    assert layout["barmode"] == "relative" and layout["title"]["text"] == "Cost per cost centre"
    assert layout["yaxis"]["title"]["text"] == "Cost (EUR)" and layout["xaxis"]["type"] == "category"
    assert layout["height"] and layout["margin"]


def test_cost_by_month_merges_groups_beyond_the_top_eight_into_other() -> None:
    # Ten groups: g0 costs most, g9 least; g8 and g9 are merged.
    costs = {f"g{i}": [D(100 - i), D(1)] for i in range(10)}
    figure = plain(charts.cost_by_month(MONTHS[:2], costs, "EUR", "Cost"))
    names = [t["name"] for t in figure["data"]]
    assert names == [*(f"g{i}" for i in range(8)), charts.OTHER]
    assert traces(figure)[charts.OTHER]["y"] == [92.0 + 91.0, 2.0]
    assert "2 groups" in traces(figure)[charts.OTHER]["hovertemplate"]


def test_cost_by_month_keeps_a_ninth_group_by_name() -> None:
    costs = {f"g{i}": [D(100 - i)] for i in range(9)}
    figure = charts.cost_by_month(MONTHS[:1], costs, "EUR", "Cost")
    assert [t["name"] for t in figure["data"]] == [f"g{i}" for i in range(9)]


def test_cost_by_month_orders_ties_by_name_and_credits_last() -> None:
    costs = {"b": [D(5)], "a": [D(5)], "credit": [D(-2)]}
    figure = plain(charts.cost_by_month(MONTHS[:1], costs, "EUR", "Cost"))
    assert [t["name"] for t in figure["data"]] == ["a", "b", "credit"]
    assert traces(figure)["credit"]["y"] == [-2.0]


def test_cost_by_month_refuses_series_that_do_not_match_the_months() -> None:
    with pytest.raises(ValueError, match="costs"):
        charts.cost_by_month(MONTHS, {"a": [D(1)]}, "EUR", "Cost")


# -- monthly trend ------------------------------------------------------------------------------------


def test_monthly_trend_draws_total_and_idle_share_on_a_second_axis() -> None:
    figure = plain(charts.monthly_trend(MONTHS, [D("200.00"), D(0), D("30.00")], [D("50.00"), D(0), D("10.00")], "EUR"))
    total, idle = figure["data"]
    assert total["y"] == [200.0, 0.0, 30.0] and total["x"] == ["2026-01", "2026-02", "2026-03"]
    assert idle["yaxis"] == "y2" and idle["y"] == [25.0, None, 33.3]  # a month that cost nothing: a gap
    layout = figure["layout"]
    assert layout["yaxis"]["title"]["text"] == "Cost (EUR)"
    assert layout["yaxis2"]["overlaying"] == "y" and layout["yaxis2"]["range"] == [0, 100]
    assert "%" in layout["yaxis2"]["title"]["text"]


def test_monthly_trend_with_nothing_spent_is_empty() -> None:
    assert is_empty(charts.monthly_trend([], [], [], "EUR"))
    assert is_empty(charts.monthly_trend(MONTHS[:1], [D(0)], [D(0)], "EUR"))


# -- top spenders -------------------------------------------------------------------------------------


def test_top_spenders_are_the_n_largest_totals_largest_at_the_top() -> None:
    lines = [
        line("a", "10.00"),
        line("b", "30.00", platform_cost=D("5.25")),  # the total counts the platform share
        line("c", "20.00"),
        line("d", "0.00"),  # cost nothing: not a spender
        line("e", "1.00"),
    ]
    figure = plain(charts.top_spenders(lines, "EUR", n=3))
    (trace,) = figure["data"]
    assert trace["orientation"] == "h"
    assert trace["y"] == ["B", "C", "A"] and trace["x"] == [35.25, 20.0, 10.0]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"  # first category on top
    assert figure["layout"]["xaxis"]["title"]["text"] == "Cost (EUR)"


def test_top_spenders_tell_apart_lines_with_the_same_label() -> None:
    lines = [line("asmith", "2.00", label="A. Smith"), line("asmith2", "1.00", label="A. Smith")]
    (trace,) = charts.top_spenders(lines, "EUR")["data"]
    assert trace["y"] == ["A. Smith (asmith)", "A. Smith (asmith2)"]


def test_top_spenders_of_nothing_is_empty() -> None:
    assert is_empty(charts.top_spenders([], "EUR"))
    assert is_empty(charts.top_spenders([line("a", "0")], "EUR"))


# -- idle cost ----------------------------------------------------------------------------------------


def test_idle_cost_is_the_cost_of_the_idle_share_of_the_hours() -> None:
    assert charts.idle_cost(line("a", "100.00", gpu_hours="8", idle="2")) == D("25.00")
    assert charts.idle_cost(line("a", "10.00", gpu_hours="3", idle="1")) == D("3.33")
    assert charts.idle_cost(line("a", "10.00", gpu_hours="0", idle="0")) == D(0)
    assert charts.idle_cost(line("a", "10.00", gpu_hours="2", idle="3")) == D("10.00")  # never beyond the cost


def test_idle_cost_share_splits_each_cost_largest_idle_first() -> None:
    lines = [
        line("a", "100.00", gpu_hours="8", idle="2"),  # 25.00 idle
        line("b", "10.00", gpu_hours="3", idle="1"),  # 3.33 idle, 6.67 rest: the parts add up to the cost
        line("c", "60.00", gpu_hours="4", idle="2"),  # 30.00 idle
        line("d", "0.00", gpu_hours="4", idle="4"),  # no price: nothing paid for idle
    ]
    figure = plain(charts.idle_cost_share(lines, "EUR"))
    idle, rest = figure["data"]
    assert idle["name"] == "idle" and rest["name"] == "rest"
    assert idle["y"] == rest["y"] == ["C", "A", "B"]
    assert idle["x"] == [30.0, 25.0, 3.33] and rest["x"] == [30.0, 75.0, 6.67]
    assert idle["customdata"] == [50.0, 25.0, 33.3]  # idle share of the GPU-hours, for the hover
    assert figure["layout"]["barmode"] == "stack" and idle["orientation"] == rest["orientation"] == "h"


def test_idle_cost_share_of_unpriced_lines_is_empty() -> None:
    assert is_empty(charts.idle_cost_share([line("d", "0.00", idle="4")], "EUR"))


# -- member usage -------------------------------------------------------------------------------------


def test_member_usage_groups_held_used_and_idle_hours_per_member() -> None:
    lines = [
        line("alice", "5", gpu_hours="10.5", used="6.25", idle="3", label="Alice"),
        line("bob", "9", gpu_hours="20", used="19", idle="0.5", label="Bob"),
        line("carol", "0", gpu_hours="0", label="Carol"),  # held nothing
    ]
    figure = plain(charts.member_usage(lines))
    by_name = traces(figure)
    assert list(by_name) == ["held", "used", "idle"]
    assert by_name["held"]["y"] == ["Bob", "Alice"]
    assert by_name["held"]["x"] == [20.0, 10.5]
    assert by_name["used"]["x"] == [19.0, 6.25]
    assert by_name["idle"]["x"] == [0.5, 3.0]
    assert figure["layout"]["barmode"] == "group"
    assert "GPU-h" in figure["layout"]["xaxis"]["title"]["text"]


def test_member_usage_of_nobody_is_empty() -> None:
    assert is_empty(charts.member_usage([]))


# -- budget burndown ----------------------------------------------------------------------------------

DAYS = [date(2026, 3, d) for d in (1, 2, 3, 4)]
SPENT = [D("10.00"), D("25.50"), D("40.00"), D("52.25")]


def test_burndown_draws_spend_budget_and_a_forecast_from_today_to_month_end() -> None:
    figure = plain(charts.budget_burndown(DAYS, SPENT, D("300"), D("405.10"), "EUR", date(2026, 3, 31)))
    by_name = traces(figure)
    assert list(by_name) == ["spent", "budget", "forecast"]
    assert by_name["spent"]["x"] == ["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"]
    assert by_name["spent"]["y"] == [10.0, 25.5, 40.0, 52.25]
    assert by_name["budget"]["x"] == ["2026-03-01", "2026-03-31"] and by_name["budget"]["y"] == [300.0, 300.0]
    forecast = by_name["forecast"]
    assert forecast["x"] == ["2026-03-04", "2026-03-31"] and forecast["y"] == [52.25, 405.1]
    assert forecast["line"]["dash"] == "dash" and "dash" not in by_name["budget"]["line"]
    assert forecast["line"]["color"] == charts.IDLE_COLOUR  # over budget: red
    assert figure["layout"]["yaxis"]["title"]["text"] == "Spent (EUR)"
    assert figure["layout"]["xaxis"]["range"] == ["2026-03-01", "2026-03-31"]


def test_burndown_in_gpu_hours_within_budget_and_without_a_forecast() -> None:
    within = charts.budget_burndown(DAYS, [D("1.04")] * 4, D("100"), D("50"), "GPU-h", date(2026, 3, 31))
    assert traces(within)["forecast"]["line"]["color"] != charts.IDLE_COLOUR
    assert traces(within)["spent"]["y"] == [1.0] * 4  # GPU-hours to the tenth
    assert within["layout"]["yaxis"]["title"]["text"] == "Spent (GPU-h)"
    unforecast = plain(charts.budget_burndown(DAYS, SPENT, D("100"), None, "GPU-h", date(2026, 3, 31)))
    assert [t["name"] for t in unforecast["data"]] == ["spent", "budget"]
    last_day = charts.budget_burndown(DAYS, SPENT, D("100"), D("60"), "EUR", date(2026, 3, 4))
    assert "forecast" not in traces(last_day)  # the month is over: nothing left to forecast


def test_burndown_with_no_days_is_empty() -> None:
    assert is_empty(charts.budget_burndown([], [], D("100"), None, "EUR", date(2026, 3, 31)))


# -- allocated vs active ------------------------------------------------------------------------------


def test_allocated_and_active_per_model_share_a_colour_and_active_keeps_gaps() -> None:
    times = [T0 + timedelta(minutes=5 * i) for i in range(3)]
    figure = plain(
        charts.allocated_vs_active(
            times,
            {"H100": [8.0, 8.0, 6.0], "A100": [2.0, 2.0, 2.0]},
            {"H100": [5.5, None, 4.0], "A100": [float("nan"), 1.0, 1.0]},
        )
    )
    by_name = traces(figure)
    assert list(by_name) == ["A100 allocated", "A100 active", "H100 allocated", "H100 active"]
    assert by_name["H100 allocated"]["x"] == [t.isoformat() for t in times]
    assert by_name["H100 allocated"]["y"] == [8.0, 8.0, 6.0]
    assert by_name["H100 active"]["y"] == [5.5, None, 4.0] and by_name["H100 active"]["connectgaps"] is False
    assert by_name["A100 active"]["y"] == [None, 1.0, 1.0]  # NaN is a gap too (JSON has no NaN)
    assert by_name["H100 active"]["line"]["dash"] == "dot" and "dash" not in by_name["H100 allocated"]["line"]
    assert by_name["H100 active"]["line"]["color"] == by_name["H100 allocated"]["line"]["color"]
    assert by_name["H100 active"]["line"]["color"] != by_name["A100 active"]["line"]["color"]
    assert '"y": [5.5, null, 4.0]' in json.dumps(by_name["H100 active"])
    assert figure["layout"]["yaxis"]["title"]["text"] == "GPUs"


def test_allocated_vs_active_without_samples_is_empty() -> None:
    assert is_empty(charts.allocated_vs_active([], {}, {}))
    assert is_empty(charts.allocated_vs_active([T0], {}, {"H100": [None]}))


# -- queue wait ---------------------------------------------------------------------------------------


def test_queue_wait_percentiles_are_grouped_bars_in_minutes() -> None:
    rows = [("H100", 60.0, 600.0, 1800.0), ("L40S", 30.0, None, 95.0)]
    figure = plain(charts.queue_wait_percentiles(rows))
    by_name = traces(figure)
    assert list(by_name) == ["p50", "p95", "p99"]
    assert by_name["p50"]["x"] == ["H100", "L40S"]
    assert by_name["p50"]["y"] == [1.0, 0.5]
    assert by_name["p95"]["y"] == [10.0, None]
    assert by_name["p99"]["y"] == [30.0, 1.58]
    assert figure["layout"]["barmode"] == "group"
    assert figure["layout"]["yaxis"]["title"]["text"] == "Wait (minutes)"


def test_queue_wait_without_any_percentile_is_empty() -> None:
    assert is_empty(charts.queue_wait_percentiles([]))
    assert is_empty(charts.queue_wait_percentiles([("H100", None, None, None)]))


# -- every figure -------------------------------------------------------------------------------------


def test_every_figure_has_a_title_a_size_and_survives_json() -> None:
    lines = [line("a", "10.00", idle="1", used="2"), line("b", "5.00")]
    figures = [
        charts.cost_by_month(MONTHS[:1], {"a": [D("1.10")]}, "EUR", "Cost"),
        charts.monthly_trend(MONTHS[:1], [D("1.10")], [D("0.10")], "EUR"),
        charts.top_spenders(lines, "EUR"),
        charts.idle_cost_share(lines, "EUR"),
        charts.member_usage(lines),
        charts.budget_burndown(DAYS[:1], [D("1.10")], D("2"), D("3"), "EUR", date(2026, 3, 31)),
        charts.allocated_vs_active([T0], {"H100": [1.0]}, {"H100": [0.5]}),
        charts.queue_wait_percentiles([("H100", 1.0, 2.0, 3.0)]),
    ]
    for figure in figures:
        plain(figure)
        layout = figure["layout"]
        assert layout["title"]["text"] and layout["height"] >= 200 and set(layout["margin"]) == {"l", "r", "t", "b"}
    empties = [
        charts.cost_by_month([], {}, "EUR", "Cost"),
        charts.top_spenders([], "EUR"),
        charts.idle_cost_share([], "EUR"),
        charts.queue_wait_percentiles([]),
    ]
    for figure in empties:
        assert is_empty(figure) and json.loads(json.dumps(figure)) == figure
        assert figure["layout"]["title"]["text"]


def test_has_data_looks_at_the_values() -> None:
    assert not charts.has_data({"data": [], "layout": {}})
    assert not charts.has_data({"data": [{"type": "scatter", "x": ["2026-03-01"], "y": [None]}]})
    assert charts.has_data({"data": [{"type": "scatter", "x": ["2026-03-01"], "y": [0.0]}]})
    assert not charts.has_data({"data": [{"type": "bar", "orientation": "h", "x": [None], "y": ["a"]}]})


def test_names_people_chose_are_shown_not_rendered() -> None:
    lines = [Line(key="x", label='<a href="https://evil.example">Team</a>', gpu_hours=Decimal(1), cost=Decimal(2))]
    figure = charts.top_spenders(lines, "EUR")
    assert figure["data"][0]["y"] == ['&lt;a href="https://evil.example"&gt;Team&lt;/a&gt;']
    months = charts.cost_by_month([date(2026, 3, 1)], {"<b>x</b>": [Decimal(1)]}, "EUR", "t")
    assert months["data"][0]["name"] == "&lt;b&gt;x&lt;/b&gt;"
