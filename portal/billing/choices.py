"""What a chargeback page or API call asks for: period, grouping, mode. Read from query parameters; what
cannot be read falls back to the default with a message saying why (pages), or is refused (API)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.utils import timezone

from portal.billing import periods
from portal.billing.ledger import zone
from portal.billing.report import Mode
from portal.billing.sums import GROUPS

GROUP_LABELS = {
    "cost_centre": "Cost centre",
    "department": "Department",
    "team": "Team",
    "user": "User",
    "offering": "Offering",
}
MODE_LABELS = {Mode.SHOWBACK: "Showback", Mode.FULL: "Full recovery"}
MAX_DAYS = 400
_MONTH = re.compile(r"\A(\d{4})-(\d{2})\Z")


@dataclass(frozen=True)
class Choice:
    start: datetime
    end: datetime
    month: date | None  # a calendar month, or None for any other period
    group: str = "team"
    mode: str = Mode.SHOWBACK
    spread: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.month is not None:
            return f"{self.month:%B %Y}"
        last = (self.end - timedelta(days=1)).astimezone(zone())
        return f"{self.start.astimezone(zone()):%d %b %Y} to {last:%d %b %Y}"

    def query(self, **changes: Any) -> dict[str, str]:
        """The query parameters that ask for this choice (with ``changes``)."""
        values: dict[str, str] = {"group": self.group, "mode": self.mode}
        if self.month is not None:
            values["month"] = f"{self.month:%Y-%m}"
        else:
            values["start"] = f"{self.start.astimezone(zone()):%Y-%m-%d}"
            values["end"] = f"{(self.end - timedelta(days=1)).astimezone(zone()):%Y-%m-%d}"
        if self.spread:
            values["spread"] = "1"
        values.update({k: str(v) for k, v in changes.items()})
        return values


def this_month() -> date:
    return periods.month_of(timezone.now(), zone())


def _month(text: str) -> date | None:
    match = _MONTH.fullmatch(text)
    if not match or not 1 <= int(match[2]) <= 12 or not 2000 <= int(match[1]) <= 2200:
        return None
    return date(int(match[1]), int(match[2]), 1)


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def read(params: Mapping[str, str], *, default_group: str = "team") -> Choice:
    """The choice in ``params``: ``month=YYYY-MM``, or ``start`` and ``end`` (days, both included), ``group``,
    ``mode``, ``spread``. Unreadable values fall back to defaults, each with a message."""
    problems: list[str] = []
    tz = zone()
    month = this_month()
    start, end = periods.month_bounds(month, tz)
    chosen_month: date | None = month
    if params.get("start") or params.get("end"):
        first, last = _day(params.get("start", "")), _day(params.get("end", ""))
        if first is None or last is None:
            problems.append("A period is two days, e.g. start=2026-03-01&end=2026-03-15; showing this month.")
        elif last < first:
            problems.append("The period ends before it starts; showing this month.")
        elif (last - first).days >= MAX_DAYS:
            problems.append(f"A period is at most {MAX_DAYS} days; showing this month.")
        else:
            start = datetime.combine(first, datetime.min.time(), tzinfo=tz)
            end = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=tz)
            chosen_month = month_if_whole(start, end)
    elif "month" in params:
        picked = _month(params["month"])
        if picked is None:
            problems.append(f"{params['month'][:20]!r} is not a month like 2026-03; showing this month.")
        else:
            chosen_month = picked
            start, end = periods.month_bounds(picked, tz)
    group = params.get("group", default_group)
    if group not in GROUPS:
        problems.append(f"Group by one of: {', '.join(GROUPS)}; showing by {default_group}.")
        group = default_group
    mode = params.get("mode", Mode.SHOWBACK)
    if mode not in Mode.CHOICES:
        problems.append(f"The mode is showback or full; showing {Mode.SHOWBACK}.")
        mode = Mode.SHOWBACK
    spread = params.get("spread", "") in ("1", "true", "on")
    return Choice(start, end, chosen_month, group, mode, spread and mode == Mode.FULL, problems)


def month_if_whole(start: datetime, end: datetime) -> date | None:
    month = periods.month_of(start, zone())
    return month if (start, end) == periods.month_bounds(month, zone()) else None


def recent_months(last: date, count: int) -> list[date]:
    months = [last]
    while len(months) < count:
        months.append(periods.previous_month(months[-1]))
    return months[::-1]


def period_only(params: Mapping[str, Any]) -> dict[str, str]:
    """Just the period of ``params`` (pages whose grouping is fixed)."""
    return {key: str(params[key]) for key in ("month", "start", "end") if key in params}
