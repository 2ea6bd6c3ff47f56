"""/metrics: the figures it computes from the database, counted incrementally, and who may read it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from portal.metrics import events
from portal.metrics.exposition import FAMILIES
from scheduling.kube.calls import classify, take_api_errors
from scheduling.loops import passes
from scheduling.models import KubeApiErrorCount, LoopStat
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

H100 = "H100-80GB-HBM3"


@pytest.fixture
def h100(org: Org) -> GpuOffering:
    return install_offerings()["h100-80gb-hbm3"]


def _at(workspace: Workspace, *moves: tuple[str, str, datetime]) -> None:
    """Events (from_state, to_state, at) as the transitions would have written them, at chosen times."""
    for from_state, to_state, at in moves:
        event = WorkspaceEvent.objects.create(workspace=workspace, from_state=from_state, to_state=to_state, reason="x")
        WorkspaceEvent.objects.filter(pk=event.pk).update(at=at)


def _request(org: Org, offering: GpuOffering, created: datetime, **fields: Any) -> Workspace:
    workspace = make_workspace(org, offering, **fields)
    Workspace.objects.filter(pk=workspace.pk).update(created_at=created)
    _at(workspace, ("", "queued", created))
    return workspace


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_admission_waits_and_transitions_are_counted_from_the_log(org: Org, h100: GpuOffering) -> None:
    start = timezone.now() - timedelta(hours=2)
    quick = _request(org, h100, start, name="quick", kind="job", priority="normal")
    _at(
        quick,
        ("queued", "admitted", start + timedelta(seconds=3)),
        ("admitted", "running", start + timedelta(seconds=9)),
    )
    # Preempted after 10 minutes, queued again, admitted 20 minutes after it re-entered the queue.
    slow = _request(org, h100, start, name="slow", kind="job", priority="normal")
    requeued = start + timedelta(minutes=10)
    _at(
        slow,
        ("queued", "admitted", start + timedelta(seconds=40)),
        ("admitted", "preempted", requeued - timedelta(seconds=5)),
        ("preempted", "queued", requeued),
        ("queued", "admitted", requeued + timedelta(minutes=20)),
    )
    totals = events.count_since(events.Totals(), timezone.now())
    key = (H100, "job", "normal")
    assert totals.waits[key].count == 3
    assert totals.waits[key].total == pytest.approx(3 + 40 + 1200)
    bounds = dict(zip(events.WAIT_BUCKETS, totals.waits[key].buckets, strict=True))
    assert (bounds[1.0], bounds[5.0], bounds[30.0], bounds[60.0], bounds[600.0], bounds[1800.0]) == (0, 1, 1, 2, 2, 3)
    assert totals.transitions[("admitted", H100, "job")] == 3
    assert totals.transitions[("preempted", H100, "job")] == 1
    assert totals.transitions[("running", H100, "job")] == 1
    assert ("queued", H100, "job") in totals.transitions  # the re-queue; the request itself is no move


def test_counting_in_steps_gives_what_counting_once_gives(org: Org, h100: GpuOffering) -> None:
    start = timezone.now() - timedelta(hours=1)
    for i in range(6):
        workspace = _request(org, h100, start + timedelta(minutes=i), name=f"w{i}")
        _at(workspace, ("queued", "admitted", start + timedelta(minutes=i, seconds=7 * i)))
    once = events.count_since(events.Totals(), timezone.now())
    stepped = events.Totals()
    for minutes in (2, 4, 60):
        stepped = events.count_since(events.Totals.from_json(stepped.to_json()), start + timedelta(minutes=minutes))
    assert stepped.transitions == once.transitions
    assert {k: (h.buckets, h.count) for k, h in stepped.waits.items()} == {
        k: (h.buckets, h.count) for k, h in once.waits.items()
    }
    assert stepped.upto == once.upto


def test_an_event_newer_than_the_margin_holds_back_the_ids_after_it(org: Org, h100: GpuOffering) -> None:
    now = timezone.now()
    workspace = _request(org, h100, now - timedelta(hours=1), name="a")
    _at(workspace, ("queued", "admitted", now))  # too new: not yet
    later = _request(org, h100, now - timedelta(hours=1), name="b")
    _at(later, ("queued", "admitted", now - timedelta(minutes=5)))  # older, but a higher id
    totals = events.count_since(events.Totals(), now - timedelta(minutes=1))
    assert ("admitted", H100, "notebook") not in totals.transitions
    totals = events.count_since(totals, now + timedelta(minutes=1))
    assert totals.transitions[("admitted", H100, "notebook")] == 2


def test_queue_gauges_say_who_waits_within_quota(org: Org, h100: GpuOffering, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    cache.delete(events.CACHE_KEY)
    now = timezone.now()
    set_quota(org.alpha, H100, 2)
    running = make_workspace(org, h100, 1, name="running", state="running")
    assert running.state == "running"
    _request(org, h100, now - timedelta(minutes=30), name="fits")  # 1 held + 1 <= 2 guaranteed
    _request(org, h100, now - timedelta(minutes=50), name="too-big", gpu_count=2, gpu_equivalents=2)
    _request(org, h100, now - timedelta(minutes=10), team=org.beta, name="no-quota")
    found = _samples(Client().get("/metrics").content.decode())
    assert found[("gpu_portal_queue_requests", (("gpu_model", H100), ("team", "alpha")))] == 2
    assert found[("gpu_portal_queue_oldest_wait_seconds", (("gpu_model", H100), ("team", "alpha")))] >= 50 * 60
    assert found[("gpu_portal_queue_requests", (("gpu_model", H100), ("team", "beta")))] == 1
    assert found[("gpu_portal_queue_within_quota_requests", (("gpu_model", H100),))] == 1
    oldest_within = found[("gpu_portal_queue_within_quota_oldest_wait_seconds", (("gpu_model", H100),))]
    assert 30 * 60 <= oldest_within < 31 * 60
    assert found[("gpu_portal_demand_gpu_equivalents", (("gpu_model", H100),))] == 4  # queued only: no pod seen


def test_loop_passes_make_a_histogram(db: None, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    passes.add_pass("test-loop", 0.2)
    passes.add_pass("test-loop", 3.0)
    passes.add_pass("test-loop", 500.0, failed=True)
    row = LoopStat.objects.get(loop="test-loop")
    assert (row.passes, row.failures) == (3, 1)
    found = _samples(Client().get("/metrics").content.decode())
    label = (("loop", "test-loop"),)
    bucket = {
        le: found[("gpu_portal_loop_duration_seconds_bucket", (("le", le), ("loop", "test-loop")))]
        for le in ("0.1", "0.25", "5.0", "120.0", "+Inf")
    }
    assert bucket == {"0.1": 0, "0.25": 1, "5.0": 2, "120.0": 2, "+Inf": 3}
    assert found[("gpu_portal_loop_duration_seconds_count", label)] == 3
    assert found[("gpu_portal_loop_duration_seconds_sum", label)] == pytest.approx(503.2)
    assert found[("gpu_portal_loop_failures_total", label)] == 1
    assert found[("gpu_portal_loop_last_success_timestamp_seconds", label)] == pytest.approx(
        timezone.now().timestamp(), abs=60
    )


def test_every_family_is_declared(db: None, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    text = Client().get("/metrics").content.decode()
    declared = {family.name: family.type for family in text_string_to_metric_families(text)}
    assert set(declared) <= set(FAMILIES)
    assert all(FAMILIES[name] == kind for name, kind in declared.items())


@pytest.mark.parametrize(
    ("header", "status"),
    [(None, 401), ("Bearer wrong", 401), ("Basic s3cret-token", 401), ("Bearer s3cret-token", 200)],
)
def test_it_wants_the_bearer_token(db: None, settings: Any, header: str | None, status: int) -> None:
    settings.PORTAL_METRICS_TOKEN = "s3cret-token"
    response = Client().get("/metrics", headers={"authorization": header} if header else None)
    assert response.status_code == status
    if status == 401:
        assert "bearer token" in response.content.decode()


def test_production_without_a_token_says_how_to_turn_it_on(db: None, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    settings.PORTAL_ENV = "production"
    response = Client().get("/metrics")
    assert response.status_code == 403
    assert "PORTAL_METRICS_TOKEN" in response.content.decode()


def test_failed_kubernetes_calls_of_every_process_add_up(db: None, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    take_api_errors()  # what earlier tests of this process counted
    # What other processes flushed before (a full-stack test's session worker writes here too), and 4 more.
    base = dict(KubeApiErrorCount.objects.values_list("status", "count"))
    KubeApiErrorCount.objects.update_or_create(status="503", defaults={"count": base.get("503", 0) + 4})
    classify(ApiException(status=503))
    classify(ConnectionResetError("reset by peer"))
    assert classify(classify(ApiException(status=404))).status == 404  # a classified error is not counted again
    found = _samples(Client().get("/metrics").content.decode())
    assert found[("gpu_portal_kubernetes_api_errors_total", (("status", "503"),))] == base.get("503", 0) + 5
    assert (
        found[("gpu_portal_kubernetes_api_errors_total", (("status", "connection"),))] == base.get("connection", 0) + 1
    )
    assert found[("gpu_portal_kubernetes_api_errors_total", (("status", "404"),))] == base.get("404", 0) + 1


def test_the_broker_queues_are_measured(db: None, settings: Any) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    found = _samples(Client().get("/metrics").content.decode())
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    assert (("gpu_portal_celery_queue_messages", (("queue", queue),))) in found
