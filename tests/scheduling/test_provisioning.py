"""Provisioning, teardown and reconcile called directly against the simulated cluster (no worker)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from kubernetes import client

from portal.billing.models import LedgerCursor
from scheduling import priorities
from scheduling.benchmarks.measuring import unsent_tasks
from scheduling.kube import names
from scheduling.kube.calls import Kube, TransientKubeError
from scheduling.kube.keys import workspace_id_of
from scheduling.loops import provisioning, reconcile
from scheduling.loops.schedule import orphan_sweep_due
from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.stack_fixtures import wait_for
from workspaces import actions
from workspaces.models import GpuOffering, Workspace


@pytest.fixture
def kube(stack_cluster: SimCluster, quiet_cluster_loops: None) -> Iterator[Kube]:
    api = stack_cluster.api_client()
    yield Kube(api, timeout=5)
    stack_cluster.clear_faults()
    api.close()


@pytest.fixture
def notebook(org: Org, kube: Kube) -> Iterator[Workspace]:
    workspace = admitted_notebook(org, install_offerings()["a100-sxm4-80gb-1g-10gb"])
    yield workspace
    # The cluster outlives the test, and SQLite reuses ids: leave nothing labelled with this id behind.
    for kind in ("Pod", "Service", "Secret", "PersistentVolumeClaim"):
        for obj in kube.list(kind, "team-alpha", selector(workspace)):
            kube.delete(kind, "team-alpha", obj["metadata"]["name"])
    wait_for(lambda: not kube.list("Pod", "team-alpha", selector(workspace)), what="the test's pods to go")


_names = itertools.count()


def admitted_notebook(org: Org, offering: GpuOffering) -> Workspace:
    # A fresh name each: objects of the previous test's workspace may still be terminating.
    return Workspace.objects.create(
        name=f"nb{next(_names)}", kind="notebook", team=org.alpha, owner=org.member, offering=offering, gpu_count=1,
        image="quay.io/jupyter/scipy-notebook:2025-06-02", cpu_millis=1000, memory_mib=2048,
        max_runtime_seconds=3600, gpu_equivalents=Decimal("0.1429"), state="admitted", admitted_at=timezone.now(),
        token_salt="abc",
    )  # fmt: skip


def selector(workspace: Workspace) -> str:
    return f"gpuportal.io/workspace-id={workspace.pk}"


def count(stack: SimCluster, kind: str, workspace: Workspace) -> int:
    core = client.CoreV1Api(stack.api_client())
    lister = getattr(core, f"list_namespaced_{kind}")
    return len(lister("team-alpha", label_selector=selector(workspace)).items)


def reconciled(kube: Kube, workspace: Workspace) -> str:
    """Run one reconcile pass and answer the workspace's state afterwards."""
    reconcile.reconcile(kube)
    workspace.refresh_from_db()
    return workspace.state


def test_it_provisions_once_however_often_it_runs(kube: Kube, stack_cluster: SimCluster, notebook: Workspace) -> None:
    provisioning.provision(kube, notebook.pk)
    notebook.refresh_from_db()
    assert notebook.state == "provisioning"
    Workspace.objects.filter(pk=notebook.pk).update(state="admitted")  # as if the task ran again after a crash
    provisioning.provision(kube, notebook.pk)
    assert [count(stack_cluster, k, notebook) for k in ("pod", "service", "persistent_volume_claim", "secret")] == [
        1, 1, 1, 1,
    ]  # fmt: skip


def test_it_fails_the_workspace_with_the_api_message_on_422(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    stack_cluster.inject_fault(verb="create", resource="pods", status=422, message='Pod "x" is invalid: nope')
    provisioning.provision(kube, notebook.pk)
    notebook.refresh_from_db()
    assert notebook.state == "failed"
    assert notebook.reason == 'The cluster refused the workspace: Pod "x" is invalid: nope'


def test_it_leaves_transient_errors_to_the_task_retry(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    stack_cluster.inject_fault(verb="create", resource="pods", status=503)
    with pytest.raises(TransientKubeError):
        provisioning.provision(kube, notebook.pk)
    notebook.refresh_from_db()
    assert notebook.state == "admitted"


def test_reconcile_follows_the_pod_and_recreates_an_evicted_one(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    provisioning.provision(kube, notebook.pk)
    wait_for(lambda: reconciled(kube, notebook) == "running", what="running")
    assert notebook.node_name == "gpu-a100-0"
    stack_cluster.evict_pod("team-alpha", f"ws-{notebook.pk}-{notebook.name}", "node pressure")
    wait_for(lambda: reconciled(kube, notebook) == "admitted", what="the evicted pod to be noticed")
    assert "stopped by the cluster" in notebook.reason
    wait_for(lambda: count(stack_cluster, "pod", notebook) == 0, what="the failed pod to be deleted")


def test_reconcile_stops_a_workspace_at_its_runtime_limit(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    provisioning.provision(kube, notebook.pk)
    wait_for(lambda: reconciled(kube, notebook) == "running", what="running")
    Workspace.objects.filter(pk=notebook.pk).update(started_at=timezone.now() - timedelta(hours=2))
    reconcile.reconcile(kube)
    notebook.refresh_from_db()
    assert notebook.state == "expired"
    assert notebook.reason == "Reached its 1 h runtime; stopped, home volume kept."


def test_reconcile_removes_orphans(kube: Kube, stack_cluster: SimCluster, notebook: Workspace) -> None:
    provisioning.provision(kube, notebook.pk)
    Workspace.objects.filter(pk=notebook.pk).delete()  # the database forgot it: everything in the cluster is orphaned
    # A pass between sweeps removes the orphan pod only; a sweeping pass the service, secret and volume.
    assert reconcile.reconcile(kube, sweep=False)["orphans_removed"] == 1
    assert count(stack_cluster, "persistent_volume_claim", notebook) == 1
    assert reconcile.reconcile(kube, sweep=True)["orphans_removed"] >= 3
    wait_for(lambda: count(stack_cluster, "pod", notebook) == 0, what="the orphan pod to go")
    assert count(stack_cluster, "persistent_volume_claim", notebook) == 0


def test_shared_objects_are_sent_once_and_made_again_when_they_went_away(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    provisioning.forget_shared()
    provisioning.provision(kube, notebook.pk)
    namespace = names.namespace_for(notebook.team.slug)
    assert kube.get("Namespace", None, namespace) is not None
    # Someone deletes a priority class the portal created: the next workspace's pod is refused (403),
    # the portal forgets what it believed exists, creates the shared objects again and succeeds.
    kube.delete("PriorityClass", None, priorities.class_name(notebook.priority))
    second = Workspace.objects.create(
        **{f.name: getattr(notebook, f.name) for f in Workspace._meta.concrete_fields if f.name not in ("id", "name")},
        name="second",
    )
    provisioning.provision(kube, second.pk)
    second.refresh_from_db()
    assert second.state == "provisioning", second.reason
    assert kube.get("PriorityClass", None, priorities.class_name(notebook.priority)) is not None


def _owed_for(workspace: Workspace, seconds: float) -> None:
    """As if the teardown had been owed this long (its task lost with a worker, or given up)."""
    since = timezone.now() - timedelta(seconds=seconds)
    Workspace.objects.filter(pk=workspace.pk).update(teardown_requested_at=since)


def _running(kube: Kube, notebook: Workspace) -> None:
    provisioning.provision(kube, notebook.pk)
    wait_for(lambda: reconciled(kube, notebook) == "running", what="running")


def test_reconcile_finishes_a_stop_whose_teardown_task_was_lost(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace, org: Org
) -> None:
    _running(kube, notebook)
    actions.do_stop(org.member, notebook)  # its teardown task is never sent: on_commit does not fire here
    notebook.refresh_from_db()
    assert notebook.state == "stopping" and notebook.teardown_requested_at is not None
    assert reconciled(kube, notebook) == "stopping"  # a task just sent may still come: not yet
    _owed_for(notebook, 60)
    assert reconciled(kube, notebook) == "stopped"
    assert notebook.teardown_requested_at is None
    wait_for(lambda: count(stack_cluster, "pod", notebook) == 0, what="the pod to go")
    assert count(stack_cluster, "service", notebook) == 0
    assert count(stack_cluster, "persistent_volume_claim", notebook) == 1  # stopping keeps the home volume


def test_reconcile_finishes_a_stop_left_owing_nothing(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace, org: Org
) -> None:
    # What a worker killed between paying the debt and moving on to "stopped" left before the two became one
    # update (seen in the fault test): stopping, its pod gone, nothing owed.
    _running(kube, notebook)
    actions.do_stop(org.member, notebook)
    provisioning.teardown(kube, notebook.pk, delete_volume=False)
    Workspace.objects.filter(pk=notebook.pk).update(state="stopping", teardown_requested_at=None)
    assert reconciled(kube, notebook) == "stopping"
    assert notebook.teardown_requested_at is not None  # owed again
    Workspace.objects.filter(pk=notebook.pk).update(
        teardown_requested_at=notebook.teardown_requested_at - timedelta(seconds=60)
    )
    assert reconciled(kube, notebook) == "stopped"


def test_reconcile_finishes_a_teardown_that_gave_up_during_an_api_outage(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace, org: Org
) -> None:
    _running(kube, notebook)
    actions.do_stop(org.member, notebook)
    stack_cluster.inject_fault(count=1000, status=503)  # every call fails, as in an outage
    with pytest.raises(TransientKubeError):
        provisioning.teardown(kube, notebook.pk, delete_volume=False)
    _owed_for(notebook, 60)
    with pytest.raises(TransientKubeError):
        reconcile.reconcile(kube)  # nothing is decided while the cluster cannot be read
    notebook.refresh_from_db()
    assert notebook.state == "stopping"
    stack_cluster.clear_faults()
    assert reconciled(kube, notebook) == "stopped"
    wait_for(lambda: count(stack_cluster, "pod", notebook) == 0, what="the pod to go")


def test_reconcile_finishes_a_lost_delete_without_waiting_for_the_sweep(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace, org: Org
) -> None:
    _running(kube, notebook)
    actions.do_delete(org.member, notebook)
    _owed_for(notebook, 60)
    reconcile.reconcile(kube, sweep=False)
    assert [count(stack_cluster, k, notebook) for k in ("service", "persistent_volume_claim", "secret")] == [0, 0, 0]
    wait_for(lambda: count(stack_cluster, "pod", notebook) == 0, what="the pod to go")


def test_a_pass_that_failed_gives_the_orphan_sweep_back(kube: Kube, stack_cluster: SimCluster, db: None) -> None:
    cache.delete("reconcile:sweep")
    stack_cluster.inject_fault(count=1000, status=503)
    with pytest.raises(TransientKubeError):
        reconcile.reconcile(kube)
    assert orphan_sweep_due()  # the next pass sweeps instead of waiting out ORPHAN_SWEEP_SECONDS


def test_a_batch_creates_each_workspace_once_and_deals_with_each_failure_on_its_own(
    org: Org, kube: Kube, stack_cluster: SimCluster, django_capture_on_commit_callbacks: Any
) -> None:
    offering: GpuOffering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    batch = [admitted_notebook(org, offering) for _ in range(5)]
    stack_cluster.inject_fault(verb="create", resource="pods", status=422, message='Pod "x" is invalid: nope')
    stack_cluster.inject_fault(verb="create", resource="pods", status=503)
    try:
        with unsent_tasks() as sent, django_capture_on_commit_callbacks(execute=True):
            assert provisioning.provision_many(kube, [w.pk for w in batch]) == 3
        states = Counter(Workspace.objects.filter(pk__in=[w.pk for w in batch]).values_list("state", flat=True))
        assert states == {"provisioning": 3, "failed": 1, "admitted": 1}
        failed = Workspace.objects.get(pk__in=[w.pk for w in batch], state="failed")
        assert failed.reason == 'The cluster refused the workspace: Pod "x" is invalid: nope'
        assert sent["scheduling.provision_workspace"] == 1  # the transient failure: a task of its own retries it
        for workspace in batch:
            pods = count(stack_cluster, "pod", workspace)
            assert pods == (1 if Workspace.objects.get(pk=workspace.pk).state == "provisioning" else 0)
        # Run again (a batch redelivered after a crash): nothing is created twice, the admitted one is done.
        assert provisioning.provision_many(kube, [w.pk for w in batch]) == 4
        assert [count(stack_cluster, "pod", w) for w in batch].count(1) == 4
    finally:
        for workspace in batch:
            for kind in ("Pod", "Service", "Secret", "PersistentVolumeClaim"):
                for obj in kube.list(kind, "team-alpha", selector(workspace)):
                    kube.delete(kind, "team-alpha", obj["metadata"]["name"])


def test_a_pass_moves_many_workspaces_in_as_many_statements_as_one(
    org: Org, kube: Kube, stack_cluster: SimCluster, django_capture_on_commit_callbacks: Any
) -> None:
    """Dozens of jobs finish between two passes on a busy cluster: their moves (and events) are written
    together, so a pass's statements do not grow with how many workspaces moved; orphans go in parallel."""
    offering: GpuOffering = install_offerings()["a100-sxm4-80gb-1g-10gb"]

    def statements_to_run(count: int) -> int:  # the workspaces' statements of the pass that sees them run
        batch = [admitted_notebook(org, offering) for _ in range(count)]
        ids = [w.pk for w in batch]
        with unsent_tasks():
            provisioning.provision_many(kube, ids)
        wait_for(lambda: all(p["status"].get("phase") == "Running" for p in pods(ids)) and len(pods(ids)) == count,
                 what="the pods to run")  # fmt: skip
        with CaptureQueriesContext(connection) as queries, unsent_tasks():
            reconcile.reconcile(kube, sweep=False)
        assert set(Workspace.objects.filter(pk__in=ids).values_list("state", flat=True)) == {"running"}
        Workspace.objects.filter(pk__in=ids).update(state="deleted")  # the next pass removes all they left
        with unsent_tasks():
            assert reconcile.reconcile(kube, sweep=True)["orphans_removed"] >= count * 4  # pod, service, secret, pvc
        wait_for(lambda: not pods(ids), what="the orphans to go")
        # The workspaces' (the ledger's own statements depend on what the pass before left open).
        return sum("workspaces_workspace" in query["sql"] for query in queries.captured_queries)

    def pods(ids: list[int]) -> list[dict[str, Any]]:
        return [p for p in kube.list("Pod", "team-alpha") if workspace_id_of(p) in ids]

    with unsent_tasks():
        reconcile.reconcile(kube, sweep=False)  # what a pass does once a minute (the fleet's capacity), done
    assert statements_to_run(6) == statements_to_run(2)


def test_a_pass_is_billed_as_of_its_pod_list_not_of_the_slower_lists_after_it(
    kube: Kube, stack_cluster: SimCluster, notebook: Workspace
) -> None:
    provisioning.provision(kube, notebook.pk)
    wait_for(lambda: reconciled(kube, notebook) == "running", what="running")
    stack_cluster.inject_fault(verb="list", resource="jobs", delay_s=1.0, count=1)  # after the pods are listed
    asked = timezone.now()
    reconcile.reconcile(kube, sweep=False)
    assert timezone.now() - asked >= timedelta(seconds=1.0), "the job list was not held up"
    observed_at = LedgerCursor.objects.get(stream="pods").observed_at
    assert observed_at is not None, "the pass recorded nothing"
    # A pod that started or ended during the job list would otherwise be billed a second off.
    assert observed_at - asked < timedelta(seconds=0.5)
