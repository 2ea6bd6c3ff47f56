"""The scheduling cycle's side of elastic jobs (scheduling/loops/elastic.py): the workloads an elastic job is to
the engine, the shrink notice and its expiry, and the Job scaled to the size its row says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes.client import ApiClient

from scheduling.demand import workload_of
from scheduling.engine.quota import UNIT
from scheduling.kube.calls import Kube
from scheduling.loops import elastic, reconcile
from scheduling.loops.observe import Observation
from scheduling.loops.reconcile import Changes, ClusterView
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import ELASTIC_SIZE_EVENT, SHRINK_NOTICE_EVENT, GpuOffering, Workspace

pytestmark = pytest.mark.django_db


def _elastic(org: Org, **fields: Any) -> Workspace:
    if not GpuOffering.objects.exists():
        install_offerings()
    offering = GpuOffering.objects.get(slug="h100-80gb-hbm3")
    values: dict[str, Any] = {"kind": Workspace.Kind.JOB, "command": ["torchrun", "train.py"],
                              "priority": Workspace.Priority.NORMAL, "min_workers": 2, "max_workers": 6,
                              "workers": 4, "gpu_equivalents": 4, "state": Workspace.State.RUNNING,
                              "admitted_at": timezone.now()} | fields  # fmt: skip
    return make_workspace(org.alpha, org.member, offering, **values)


def test_it_holds_its_minimum_and_a_growth_workload_per_further_worker(org: Org) -> None:
    workspace = _elastic(org)
    held = elastic.held(workspace, workload_of(workspace))
    assert [(w.id, w.units, w.growth) for w in held] == [
        (str(workspace.pk), 2 * UNIT, False),
        (f"{workspace.pk}+3", UNIT, True),
        (f"{workspace.pk}+4", UNIT, True),
    ]
    assert (held[2].admitted_at or 0) > (held[1].admitted_at or 0)  # the highest worker is the youngest
    asks = elastic.asks(workspace, workload_of(workspace))
    assert [(w.id, w.growth, w.admitted_at) for w in asks] == [
        (f"{workspace.pk}+5", True, None),
        (f"{workspace.pk}+6", True, None),
    ]
    assert elastic.growth_of(asks[0].id) == (str(workspace.pk), 5)
    assert elastic.growth_of(str(workspace.pk)) is None


def test_it_asks_for_nothing_while_told_to_shrink_or_not_running(org: Org) -> None:
    shrinking = _elastic(org, shrink_to=2, shrink_at=timezone.now())
    held = elastic.held(shrinking, workload_of(shrinking))
    assert [w.preempting for w in held] == [False, True, True]  # they hold their units until the notice ends
    assert elastic.asks(shrinking, workload_of(shrinking)) == []
    provisioning = _elastic(org, state=Workspace.State.PROVISIONING)
    assert elastic.asks(provisioning, workload_of(provisioning)) == []


def test_a_shrink_notice_then_the_shrink(org: Org, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    settings.PREEMPTION_NOTICE_SECONDS = 30
    workspace = _elastic(org)
    now = timezone.now()
    sizes = elastic.ElasticDecisions()
    sizes.shrink(workspace, "team beta needs its guaranteed H100 back; this workload was borrowing it")
    sizes.shrink(workspace, "team beta needs its guaranteed H100 back; this workload was borrowing it")
    sizes.write(now)
    workspace.refresh_from_db()
    assert (workspace.workers, workspace.shrink_to, workspace.shrink_at) == (4, 2, now + timedelta(seconds=30))
    notice = workspace.events.get(details__event=SHRINK_NOTICE_EVENT)
    assert notice.reason.startswith("Will shrink to 2 workers at ")

    assert elastic.expire_shrinks(now + timedelta(seconds=29)) == 0
    with django_capture_on_commit_callbacks() as callbacks:
        assert elastic.expire_shrinks(now + timedelta(seconds=30)) == 1
    assert len(callbacks) == 1  # the Job is scaled once the shrink is committed
    workspace.refresh_from_db()
    assert workspace.workers == 2 and workspace.gpu_equivalents == 2
    assert workspace.shrink_to is None and workspace.shrink_at is None
    assert workspace.events.filter(details__event=ELASTIC_SIZE_EVENT, details__workers=2).exists()


def test_growth_is_written_only_if_the_row_is_as_read(org: Org) -> None:
    workspace = _elastic(org)
    stale = Workspace.objects.get(pk=workspace.pk)
    Workspace.objects.filter(pk=workspace.pk).update(preempt_at=timezone.now())  # told to stop meanwhile
    sizes = elastic.ElasticDecisions()
    sizes.grown[stale.pk] = (stale, 2)
    sizes.write(timezone.now())
    workspace.refresh_from_db()
    assert workspace.workers == 4
    assert not workspace.events.filter(details__event=ELASTIC_SIZE_EVENT).exists()


def test_queueing_again_starts_it_at_its_minimum(org: Org) -> None:
    workspace = _elastic(org, shrink_to=3, shrink_at=timezone.now())
    assert workspace.elastic_restart_fields() == {
        "workers": 2,
        "gpu_equivalents": 2,
        "shrink_to": None,
        "shrink_at": None,
    }
    fixed = _elastic(org, min_workers=None, max_workers=None)
    assert fixed.elastic_restart_fields() == {}


@pytest.mark.parametrize(("parallelism", "scaled"), [(2, 1), (4, 0)])
def test_reconcile_scales_a_job_left_at_another_size(
    org: Org, django_capture_on_commit_callbacks: Any, parallelism: int, scaled: int
) -> None:
    workspace = _elastic(org, node_name="n1")  # 4 workers by its row
    view = ClusterView()
    view.jobs[workspace.pk] = {"spec": {"parallelism": parallelism, "completions": parallelism}}
    seen = Observation(Workspace.State.RUNNING, workspace.reason, "n1")
    with django_capture_on_commit_callbacks() as callbacks:
        reconcile._apply(Kube(ApiClient(), timeout=1.0), workspace, seen, view, Changes())  # calls no API here
    assert len(callbacks) == scaled  # a scale lost with a worker is sent again
