"""The quota model that admission works against: flavours, teams, departments, workloads.

Semantics follow Kueue (ClusterQueue nominal quota and borrowing limit inside a cohort) and Run:ai
(department > project, deserved quota, over-quota):

- A *flavour* is a GPU model (or any pool of interchangeable capacity). Flavours never mix.
- Per team and flavour: ``guaranteed`` units (Kueue's nominal quota) and ``borrow_limit`` units the team's
  batch work may use on top of that, out of capacity its department's other teams leave idle.
- A *department* is the cohort: borrowing happens between the teams of one department. Its ceiling per
  flavour is its ``cap`` when the operator set one (the sum of its teams' guarantees may not exceed it),
  otherwise the sum of its teams' guarantees. Teams never borrow across departments.
- Cluster capacity per flavour is what the caller says exists, or else the sum of all guarantees.

Units are integers of milli GPU-equivalents (:data:`UNIT` = one whole GPU; a MIG 3g.40gb slice of an
A100 is 3/7 of one, 429). Integers keep every sum exact, so "never above capacity" needs no rounding
slack; :func:`to_units` converts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from functools import cached_property
from typing import TypeVar

UNIT = 1000
# The rules below hold in admission units (int) and in the portal's stored GPU-equivalents (Decimal) alike.
Amount = TypeVar("Amount", int, float, Decimal)


def to_units(gpu_equivalents: float) -> int:
    return round(gpu_equivalents * UNIT)


def fmt_units(units: int) -> str:
    return f"{units / UNIT:g}"


class Kind(StrEnum):
    INTERACTIVE = "interactive"  # notebooks: must fit the guarantee, never borrow, never preempted
    BATCH = "batch"  # jobs: may borrow, preemptible


@dataclass(frozen=True, slots=True)
class Workload:
    """A request for ``units`` of one flavour, queued or admitted (the caller says which by the list it
    passes it in).

    Times are seconds on any clock the caller likes (epoch seconds live, simulated seconds in the
    benchmark): ``created_at`` orders the queue, ``admitted_at`` orders victims (youngest first).
    ``borrowing`` is what admission said and is informational. ``preempting`` marks an admitted workload
    already told to stop (notice running): it still holds its units until the caller sees it gone.
    """

    id: str
    team: str
    flavour: str
    units: int
    priority: int = 0
    kind: Kind = Kind.BATCH
    created_at: float = 0.0
    admitted_at: float | None = None
    borrowing: bool = False
    preempting: bool = False
    growth: bool = False

    @property
    def preemptible(self) -> bool:
        return self.kind is Kind.BATCH


@dataclass(frozen=True, slots=True)
class TeamQuota:
    guaranteed: int
    borrow_limit: int = 0

    def limit(self, kind: Kind) -> int:
        """Most units the team may hold for work of this kind."""
        return ceiling(self.guaranteed, self.borrow_limit, may_borrow=kind is Kind.BATCH)


NO_QUOTA = TeamQuota(0, 0)


def ceiling(guaranteed: Amount, borrow_limit: Amount, *, may_borrow: bool) -> Amount:
    """The quota ceiling: the most a team may hold is its guarantee, plus its borrowing limit for work that
    may borrow (batch jobs; notebooks never borrow)."""
    return guaranteed + borrow_limit if may_borrow else guaranteed


def over_cap(guaranteed_total: Amount, cap: Amount | None) -> bool:
    """The department-cap rule: the teams of a department may together be guaranteed at most its cap (no
    cap: no limit of this kind)."""
    return cap is not None and guaranteed_total > cap


class QuotaError(ValueError):
    """A quota configuration or edit that breaks a rule; ``problems`` lists each broken rule in words."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class QuotaConfig:
    """``quotas`` by (team, flavour); ``departments`` maps team -> department; ``caps`` by (department,
    flavour); ``capacity`` by flavour (flavours not listed get the sum of their guarantees)."""

    quotas: Mapping[tuple[str, str], TeamQuota]
    departments: Mapping[str, str]
    caps: Mapping[tuple[str, str], int] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)

    def quota(self, team: str, flavour: str) -> TeamQuota:
        return self.quotas.get((team, flavour), NO_QUOTA)

    def department(self, team: str) -> str:
        # A team nobody placed in a department borrows from no one: it is its own cohort.
        return self.departments.get(team, team)

    @cached_property
    def guaranteed_by_department(self) -> Mapping[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = defaultdict(int)
        for (team, flavour), q in self.quotas.items():
            out[self.department(team), flavour] += q.guaranteed
        return dict(out)

    @cached_property
    def _guaranteed_by_flavour(self) -> Mapping[str, int]:
        out: dict[str, int] = defaultdict(int)
        for (_, flavour), q in self.quotas.items():
            out[flavour] += q.guaranteed
        return dict(out)

    def ceiling(self, department: str, flavour: str) -> int:
        """Most units a department's teams may hold together."""
        cap = self.caps.get((department, flavour))
        return cap if cap is not None else self.guaranteed_by_department.get((department, flavour), 0)

    def capacity_of(self, flavour: str) -> int:
        explicit = self.capacity.get(flavour)
        return explicit if explicit is not None else self._guaranteed_by_flavour.get(flavour, 0)


def validate(config: QuotaConfig, admitted: Iterable[Workload] = ()) -> None:
    """Raise :class:`QuotaError` unless ``config`` is sound, and sound for what already runs.

    Interactive workloads cannot be preempted, so an edit may not take a team's guarantee, a department's
    ceiling or a flavour's capacity below the interactive units already admitted there. Batch workloads
    above a lowered limit are preempted by the next :func:`~scheduling.engine.admission.decide`.
    """
    problems: list[str] = []
    for (team, flavour), q in config.quotas.items():
        if q.guaranteed < 0 or q.borrow_limit < 0:
            problems.append(f"team {team}: guaranteed and borrowing limit of {flavour} must not be negative")
        if team not in config.departments:
            problems.append(f"team {team} belongs to no department")
    for (dept, flavour), cap in config.caps.items():
        total = config.guaranteed_by_department.get((dept, flavour), 0)
        if over_cap(total, cap):
            problems.append(
                f"department {dept}: its teams are guaranteed {fmt_units(total)} {flavour}, "
                f"more than its cap of {fmt_units(cap)}"
            )
    for flavour, units in config.capacity.items():
        if units < 0:
            problems.append(f"capacity of {flavour} must not be negative")

    team_use: dict[tuple[str, str], int] = defaultdict(int)
    dept_use: dict[tuple[str, str], int] = defaultdict(int)
    flavour_use: dict[str, int] = defaultdict(int)
    for w in admitted:
        if w.kind is Kind.INTERACTIVE:
            team_use[w.team, w.flavour] += w.units
            dept_use[config.department(w.team), w.flavour] += w.units
            flavour_use[w.flavour] += w.units
    for (team, flavour), used in team_use.items():
        if used > config.quota(team, flavour).guaranteed:
            problems.append(
                f"team {team} runs {fmt_units(used)} {flavour} of interactive work, more than the new guarantee"
            )
    for (dept, flavour), used in dept_use.items():
        if used > config.ceiling(dept, flavour):
            problems.append(f"department {dept} runs {fmt_units(used)} {flavour} of interactive work, above its cap")
    for flavour, used in flavour_use.items():
        if used > config.capacity_of(flavour):
            problems.append(f"{fmt_units(used)} {flavour} of interactive work runs, more than the new capacity")
    if problems:
        raise QuotaError(problems)
