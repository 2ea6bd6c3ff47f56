"""The queue replay on scenarios small enough to work out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduling.benchmarks import queue as queue_bench
from scheduling.benchmarks.queue_sim import SimConfig, expand, load_scenario, parse_quantity, parse_scenario, simulate


def scenario(text: str):
    return parse_scenario(yaml.safe_load(text))


ONE_QUEUE = """
cohorts:
  - className: c
    queuesSets:
      - className: q
        nominalQuota: 1
        withinClusterQueue: {within}
        workloadsSets:
          - count: 1
            creationIntervalMs: 100
            workloads:
              - {{className: a, runtimeMs: 1000, priority: 0, request: 1}}
              - {{className: b, runtimeMs: 1000, priority: {b_priority}, request: 1}}
"""


def test_fifo_when_nothing_may_be_preempted():
    # a is created at 100 ms and runs to 1100; b, created at 200, waits for it and runs to 2100.
    r = simulate(scenario(ONE_QUEUE.format(within="Never", b_priority=10)))
    assert r.wall_ms == 2100
    assert r.admission_ms == {"a": 0, "b": 900}
    assert r.queue_usage == {"q-0-0-c-0": pytest.approx(2000 / 2100)}
    assert (r.admissions, r.preemptions, r.finished) == (2, 0, 2)


def test_higher_priority_preempts_and_the_victim_restarts():
    # b preempts a at 200 and runs to 1200; a restarts then and runs to 2200. a's first 100 ms were used.
    r = simulate(scenario(ONE_QUEUE.format(within="LowerPriority", b_priority=10)))
    assert r.wall_ms == 2200
    assert r.admission_ms == {"a": 1100, "b": 0}  # to the admission that ran to completion
    assert r.queue_usage == {"q-0-0-c-0": pytest.approx(2100 / 2200)}
    assert (r.admissions, r.preemptions) == (3, 1)


def test_equal_priority_does_not_preempt():
    r = simulate(scenario(ONE_QUEUE.format(within="LowerPriority", b_priority=0)))
    assert (r.wall_ms, r.preemptions) == (2100, 0)


def test_fixed_cycle_period():
    # Cycles at 500, 1000, 1500, ...: a waits from 100 to 500, runs to 1500; b starts then.
    r = simulate(scenario(ONE_QUEUE.format(within="Never", b_priority=0)), SimConfig(cycle_ms=500))
    assert r.wall_ms == 2500
    assert r.admission_ms == {"a": 400, "b": 1300}


RECLAIM = """
cohorts:
  - className: c
    queuesSets:
      - className: borrower
        nominalQuota: 1
        borrowingLimit: 1
        reclaimWithinCohort: Any
        workloadsSets:
          - count: 1
            creationIntervalMs: 100
            workloads: [{className: big, runtimeMs: 1000, request: 2}]
      - className: lender
        nominalQuota: 1
        reclaimWithinCohort: Any
        workloadsSets:
          - count: 1
            creationIntervalMs: 200
            workloads: [{className: small, runtimeMs: 1000, request: 1}]
"""


def test_lender_reclaims_its_guarantee():
    # big borrows the lender's unit at 100; the lender asks for it at 200 and gets it at once, running to
    # 1200; big restarts at 1200 and runs to 2200.
    r = simulate(scenario(RECLAIM))
    assert r.wall_ms == 2200
    assert r.admission_ms == {"big": 1100, "small": 0}
    assert r.queue_usage == {
        "borrower-0-0-c-0": pytest.approx((2 * 100 + 2 * 1000) / (1 * 2200)),
        "lender-1-0-c-0": pytest.approx(1000 / 2200),
    }
    assert r.min_usage == pytest.approx(1000 / 2200)
    assert (r.admissions, r.preemptions) == (3, 1)


def test_quantities_and_policies():
    assert parse_quantity("500m") == 500
    assert parse_quantity(2) == 2000
    with pytest.raises(ValueError, match="reclaimWithinCohort"):
        scenario(RECLAIM.replace("reclaimWithinCohort: Any", "reclaimWithinCohort: LowerPriority", 1))
    with pytest.raises(ValueError, match="same preemption policies"):
        _ = scenario(RECLAIM.replace("reclaimWithinCohort: Any", "reclaimWithinCohort: Never", 1)).policy


def test_shipped_baseline_matches_kueue():
    ex = expand(load_scenario())
    assert len(ex.arrivals) == 15_000
    assert len(ex.queue_class) == 30 and len(set(ex.quotas.departments.values())) == 5
    assert max(a.at_ms for a in ex.arrivals) == 60_000
    assert ex.quotas.ceiling("cohort-0", "default") == 120_000
    per_class = {c: sum(a.class_name == c for a in ex.arrivals) for c in ("small", "medium", "large")}
    assert per_class == {"small": 10_500, "medium": 3_000, "large": 1_500}


def test_bench_report_compares_with_kueue(capsys):
    r = simulate(scenario(RECLAIM))
    rows = {row.figure: row for row in queue_bench.rows(r)}
    assert rows["wall time (s)"].beats is True
    assert rows["mean time to admission, big (s)"].kueue is None
    queue_bench.print_report(r, Path("tiny.yaml"))
    assert "Kueue avg" in capsys.readouterr().out


def test_charging_decision_time_only_delays():
    fast = simulate(scenario(ONE_QUEUE.format(within="Never", b_priority=0)))
    charged = simulate(scenario(ONE_QUEUE.format(within="Never", b_priority=0)), SimConfig(charge_cpu=True))
    assert charged.wall_ms >= fast.wall_ms
    assert charged.finished == fast.finished == 2


def test_decide_timing_harness():
    t = queue_bench.decide_timing(pending=50, admitted=50, repeats=1)
    assert t["admit"] + t["waiting"] == 50
