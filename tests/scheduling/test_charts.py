"""The quota chart's series, computed by hand on a small timeline: five instants an hour apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from scheduling.charts import Interval, QuotaSeries, quota_figure, quota_series, usage_series

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T4 = T0 + timedelta(hours=4)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def test_usage_counts_what_is_held_at_each_instant_end_excluded() -> None:
    intervals = [
        Interval(at(-5), at(2), Decimal("1")),  # began before the window, ends exactly at 2h
        Interval(at(1), None, Decimal("0.3333")),  # still held
        Interval(at(1), None, Decimal("0.3333")),
        Interval(at(1), None, Decimal("0.3334")),
        Interval(at(-3), at(-1), Decimal("7")),  # over before the window
        Interval(at(3), at(2), Decimal("9")),  # ends before it starts: holds nothing
    ]
    times, used = usage_series(intervals, T0, T4, points=5)
    assert times == [at(h) for h in range(5)]
    assert used == [1.0, 2.0, 1.0, 1.0, 1.0]


def test_usage_of_nothing_is_zero() -> None:
    assert usage_series([], T0, T4, points=3)[1] == [0.0, 0.0, 0.0]


def test_borrowed_and_lent_against_the_department() -> None:
    own = [
        Interval(at(0), at(2), Decimal("1")),
        Interval(at(3), None, Decimal("4"), borrowing=True),  # the team borrows from 3h on
    ]
    others = [
        Interval(at(0), at(3), Decimal("1.5"), borrowing=True),
        Interval(at(2), at(4), Decimal("2.5"), borrowing=True),
        Interval(at(0), None, Decimal("5")),  # within its own team's guarantee: borrows nothing
    ]
    series = quota_series(own, others, Decimal("3"), T0, T4, points=5)
    assert series.times == [at(h) for h in range(5)]
    assert series.used == [1.0, 1.0, 0.0, 4.0, 4.0]
    assert series.borrowed == [0.0, 0.0, 0.0, 4.0, 4.0]
    # idle guarantee [2, 2, 3, 0, 0], others borrowing [1.5, 1.5, 4, 2.5, 0]: lent is the smaller of the two
    assert series.lent == [1.5, 1.5, 3.0, 0.0, 0.0]


def test_a_team_without_a_guarantee_lends_nothing() -> None:
    others = [Interval(at(0), None, Decimal("2"), borrowing=True)]
    series = quota_series([], others, Decimal(0), T0, T4, points=5)
    assert series.used == series.borrowed == series.lent == [0.0] * 5


def test_the_figure_names_its_series_and_draws_the_ceiling_only_when_borrowing_is_allowed() -> None:
    series = QuotaSeries(times=[at(0), at(1)], used=[1.0, 2.0], borrowed=[0.0, 1.0], lent=[0.5, 0.0])
    figure = quota_figure("H100-80GB-HBM3", series, 2.0, 1.0)
    traces = {t["name"]: t for t in figure["data"]}
    assert list(traces) == ["used", "borrowed", "lent", "guaranteed", "guaranteed + borrowing"]
    assert traces["borrowed"]["y"] == [0.0, 1.0] and traces["lent"]["y"] == [0.5, 0.0]
    assert traces["guaranteed + borrowing"]["y"] == [3.0, 3.0]
    assert traces["used"]["x"] == [at(0).isoformat(), at(1).isoformat()]
    no_borrowing = quota_figure("H100-80GB-HBM3", series, 2.0, 0.0)
    assert [t["name"] for t in no_borrowing["data"]] == ["used", "borrowed", "lent", "guaranteed"]
