"""Elastic jobs in the admission engine (issue 18, part 4): a job's workers beyond its minimum are growth
workloads that take only idle capacity and are the first to be taken back.

The live cycle's view of one elastic job: its minimum as one workload (id "j"), each further worker as a
growth workload of its own ("j+3", "j+4": the 3rd and 4th worker)."""

from __future__ import annotations

from dataclasses import replace

from scheduling.engine.admission import Policy, PreemptReason, Strategy
from scheduling.engine.quota import Kind, Workload
from tests.engine.test_admission import admitted_ids, config, job, preempted_ids, run, running, waits


def grow(wid: str, team: str, worker: int, *, admitted: float | None = None, priority: int = 0) -> Workload:
    """The ``worker``-th worker of elastic job ``wid``, asked for (or held, when ``admitted``)."""
    return replace(job(f"{wid}+{worker}", team, priority=priority, admitted=admitted), growth=True)


def test_it_grows_to_its_maximum_on_idle_capacity() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)})  # b lends its 6 GPUs while idle
    d = run(cfg, [running("j", "a", 2)], [grow("j", "a", k) for k in range(3, 9)])
    assert admitted_ids(d) == [f"j+{k}" for k in range(3, 9)]
    assert all(a.borrowing for a in d.admit)
    assert not d.preempt


def test_it_grows_only_as_far_as_idle_capacity_and_never_preempts_to_grow() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)})
    held = [running("j", "a", 2), running("b1", "b", 4, at=5.0)]
    d = run(cfg, held, [grow("j", "a", k) for k in range(3, 9)])
    assert admitted_ids(d) == ["j+3", "j+4"]
    assert not d.preempt
    assert set(waits(d)) == {"j+5", "j+6", "j+7", "j+8"}
    assert set(waits(d).values()) == {"no_capacity"}


def test_growth_comes_after_every_other_request() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)}, capacity=8)
    queue = [grow("j", "a", 3, priority=10), job("b1", "b", 4, created=100.0), job("a1", "a", 1, created=50.0)]
    d = run(cfg, [running("j", "a", 2)], queue)
    assert set(admitted_ids(d)[:2]) == {"a1", "b1"}
    assert admitted_ids(d)[2:] == ["j+3"]


def test_a_lender_takes_back_growth_first_with_notice_and_the_minimum_stays() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)})
    held = [running("j", "a", 2, at=1.0), running("a-other", "a", 1, at=50.0)]
    held += [grow("j", "a", k, admitted=10.0 + k) for k in range(3, 8)]  # j at 7 of 8 workers
    d = run(cfg, held, [job("lender", "b", 6, kind=Kind.INTERACTIVE)])
    # The lender needs 6: the five extra workers and then the youngest whole borrower (a-other) go; the
    # minimum of j stays, since team a is then within its guarantee.
    assert sorted(preempted_ids(d)) == sorted(["a-other", *[f"j+{k}" for k in range(3, 8)]])
    assert "j" not in preempted_ids(d)
    assert {p.reason for p in d.preempt} == {PreemptReason.RECLAIM}
    assert waits(d) == {"lender": "preemption_pending"}  # the notice period: it waits for them to leave


def test_the_lender_takes_only_the_workers_it_needs_youngest_first() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)})
    held = [running("j", "a", 2, at=1.0), *[grow("j", "a", k, admitted=10.0 + k) for k in range(3, 9)]]
    d = run(cfg, held, [job("lender", "b", 2, kind=Kind.INTERACTIVE)])
    assert sorted(preempted_ids(d)) == ["j+7", "j+8"]


def test_shrinking_workers_still_hold_their_units_until_gone() -> None:
    cfg = config({"a": (2, 6), "b": (6, 0)})
    held = [running("j", "a", 2, at=1.0), *[grow("j", "a", k, admitted=10.0 + k) for k in range(3, 9)]]
    held = [replace(w, preempting=True) if w.growth else w for w in held]
    d = run(cfg, held, [job("lender", "b", 6, kind=Kind.INTERACTIVE)])
    assert not d.preempt  # already told: nobody else is taken
    assert waits(d) == {"lender": "preemption_pending"}


def test_never_below_the_minimum_through_reclaim_while_within_guarantee() -> None:
    cfg = config({"a": (4, 4), "b": (4, 0)})
    held = [running("j", "a", 4, at=1.0), *[grow("j", "a", k, admitted=10.0 + k) for k in range(5, 9)]]
    d = run(cfg, held, [job("lender", "b", 4, kind=Kind.INTERACTIVE), job("more", "b", 1, kind=Kind.INTERACTIVE)])
    assert sorted(preempted_ids(d)) == ["j+5", "j+6", "j+7", "j+8"]
    assert waits(d)["more"] in ("team_quota_full", "never_fits")  # b's guarantee is 4: the minimum is safe


def test_growth_makes_way_for_its_own_teams_request_of_the_same_priority() -> None:
    cfg = config({"a": (4, 4), "b": (4, 0)})
    held = [running("j", "a", 2, at=1.0), *[grow("j", "a", k, admitted=10.0 + k) for k in range(3, 9)]]
    d = run(cfg, held, [job("a2", "a", 2)])
    assert sorted(preempted_ids(d)) == ["j+7", "j+8"]
    assert {p.reason for p in d.preempt} == {PreemptReason.PRIORITY}
    assert "extra" in d.preempt[0].message


def test_a_job_of_the_same_priority_never_preempts_another_jobs_minimum() -> None:
    cfg = config({"a": (4, 0)})
    d = run(cfg, [running("j", "a", 4, at=1.0)], [job("a2", "a", 2)])
    assert not d.preempt
    assert waits(d) == {"a2": "team_quota_full"}


def test_strict_fifo_keeps_growth_behind_the_teams_other_requests() -> None:
    cfg = config({"a": (2, 2), "b": (2, 0)}, capacity=4)
    queue = [grow("j", "a", 3), job("a1", "a", 1, created=50.0)]
    d = run(cfg, [running("j", "a", 2)], queue, Policy(strategy=Strategy.STRICT_FIFO))
    assert admitted_ids(d) == ["a1", "j+3"]
