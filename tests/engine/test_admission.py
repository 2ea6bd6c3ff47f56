"""Admission decisions on hand-made cases (issue 6): guarantees, borrowing, reclaim, priority, order, words.

Quotas and workloads are written in whole GPUs through the builders at the top.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import pytest

from scheduling.engine.admission import AdmissionState, Decisions, Policy, PreemptReason, Strategy, decide
from scheduling.engine.quota import UNIT, Kind, QuotaConfig, QuotaError, TeamQuota, Workload, validate

F = "H100"


def config(
    teams: Mapping[str, tuple[float, float]],
    departments: Mapping[str, str] | None = None,
    caps: Mapping[str, float] | None = None,
    capacity: float | None = None,
    flavour: str = F,
) -> QuotaConfig:
    """``teams``: name -> (guaranteed, borrow limit) in GPUs; all in department "d" unless told."""
    return QuotaConfig(
        quotas={(t, flavour): TeamQuota(round(g * UNIT), round(b * UNIT)) for t, (g, b) in teams.items()},
        departments=departments or dict.fromkeys(teams, "d"),
        caps={(d, flavour): round(c * UNIT) for d, c in (caps or {}).items()},
        capacity={} if capacity is None else {flavour: round(capacity * UNIT)},
    )


def job(
    wid: str,
    team: str,
    gpus: float = 1,
    priority: int = 0,
    kind: Kind = Kind.BATCH,
    created: float = 0.0,
    admitted: float | None = None,
    flavour: str = F,
    preempting: bool = False,
) -> Workload:
    return Workload(wid, team, flavour, round(gpus * UNIT), priority, kind, created, admitted, False, preempting)


def running(
    wid: str, team: str, gpus: float = 1, priority: int = 0, at: float = 0.0, kind: Kind = Kind.BATCH
) -> Workload:
    return job(wid, team, gpus, priority, kind, admitted=at)


def run(
    cfg: QuotaConfig,
    admitted: Iterable[Workload],
    queue: Iterable[Workload],
    policy: Policy | None = None,
    usage: Mapping[tuple[str, str], float] | None = None,
) -> Decisions:
    state = AdmissionState(cfg, list(admitted), usage)
    return decide(state, list(queue)) if policy is None else decide(state, list(queue), policy)


def admitted_ids(d: Decisions) -> list[str]:
    return [a.workload_id for a in d.admit]


def preempted_ids(d: Decisions) -> list[str]:
    return [p.workload_id for p in d.preempt]


def waits(d: Decisions) -> dict[str, str]:
    return {w.workload_id: w.reason.value for w in d.waiting}


# -- guarantees and borrowing ------------------------------------------------------------------------------


def test_within_guarantee_is_admitted_without_borrowing():
    d = run(config({"a": (4, 0), "b": (4, 0)}), [running("r1", "a", 2)], [job("p1", "a", 2)])
    assert [(a.workload_id, a.borrowing) for a in d.admit] == [("p1", False)]
    assert d.waiting == ()


def test_batch_borrows_idle_capacity_of_its_department():
    d = run(config({"a": (4, 4), "b": (4, 0)}), [], [job("p1", "a", 6)])
    assert [(a.workload_id, a.borrowing) for a in d.admit] == [("p1", True)]


def test_interactive_never_borrows():
    cfg = config({"a": (4, 4), "b": (4, 0)})
    d = run(cfg, [running("r1", "a", 4)], [job("nb", "a", 1, kind=Kind.INTERACTIVE), job("batch", "a", 1)])
    assert admitted_ids(d) == ["batch"]
    (w,) = d.waiting
    assert (w.workload_id, w.reason.value) == ("nb", "team_quota_full")
    assert "interactive work must fit the guaranteed 4 H100" in w.message


def test_no_borrowing_across_departments():
    cfg = config({"a": (4, 4), "b": (4, 0)}, departments={"a": "d1", "b": "d2"})
    d = run(cfg, [running("r1", "a", 4)], [job("p1", "a", 1)])
    assert waits(d) == {"p1": "no_capacity"}
    assert "department d1 holds 4 of 4" in d.waiting[0].message


def test_team_never_exceeds_guarantee_plus_borrow_limit():
    cfg = config({"a": (4, 2), "b": (8, 0)})
    d = run(cfg, [running("r1", "a", 6)], [job("p1", "a", 1), job("huge", "a", 7)])
    assert admitted_ids(d) == []
    assert waits(d) == {"p1": "team_quota_full", "huge": "never_fits"}
    assert "more than team a's guaranteed plus borrowable 6" in {w.workload_id: w.message for w in d.waiting}["huge"]


def test_explicit_capacity_bounds_everyone():
    # Oversubscribed pool: 8 guaranteed, 6 exist.
    cfg = config({"a": (4, 4), "b": (4, 4)}, capacity=6)
    # b is within its guarantee, so nothing can be reclaimed from it.
    d = run(cfg, [running("r1", "b", 4)], [job("p1", "a", 3), job("p2", "a", 2)])
    assert admitted_ids(d) == ["p2"]
    assert waits(d) == {"p1": "no_capacity"}
    assert "the cluster holds 4 of 6" in d.waiting[0].message


def test_flavours_are_independent():
    cfg = QuotaConfig({**config({"a": (2, 0)}).quotas, **config({"a": (2, 0)}, flavour="A100").quotas}, {"a": "d"})
    d = run(cfg, [running("r1", "a", 2)], [job("h", "a", 1), job("x", "a", 2, flavour="A100")])
    assert admitted_ids(d) == ["x"]
    assert waits(d) == {"h": "team_quota_full"}


# -- reclaim and preemption --------------------------------------------------------------------------------


def issue_scenario() -> tuple[QuotaConfig, list[Workload]]:
    """Issue 6 acceptance: A and B guaranteed 4 H100 each; B's batch jobs borrow A's idle 4."""
    cfg = config({"A": (4, 0), "B": (4, 4)})
    b_jobs = [running(f"b{i}", "B", 1, priority=10 if i < 4 else 0, at=float(i)) for i in range(8)]
    return cfg, b_jobs


def test_guaranteed_request_reclaims_from_borrowers_lowest_priority_then_youngest():
    cfg, b_jobs = issue_scenario()
    d = run(cfg, b_jobs, [job("a1", "A", 2, created=10)])
    # b4..b7 have the lowest priority; the youngest two of them lose least work.
    assert preempted_ids(d) == ["b7", "b6"]
    assert {p.reason for p in d.preempt} == {PreemptReason.RECLAIM}
    assert {p.for_workload for p in d.preempt} == {"a1"}
    assert admitted_ids(d) == []
    assert waits(d) == {"a1": "preemption_pending"}
    assert "waiting for 2 workloads to stop" in d.waiting[0].message

    # Victims keep their GPUs during the notice period: nothing more is preempted meanwhile.
    leaving = [replace(w, preempting=True) if w.id in {"b6", "b7"} else w for w in b_jobs]
    again = run(cfg, leaving, [job("a1", "A", 2, created=10)])
    assert again.preempt == () and waits(again) == {"a1": "preemption_pending"}

    # Once they are gone, A's request starts within its guarantee.
    after = run(cfg, [w for w in b_jobs if w.id not in {"b6", "b7"}], [job("a1", "A", 2, created=10)])
    assert [(a.workload_id, a.borrowing) for a in after.admit] == [("a1", False)]


def test_reclaim_takes_no_more_than_needed_and_not_below_the_lenders_guarantee():
    cfg, b_jobs = issue_scenario()
    d = run(cfg, [*b_jobs[:7], running("a0", "A", 1)], [job("a1", "A", 3)])
    # A holds 1 of its 4 and B borrows the other 3: B gives back exactly those and keeps its guarantee.
    assert preempted_ids(d) == ["b6", "b5", "b4"]
    d = run(cfg, b_jobs[:6], [job("a1", "A", 4)])
    # B holds 6 (2 borrowed); 2 are free: exactly two of B's borrowed jobs go.
    assert preempted_ids(d) == ["b5", "b4"]


def test_borrowing_request_does_not_reclaim():
    cfg = config({"A": (4, 4), "B": (4, 4)})
    d = run(cfg, [running("a0", "A", 4), *[running(f"b{i}", "B", 1) for i in range(4)]], [job("a1", "A", 1)])
    assert d.preempt == ()
    assert waits(d) == {"a1": "no_capacity"}


def test_interactive_is_never_preempted():
    cfg = config({"A": (4, 0), "B": (4, 4)})
    b_nb = [running(f"nb{i}", "B", 1, kind=Kind.INTERACTIVE) for i in range(4)]
    b_batch = [running(f"b{i}", "B", 1, priority=-5, at=1.0) for i in range(4)]
    d = run(cfg, b_nb + b_batch, [job("a1", "A", 4)])
    assert sorted(preempted_ids(d)) == ["b0", "b1", "b2", "b3"]
    # Interactive work above capacity (the cluster shrank) still stays.
    d = run(config({"A": (4, 0), "B": (4, 0)}, capacity=4), [*b_nb, running("a0", "A", 1)], [job("a1", "A", 1)])
    assert preempted_ids(d) == ["a0"]
    assert waits(d) == {"a1": "no_capacity"}


def test_higher_priority_preempts_lower_priority_of_the_same_team():
    cfg = config({"A": (4, 0)})
    low = [running(f"l{i}", "A", 1, priority=0, at=float(i)) for i in range(4)]
    d = run(cfg, low, [job("hi", "A", 2, priority=10), job("same", "A", 1, priority=0)])
    assert preempted_ids(d) == ["l3", "l2"]
    assert {p.reason for p in d.preempt} == {PreemptReason.PRIORITY}
    assert waits(d) == {"hi": "preemption_pending", "same": "team_quota_full"}


def test_policy_can_forbid_preemption():
    cfg, b_jobs = issue_scenario()
    d = run(cfg, b_jobs, [job("a1", "A", 2)], Policy(reclaim=False, within_team_priority=False))
    assert d.preempt == () and waits(d) == {"a1": "no_capacity"}


def test_preemptor_keeps_what_it_waits_for():
    # a1 reclaims 2 from B; c's small request later in the same cycle must not take the room a1 waits for.
    cfg = config({"A": (4, 0), "B": (4, 4), "C": (0, 8)})
    b_jobs = [running(f"b{i}", "B", 1, at=float(i)) for i in range(6)]
    d = run(cfg, [*b_jobs, running("a0", "A", 2)], [job("a1", "A", 2, priority=5), job("c1", "C", 1, created=1)])
    assert preempted_ids(d) == ["b5", "b4"]
    assert waits(d) == {"a1": "preemption_pending", "c1": "no_capacity"}


def test_lowered_quota_preempts_batch_above_the_new_limit():
    cfg = config({"A": (2, 0), "B": (8, 0)})
    work = [running(f"a{i}", "A", 1, at=float(i)) for i in range(4)] + [running("nb", "A", 1, kind=Kind.INTERACTIVE)]
    d = run(cfg, work, [])
    assert sorted(preempted_ids(d)) == ["a1", "a2", "a3"]
    assert {p.reason for p in d.preempt} == {PreemptReason.OVER_LIMIT}


# -- queue order -------------------------------------------------------------------------------------------


def test_priority_then_fair_share_then_age():
    cfg = config({"A": (4, 4), "B": (4, 4)}, capacity=2)
    queue = [
        job("a-old", "A", 1, created=1),
        job("b-new", "B", 1, created=5),
        job("b-newer", "B", 1, created=6),
        job("a-high", "A", 1, priority=1, created=9),
    ]
    # A has been using more of its guarantee recently, so B goes first at equal priority.
    d = run(cfg, [], queue, usage={("A", F): 4000.0, ("B", F): 0.0})
    assert admitted_ids(d) == ["a-high", "b-new"]
    assert [w.workload_id for w in d.waiting] == ["b-newer", "a-old"]
    assert [w.position for w in d.waiting] == [1, 2]


def test_equal_teams_alternate_within_a_cycle():
    cfg = config({"A": (4, 4), "B": (4, 4)}, capacity=4)
    queue = [job(f"a{i}", "A", 1, created=i) for i in range(4)] + [
        job(f"b{i}", "B", 1, created=10 + i) for i in range(4)
    ]
    d = run(cfg, [], queue)
    assert sorted(admitted_ids(d)) == ["a0", "a1", "b0", "b1"]


def test_best_effort_fifo_lets_small_requests_pass_a_blocked_head():
    cfg = config({"A": (4, 0), "B": (4, 0)})
    queue = [job("big", "A", 4, created=1), job("small", "A", 1, created=2)]
    best = run(cfg, [running("r", "A", 2)], queue)
    assert admitted_ids(best) == ["small"] and waits(best) == {"big": "team_quota_full"}
    strict = run(cfg, [running("r", "A", 2)], queue, Policy(Strategy.STRICT_FIFO))
    assert admitted_ids(strict) == [] and waits(strict) == {"big": "team_quota_full", "small": "behind_head"}


def test_every_waiting_workload_is_explained_once_with_positions():
    cfg, b_jobs = issue_scenario()
    queue = [job(f"b-more{i}", "B", 1, created=i) for i in range(3)] + [job("a-huge", "A", 9), job("x", "X", 1)]
    d = run(cfg, b_jobs, queue)
    assert sorted(w.workload_id for w in d.waiting) == sorted(w.id for w in queue)
    assert sorted(w.position for w in d.waiting) == list(range(1, len(queue) + 1))
    reasons = waits(d)
    assert reasons["a-huge"] == "never_fits" and reasons["x"] == "never_fits"
    assert reasons["b-more0"] == "team_quota_full"
    assert all(w.message for w in d.waiting)
    assert "team X has no H100 quota" in {w.workload_id: w.message for w in d.waiting}["x"]


# -- validation --------------------------------------------------------------------------------------------


def test_department_cap_must_cover_its_guarantees():
    validate(config({"a": (4, 0), "b": (4, 0)}, caps={"d": 8}))
    with pytest.raises(QuotaError, match="guaranteed 8 H100, more than its cap of 6"):
        validate(config({"a": (4, 0), "b": (4, 0)}, caps={"d": 6}))


def test_cap_above_guarantees_is_borrowable_headroom():
    cfg = config({"a": (4, 4), "b": (4, 0)}, caps={"d": 10}, capacity=10)
    d = run(cfg, [running("r", "b", 4)], [job("p", "a", 6)])
    assert admitted_ids(d) == ["p"]


def test_edit_may_not_strand_interactive_work():
    nb = [running("nb", "a", 3, kind=Kind.INTERACTIVE)]
    validate(config({"a": (3, 0)}), nb)
    with pytest.raises(QuotaError, match="interactive"):
        validate(config({"a": (2, 1)}), nb)
    with pytest.raises(QuotaError, match="no department"):
        validate(QuotaConfig({("a", F): TeamQuota(1000)}, {}))
