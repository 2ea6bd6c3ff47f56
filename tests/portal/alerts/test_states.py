"""The alerts' state machine, like Prometheus's ``for``, at explicit times: pending first, firing only after
the rule's period, told once when it fires and once when it resolves, firing again after resolving."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from portal.alerts import kinds
from portal.alerts.conditions import Observation
from portal.alerts.kinds import Rule
from portal.alerts.states import FIRED, RESOLVED, AlertState, Evaluation, evaluate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
RULES = {name: Rule(timedelta(minutes=5), kinds.WARNING) for name in kinds.KINDS}
KEY = "contention:H100-80GB-HBM3"


def seen(breached: bool, value: float = 9.0) -> Observation:
    return Observation(KEY, kinds.CONTENTION, None, breached, value, f"Demand is {value:g}.")


class Run:
    """Checks in a row, carrying the states from one to the next as the database does."""

    def __init__(self) -> None:
        self.states: dict[str, AlertState] = {}
        self.told: list[tuple[str, datetime, datetime]] = []  # (change, episode, at)

    def at(self, minutes: float, *observations: Observation) -> Evaluation:
        now = T0 + timedelta(minutes=minutes)
        result = evaluate(observations, self.states, RULES, now)
        self.states.update(result.states)
        self.told += [(n.change, n.episode, now) for n in result.notices]
        return result


def test_it_fires_only_once_the_condition_has_held_for_the_period() -> None:
    run = Run()
    assert run.at(0, seen(True)).notices == []
    assert run.states[KEY].pending_since == T0 and not run.states[KEY].firing
    assert run.at(4.9, seen(True)).notices == []
    fired = run.at(5, seen(True)).notices
    assert [(n.change, n.episode, n.message) for n in fired] == [(FIRED, T0 + timedelta(minutes=5), "Demand is 9.")]
    assert run.states[KEY].firing


def test_a_break_in_the_condition_starts_the_period_again() -> None:
    run = Run()
    run.at(0, seen(True))
    run.at(3, seen(False))
    assert run.states[KEY].pending_since is None
    run.at(4, seen(True))
    assert run.at(8, seen(True)).notices == []  # 4 minutes since it held again
    assert [c for c, _, _ in run.told] == []
    assert [n.change for n in run.at(9, seen(True)).notices] == [FIRED]


def test_it_is_told_once_per_firing_and_once_when_it_resolves() -> None:
    run = Run()
    for minute in range(30):
        run.at(minute, seen(True, value=9 + minute))
    assert [c for c, _, _ in run.told] == [FIRED]
    assert run.states[KEY].value == 38  # the last figure is kept
    resolved = run.at(30, seen(False, value=3)).notices
    assert [(n.change, n.episode, n.message) for n in resolved] == [
        (RESOLVED, T0 + timedelta(minutes=5), "Demand is 38.")  # in the words of the last firing check
    ]
    state = run.states[KEY]
    assert not state.firing and state.resolved_at == T0 + timedelta(minutes=30)
    for minute in range(31, 40):
        run.at(minute, seen(False))
    assert [c for c, _, _ in run.told] == [FIRED, RESOLVED]


def test_it_fires_again_after_resolving_as_a_new_firing() -> None:
    run = Run()
    for minute in range(7):
        run.at(minute, seen(True))
    run.at(7, seen(False))
    for minute in range(8, 14):
        run.at(minute, seen(True))
    assert run.told == [
        (FIRED, T0 + timedelta(minutes=5), T0 + timedelta(minutes=5)),
        (RESOLVED, T0 + timedelta(minutes=5), T0 + timedelta(minutes=7)),
        (FIRED, T0 + timedelta(minutes=13), T0 + timedelta(minutes=13)),
    ]
    assert run.states[KEY].firing and run.states[KEY].resolved_at is None


def test_a_key_no_longer_observed_resolves() -> None:
    run = Run()
    for minute in range(6):
        run.at(minute, seen(True))
    assert [n.change for n in run.at(6).notices] == [RESOLVED]  # the queue emptied: no figure at all


def test_the_same_check_evaluated_twice_tells_nothing_new() -> None:
    run = Run()
    for minute in range(6):
        run.at(minute, seen(True))
    again = evaluate([seen(True)], run.states, RULES, T0 + timedelta(minutes=5))
    assert again.notices == []


def test_a_rule_without_a_period_fires_at_once_and_nothing_is_kept_for_what_is_fine() -> None:
    rules = {**RULES, kinds.CONTENTION: Rule(timedelta(0), kinds.CRITICAL)}
    result = evaluate([seen(True)], {}, rules, T0)
    assert [n.change for n in result.notices] == [FIRED]
    fine = Observation("contention:A100", kinds.CONTENTION, None, False, 1.0, "fine")
    assert evaluate([fine], {}, rules, T0).states == {}
