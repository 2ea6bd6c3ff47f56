"""Prometheus's ``for``, kept in the database: each alert key is inactive, pending (its condition holds, for
less than its rule's period) or firing; a firing alert whose condition no longer holds is resolved. Pure:
observations, the previous states, the rules and the time in; new states and what to tell out.

Each firing is told once when it starts and once when it resolves (``Notice``); a notice is identified by
its key, the time the firing started (``episode``) and the change, so recording it twice makes one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from portal.alerts.conditions import Observation
from portal.alerts.kinds import Rule

FIRED, RESOLVED = "fired", "resolved"


@dataclass(frozen=True)
class AlertState:
    key: str
    kind: str
    team_id: int | None
    pending_since: datetime | None = None  # since when the condition holds (Prometheus's activeAt)
    firing_since: datetime | None = None  # the current (or last) firing's start
    resolved_at: datetime | None = None  # the last firing's end
    value: float | None = None
    message: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def firing(self) -> bool:
        return self.firing_since is not None and self.resolved_at is None


@dataclass(frozen=True)
class Notice:
    key: str
    change: str  # FIRED or RESOLVED
    episode: datetime  # when that firing started
    value: float | None
    message: str


@dataclass(frozen=True)
class Evaluation:
    states: dict[str, AlertState]  # only those that changed or are new
    notices: list[Notice]


def step(previous: AlertState | None, seen: Observation | None, rule: Rule, now: datetime) -> AlertState | None:
    """One key's next state (None: nothing to keep, it never was anything)."""
    if previous is None:
        if seen is None:
            return None
        previous = AlertState(seen.key, seen.kind, seen.team_id)
    state = previous
    if seen is not None:
        state = replace(state, value=seen.value, message=seen.message, data=dict(seen.data))
    if seen is not None and seen.breached:
        pending = state.pending_since or now
        state = replace(state, pending_since=pending)
        if not state.firing and now - pending >= rule.hold:
            state = replace(state, firing_since=now, resolved_at=None)
        return state
    if state.firing:
        return replace(state, pending_since=None, resolved_at=now)
    return replace(state, pending_since=None)


def evaluate(
    observations: Iterable[Observation],
    previous: Mapping[str, AlertState],
    rules: Mapping[str, Rule],
    now: datetime,
) -> Evaluation:
    seen = {o.key: o for o in observations}
    states: dict[str, AlertState] = {}
    notices: list[Notice] = []
    for key in sorted(set(seen) | set(previous)):
        before = previous.get(key)
        observed = seen.get(key)
        kind = observed.kind if observed is not None else before.kind  # type: ignore[union-attr]
        after = step(before, observed, rules[kind], now)
        if after is None or after == before:
            continue
        if before is None and not (observed is not None and (observed.breached or observed.data)):
            continue  # nothing wrong and nothing to keep: no row for it
        states[key] = after
        was_firing = before is not None and before.firing
        if after.firing and not was_firing:
            notices.append(Notice(key, FIRED, after.firing_since, after.value, after.message))  # type: ignore[arg-type]
        elif was_firing and not after.firing:
            # Told in the words of the firing it ends (what was wrong), not of the figures that ended it.
            notices.append(Notice(key, RESOLVED, before.firing_since, before.value, before.message))  # type: ignore[arg-type,union-attr]
    return Evaluation(states, notices)
