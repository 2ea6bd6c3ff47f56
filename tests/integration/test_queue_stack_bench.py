"""The queue benchmark's full-stack mode on a tiny scenario: 2 departments x 2 teams, 44 jobs, a real worker
and simulated cluster. Checks the report's structure and that its figures are consistent, never timings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.db import connection

from portal.models import User
from scheduling.benchmarks.queue_sim import load_scenario
from scheduling.benchmarks.stack_queue import (
    RUN_LOCK,
    USER,
    StackConfig,
    clock_speed,
    job_shape,
    make_plan,
    priority_map,
    report_lines,
    run,
    scale_scenario,
    to_json,
)
from scheduling.demand import SIM_DURATION_ENV
from scheduling.engine.quota import UNIT
from scheduling.management.commands import bench_queue_stack
from tests.db_quiet import others_done
from tests.locks_elsewhere import held_elsewhere
from workspaces.models import Workspace

NOMINAL, BORROW = 4, 8
TINY = {
    "cohorts": [
        {
            "className": "cohort",
            "count": 2,
            "queuesSets": [
                {
                    "className": "cq",
                    "count": 2,
                    "nominalQuota": NOMINAL,
                    "borrowingLimit": BORROW,
                    "reclaimWithinCohort": "Any",
                    "withinClusterQueue": "LowerPriority",
                    "workloadsSets": [
                        {"count": 6, "creationIntervalMs": 100,
                         "workloads": [{"className": "small", "runtimeMs": 200, "priority": 50, "request": 1}]},
                        {"count": 3, "creationIntervalMs": 500,
                         "workloads": [{"className": "medium", "runtimeMs": 500, "priority": 100, "request": 2}]},
                        {"count": 2, "creationIntervalMs": 1200,
                         "workloads": [{"className": "large", "runtimeMs": 1000, "priority": 200, "request": 4}]},
                    ],
                }
            ],
        }
    ]
}  # fmt: skip
WORKLOADS = 2 * 2 * (6 + 3 + 2)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_the_mapping_keeps_shapes_whole_priorities_ordered_and_runtimes_whole_seconds(tiny: Path) -> None:
    assert job_shape(1 * UNIT, 8) == (1, 1)
    assert job_shape(5 * UNIT, 8) == (1, 5)
    assert job_shape(20 * UNIT, 8) == (4, 5)
    assert job_shape(16 * UNIT, 8) == (8, 2)
    with pytest.raises(ValueError, match="whole number"):
        job_shape(UNIT // 2, 8)
    assert priority_map([200, 50, 100, 50]) == {50: "batch", 100: "normal", 200: "high"}
    assert clock_speed([200, 500, 1000], None) == 10
    assert clock_speed([1000, 3000], None) == 1
    with pytest.raises(ValueError, match="whole number"):
        clock_speed([200], 2)
    scaled = scale_scenario(load_scenario(tiny), 0.5)
    counts = [ws.count for ws in scaled.cohorts[0].queue_sets[0].workload_sets]
    assert counts == [3, 2, 1]  # halved, rounded half to even, at least one
    plan = make_plan(StackConfig(scenario=tiny))
    assert len(plan.items) == WORKLOADS and plan.nodes == 2 and plan.speed == 10
    assert {(i.arrival.class_name, i.sim_seconds) for i in plan.items} == {("small", 2), ("medium", 5), ("large", 10)}


@pytest.mark.django_db(transaction=True)
def test_a_tiny_scenario_runs_end_to_end_on_the_full_stack(tiny: Path) -> None:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("the full stack needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL)")
    result = run(StackConfig(scenario=tiny, concurrency=2, creators=2, timeout_s=180, keep=True), say=lambda _: None)
    others_done()  # the killed workers' last statements

    s = result.result
    assert (s.workloads, s.finished, result.not_succeeded) == (WORKLOADS, WORKLOADS, 0)
    assert s.admissions >= WORKLOADS and s.preemptions >= 0
    assert s.admissions == WORKLOADS + s.preemptions  # every preempted run was admitted again
    assert set(s.admission_ms) == {"small", "medium", "large"}
    assert all(ms >= 0 for ms in s.admission_ms.values())
    assert len(s.queue_usage) == 4
    for usage in [*s.queue_usage.values(), *s.queue_useful.values()]:
        assert 0 < usage <= (NOMINAL + BORROW) / NOMINAL  # never above guarantee plus borrowing
    assert s.cycles > 0

    jobs = Workspace.objects.filter(owner__username=USER)
    assert jobs.count() == WORKLOADS
    for job in jobs:
        assert job.state == Workspace.State.SUCCEEDED, (job.name, job.state, job.reason)
        assert job.admitted_at is not None and job.finished_at is not None
        assert job.created_at <= job.admitted_at <= job.finished_at
        assert job.kind == Workspace.Kind.JOB and SIM_DURATION_ENV in job.env

    # Held time by phase: every class has runs admitted once; creating and finishing take time, and the quota
    # is held at least the workload's own runtime (admission comes before the run, noticing its end after).
    assert set(result.phases) == {"small", "medium", "large"}
    once = sum(1 for job in jobs if job.events.filter(from_state="queued", to_state="admitted").count() == 1)
    assert sum(ph.runs for ph in result.phases.values()) == once
    for name, ph in result.phases.items():
        assert ph.runs > 0 and ph.creating > 0 and ph.finishing > 0, name
        assert ph.creating + ph.finishing >= ph.runtime == {"small": 0.2, "medium": 0.5, "large": 1.0}[name], name

    text = "\n".join(report_lines(result))
    for figure in ("wall time (s)", "lowest queue usage of nominal (%)", "mean time to admission, large (s)",
                   "mean time to admission, medium (s)", "mean time to admission, small (s)",
                   "admissions per second, real time", "preemptions", "at scale 1:", "quota held per run"):  # fmt: skip
        assert figure in text
    out = to_json(result)
    assert out["mode"] == "full-stack" and out["scale"] == 1.0 and out["workloads"] == WORKLOADS
    assert set(out["admission_s"]) == {"small", "medium", "large"}
    assert out["kueue"]["wall_s"] == 351.0
    assert set(out["held_phases_s"]) == {"small", "medium", "large"}


@pytest.mark.django_db(transaction=True)
def test_a_second_run_on_the_same_database_is_refused_and_deletes_nothing(tiny: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the run's lock is PostgreSQL's advisory lock")
    User.objects.create_user(USER)  # what its start-up clean-up would have deleted
    refused = pytest.raises(ValueError, match="another bench_queue_stack run is using this database")
    with held_elsewhere(RUN_LOCK), refused:  # a run under way
        run(StackConfig(scenario=tiny), say=lambda _: None)
    assert User.objects.filter(username=USER).exists()


def test_the_command_line_sets_the_reconcile_interval() -> None:
    parser = bench_queue_stack.Command().create_parser("manage.py", "bench_queue_stack")
    assert bench_queue_stack.stack_config(vars(parser.parse_args([]))).reconcile_interval_s == 0.5
    chosen = bench_queue_stack.stack_config(vars(parser.parse_args(["--reconcile-interval", "5", "--scale", "0.2"])))
    assert (chosen.reconcile_interval_s, chosen.scale) == (5.0, 0.2)
