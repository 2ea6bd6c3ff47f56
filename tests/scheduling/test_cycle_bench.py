"""The scheduling-cycle benchmark (``manage.py bench_cycle``) at a tiny size: its report adds up. No timing
is asserted, only that the figures exist, are positive and agree with each other."""

from __future__ import annotations

import gc
import json

import pytest
from django.conf import settings

from portal.celery import app
from portal.models import Department, Team, User
from scheduling.benchmarks.cycle import BenchError, Scenario, run_benchmark
from scheduling.benchmarks.measuring import GcPauses, statement_shape, unsent_tasks
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import GpuOffering, Workspace


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_tiny_run_reports_consistent_figures(quiet_cluster_loops: None) -> None:
    # The session's stack worker (if earlier tests started it) would run cycles on this database too.
    report = run_benchmark(Scenario(nodes=20, queued=30, repeats=2))

    assert (report.nodes, report.gpu_nodes, report.teams) == (20, 19, 2)
    assert report.workspaces_running > 0  # the cluster was partly busy before the queue arrived
    assert report.first.admitted > 0
    assert len(report.cycles) == 2
    for cycle in [report.first, *report.cycles]:
        assert cycle.queued_before == 30  # the queue is topped up before every cycle
        assert 0 <= cycle.admitted <= cycle.queued_before
        # The admissions go to provisioning in batches (unsent here).
        batches = -(-cycle.admitted // settings.PROVISION_BATCH_SIZE)
        assert cycle.tasks.get("scheduling.provision_workspaces", 0) == batches
        assert cycle.wall_s > 0
        assert cycle.queries > 0
        assert cycle.sql_s > 0
        assert cycle.api_calls > 0
        assert all(seconds > 0 for seconds in cycle.api_s.values())
        assert 0 <= cycle.rest_s <= cycle.wall_s
        assert 0 <= cycle.gc_s <= cycle.wall_s and cycle.full_gcs >= 0
        assert cycle.sql_s + sum(cycle.api_s.values()) <= cycle.wall_s
    later = report.cycles[0]
    assert later.active_before >= report.workspaces_running * 0.9 - 1  # churn ends at most a tenth of them
    summary = report.summary()
    assert summary["min_s"] <= summary["median_s"] <= summary["max_s"]
    assert json.loads(json.dumps(report.as_dict()))["summary"] == summary

    # Everything it created is gone again.
    assert not Workspace.objects.exists()
    assert not Team.objects.filter(slug__startswith="bc-").exists()
    assert not Department.objects.filter(slug__startswith="bc-").exists()
    assert not User.objects.filter(username__startswith="bc-").exists()
    assert not GpuOffering.objects.filter(slug__startswith="bc-").exists()


def test_it_refuses_a_database_with_someone_elses_queue(org: Org) -> None:
    offering = install_offerings()["cpu"]
    make_workspace(org.alpha, org.member, offering, name="theirs", image="quay.io/jupyter/scipy-notebook:x")
    with pytest.raises(BenchError, match="database of its own"):
        run_benchmark(Scenario(nodes=20, queued=30, repeats=1))
    assert Workspace.objects.get().state == "queued"  # untouched


def test_tasks_are_counted_and_never_sent() -> None:
    with unsent_tasks() as sent:
        app.send_task("scheduling.provision_workspace", args=(1,))
        app.send_task("scheduling.provision_workspace", args=(2,))
    assert sent == {"scheduling.provision_workspace": 2}
    assert "send_task" not in vars(app)  # Celery's own method is back


def test_statement_shapes_fold_literals_lists_and_savepoints() -> None:
    assert statement_shape("SELECT 1 FROM t WHERE id IN (%s, %s, %s) AND name = 'x'") == (
        "SELECT ? FROM t WHERE id IN (...) AND name = ?"
    )
    assert statement_shape('SAVEPOINT "s1402_x12"') == statement_shape('SAVEPOINT "s99_x3"')


def test_gc_pauses_count_the_collections_made_while_recording() -> None:
    with GcPauses().recording() as pauses:
        gc.collect()  # a full collection
        gc.collect(0)
    assert pauses.full == 1 and pauses.seconds > 0
    gc.collect()
    assert pauses.full == 1  # no longer recording
