"""Billing months in the portal's time zone (``TIME_ZONE``), and cutting a span at boundaries. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time
from itertools import pairwise
from zoneinfo import ZoneInfo


def month_of(moment: datetime, zone: ZoneInfo) -> date:
    """The first day of the month ``moment`` lies in, in ``zone``."""
    local = moment.astimezone(zone)
    return date(local.year, local.month, 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def previous_month(month: date) -> date:
    return date(month.year - (month.month == 1), (month.month - 2) % 12 + 1, 1)


def month_start(month: date, zone: ZoneInfo) -> datetime:
    """The instant the month begins, in ``zone`` (an aware datetime)."""
    return datetime.combine(month.replace(day=1), time(), tzinfo=zone)


def month_bounds(month: date, zone: ZoneInfo) -> tuple[datetime, datetime]:
    return month_start(month, zone), month_start(next_month(month), zone)


def month_starts_between(after: datetime, upto: datetime, zone: ZoneInfo) -> list[datetime]:
    """Every month start in the half-open span (after, upto]."""
    starts: list[datetime] = []
    month = next_month(month_of(after, zone))
    while (start := month_start(month, zone)) <= upto:
        starts.append(start)
        month = next_month(month)
    return starts


def cut(start: datetime, end: datetime, boundaries: Iterable[datetime]) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` cut at the boundaries strictly inside it, in order; one piece when none is."""
    points = sorted({b for b in boundaries if start < b < end})
    edges = [start, *points, end]
    return list(pairwise(edges)) if end > start else [(start, end)]
