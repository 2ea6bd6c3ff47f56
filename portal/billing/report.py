"""The chargeback report: the ledger's sums for a period (``sums.py``), grouped, priced, reconciled with
the fleet. Assembling is pure; a closed month is assembled from what was stored when it closed.

Money is rounded to the cent per (group, GPU model) and everything else is summed from those cents, so the
figures add up exactly: per model, held + unallocated = capacity; the lines sum to the totals; a spread of
the unallocated cost sums to what was spread (largest remainders).

Modes (finance chooses): **showback** charges what workspaces held; **full recovery** also shows the
capacity nobody held as unallocated platform cost, and with ``spread`` divides each model's unallocated
cost over the groups in proportion to the GPU-hours they held of that model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings

from portal.billing import closing
from portal.billing.sums import GROUPS, Sums, gather

CENT = Decimal("0.01")
HOURS = Decimal("0.0001")
ZERO = Decimal(0)


class Mode:
    SHOWBACK = "showback"
    FULL = "full"
    CHOICES = (SHOWBACK, FULL)


def cents(value: Decimal | float) -> Decimal:
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def hours(value: Decimal | float) -> Decimal:
    return Decimal(value).quantize(HOURS, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Line:
    """One group's figures; hours are GPU-equivalent hours, money in the report's currency."""

    key: str
    label: str
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO
    used_gpu_hours: Decimal = ZERO
    idle_gpu_hours: Decimal = ZERO
    measured_gpu_hours: Decimal = ZERO
    platform_cost: Decimal = ZERO  # its share of the unallocated capacity (full recovery, spread)
    cost_centre: str = ""

    @property
    def total(self) -> Decimal:
        return self.cost + self.platform_cost

    @property
    def used_share(self) -> float | None:
        """Activity-weighted GPU-hours over held ones (None: nothing held)."""
        return float(self.used_gpu_hours / self.gpu_hours) if self.gpu_hours else None

    @property
    def idle_share(self) -> float | None:
        return float(self.idle_gpu_hours / self.gpu_hours) if self.gpu_hours else None


@dataclass(frozen=True)
class ModelLine:
    """One GPU model's capacity against what was held of it."""

    gpu_model: str
    capacity_gpu_hours: Decimal
    capacity_cost: Decimal
    held_gpu_hours: Decimal
    held_cost: Decimal
    spread_cost: Decimal = ZERO  # of the unallocated cost, what was spread over the groups

    @property
    def unallocated_gpu_hours(self) -> Decimal:
        return self.capacity_gpu_hours - self.held_gpu_hours

    @property
    def unallocated_cost(self) -> Decimal:
        return self.capacity_cost - self.held_cost

    @property
    def allocated_share(self) -> float | None:
        return float(self.held_gpu_hours / self.capacity_gpu_hours) if self.capacity_gpu_hours else None


@dataclass(frozen=True)
class Report:
    start: datetime
    end: datetime
    group: str
    mode: str
    spread: bool
    currency: str
    lines: list[Line]
    models: list[ModelLine]
    adjustments: list[Line] = field(default_factory=list)  # late usage of closed months, booked here
    notes: list[str] = field(default_factory=list)
    closed_at: datetime | None = None  # a closed month: when; its figures are those stored then

    @property
    def held_cost(self) -> Decimal:
        return sum((line.cost for line in self.lines), ZERO)

    @property
    def gpu_hours(self) -> Decimal:
        return sum((line.gpu_hours for line in self.lines), ZERO)

    @property
    def unallocated_cost(self) -> Decimal:
        """Unallocated platform cost not spread over the groups (full recovery only)."""
        if self.mode != Mode.FULL:
            return ZERO
        return sum((m.unallocated_cost - m.spread_cost for m in self.models), ZERO)

    @property
    def adjustments_cost(self) -> Decimal:
        return sum((line.total for line in self.adjustments), ZERO)

    @property
    def total(self) -> Decimal:
        """What the period charges: lines (with their spread share), the platform line, adjustments."""
        lines = sum((line.total for line in self.lines), ZERO)
        return lines + self.unallocated_cost + self.adjustments_cost


# -- assembling ---------------------------------------------------------------------------------------


@dataclass
class _Sums:
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO
    used: Decimal = ZERO
    idle: Decimal = ZERO
    measured: Decimal = ZERO
    platform: Decimal = ZERO


def spread(amount: Decimal, weights: Mapping[Any, Decimal]) -> dict[Any, Decimal]:
    """``amount`` (cents) divided in proportion to ``weights``, in cents that sum to it exactly (largest
    remainders; ties by key order)."""
    total = sum(weights.values(), ZERO)
    if amount <= 0 or total <= 0:
        return {}
    units = int((amount / CENT).to_integral_value())
    exact = {key: Decimal(units) * w / total for key, w in weights.items()}
    floors = {key: int(v) for key, v in exact.items()}
    left = units - sum(floors.values())
    for key in sorted(exact, key=lambda k: (floors[k] - exact[k], str(k)))[:left]:
        floors[key] += 1
    return {key: Decimal(n) * CENT for key, n in floors.items() if n}


def _lines(group: str, sums: Sums, rows: Sequence[Mapping[str, Any]], platform: Mapping[str, Decimal]) -> list[Line]:
    """One line per group key (per key and adjusted month for adjustments), money rounded per GPU model."""
    parts: dict[tuple[str, str | None], _Sums] = defaultdict(_Sums)
    by_model: dict[tuple[str, str | None, str], list[float]] = defaultdict(lambda: [0.0] * 5)
    for row in rows:
        figures = by_model[(row[group], row["adjusts"], row["gpu_model"])]
        for index, name in enumerate(("eq_seconds", "money_seconds", "used", "idle", "measured")):
            figures[index] += row[name]
    for (key, adjusts, _), (eq, money, used, idle, measured) in sorted(by_model.items(), key=_order):
        s = parts[(key, adjusts)]
        s.gpu_hours += hours(eq / 3600)
        s.cost += cents(money / 3600)
        s.used += hours(used / 3600)
        s.idle += hours(idle / 3600)
        s.measured += hours(measured / 3600)
    for key, amount in platform.items():
        parts[(key, None)].platform += amount
    names = sums.labels.get(group, {})
    lines = []
    for (key, adjusts), s in parts.items():
        stable, label, cost_centre = names.get(key, [key, key, ""])
        if adjusts:
            stable, label = f"{stable}@{adjusts[:7]}", f"{label}: late usage of {date.fromisoformat(adjusts):%B %Y}"
        lines.append(
            Line(
                key=stable,
                label=label,
                cost_centre=cost_centre,
                gpu_hours=s.gpu_hours,
                cost=s.cost,
                used_gpu_hours=s.used,
                idle_gpu_hours=s.idle,
                measured_gpu_hours=s.measured,
                platform_cost=s.platform,
            )
        )
    return sorted(lines, key=lambda line: (-line.total, line.label))


def _order(item: tuple[tuple[str, str | None, str], list[float]]) -> tuple[str, str, str]:
    (key, adjusts, model), _ = item
    return key, adjusts or "", model


def _held(rows: Sequence[Mapping[str, Any]], group: str) -> dict[str, dict[str, tuple[Decimal, Decimal]]]:
    """Per GPU model, per group key: (GPU-hours, cost) held, rounded as the lines round them."""
    summed: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        figures = summed[(row["gpu_model"], row[group])]
        figures[0] += row["eq_seconds"]
        figures[1] += row["money_seconds"]
    held: dict[str, dict[str, tuple[Decimal, Decimal]]] = defaultdict(dict)
    for (model, key), (eq, money) in sorted(summed.items()):
        held[model][key] = (hours(eq / 3600), cents(money / 3600))
    return held


def assemble(
    sums: Sums,
    *,
    group: str = "team",
    mode: str = Mode.SHOWBACK,
    spread_unallocated: bool = False,
    teams: Collection[int] | None = None,
    user: int | None = None,
    closed_at: datetime | None = None,
) -> Report:
    """The report from the period's sums. ``teams``/``user`` narrow the lines (a lead's teams, a member's
    own use); the fleet, each model's unallocated cost and the spread shares stay the organisation's."""
    if group not in GROUPS:
        raise ValueError(f"Group by one of: {', '.join(GROUPS)}.")
    if mode not in Mode.CHOICES:
        raise ValueError(f"The mode is one of: {', '.join(Mode.CHOICES)}.")
    spreading = mode == Mode.FULL and spread_unallocated
    own = [row for row in sums.usage if row["adjusts"] is None]
    held = _held(own, group)
    models = []
    platform: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for model in sorted(set(sums.capacity) | set(held)):
        parts = held.get(model, {})
        cap = sums.capacity.get(model, {"gpu_seconds": 0.0, "money_seconds": 0.0})
        line = ModelLine(
            gpu_model=model,
            capacity_gpu_hours=hours(cap["gpu_seconds"] / 3600),
            capacity_cost=cents(cap["money_seconds"] / 3600),
            held_gpu_hours=sum((h for h, _ in parts.values()), ZERO),
            held_cost=sum((c for _, c in parts.values()), ZERO),
        )
        if spreading:
            shares = spread(line.unallocated_cost, {key: h for key, (h, _) in parts.items()})
            for key, amount in shares.items():
                platform[key] += amount
            line = replace(line, spread_cost=sum(shares.values(), ZERO))
        models.append(line)
    team_ids = None if teams is None else {str(t) for t in teams}

    def shown(row: Mapping[str, Any]) -> bool:
        return (team_ids is None or row["team"] in team_ids) and (user is None or row["user"] == str(user))

    visible = [row for row in sums.usage if shown(row)]
    visible_keys = {row[group] for row in visible}
    lines = _lines(group, sums, [r for r in visible if r["adjusts"] is None], _only(platform, visible_keys))
    adjustments = _lines(group, sums, [r for r in visible if r["adjusts"] is not None], {})
    return Report(
        start=sums.start,
        end=sums.end,
        group=group,
        mode=mode,
        spread=spreading,
        currency=settings.BILLING_CURRENCY,
        lines=lines,
        models=models,
        adjustments=adjustments,
        notes=_notes(models),
        closed_at=closed_at,
    )


def build(start: datetime, end: datetime, **options: Any) -> Report:
    """The report for [start, end): a closed month's from what was stored at its closing, any other period's
    from the ledger now (see :func:`assemble` for the options)."""
    group = options.get("group", "team")
    stored = closing.stored(start, end)
    if stored is not None:
        return assemble(stored.sums, closed_at=stored.closed_at, **options)
    return assemble(gather(start, end, groups=[group]), **options)


def _only(platform: Mapping[str, Decimal], keys: Collection[str]) -> dict[str, Decimal]:
    return {key: amount for key, amount in platform.items() if key in keys}


def _notes(models: Sequence[ModelLine]) -> list[str]:
    notes = []
    for m in models:
        if m.held_gpu_hours and not m.held_cost:
            notes.append(f"No price is set for {m.gpu_model}: its use is shown at no cost.")
        if m.unallocated_gpu_hours < 0:
            notes.append(
                f"{m.gpu_model}: more GPU-hours were held than the fleet was seen to have "
                f"({m.held_gpu_hours} against {m.capacity_gpu_hours}); the capacity ledger missed nodes."
            )
    return notes


def as_json(report: Report) -> dict[str, Any]:
    """The report as JSON-able data: money and hours as decimal strings, so that nothing is lost."""

    def plain(value: Any) -> Any:
        if isinstance(value, Decimal):
            return str(value)
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    data = plain(asdict(report))
    data["totals"] = plain(
        {
            "gpu_hours": report.gpu_hours,
            "held_cost": report.held_cost,
            "unallocated_cost": report.unallocated_cost,
            "adjustments_cost": report.adjustments_cost,
            "total": report.total,
        }
    )
    return dict(data)


__all__ = ["GROUPS", "Line", "Mode", "ModelLine", "Report", "as_json", "assemble", "build", "cents", "hours", "spread"]
