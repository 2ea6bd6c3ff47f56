"""The operators' utilisation figures: mean held GPUs per bucket, active from telemetry, queue waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.test import Client

from portal.billing.ledger import RunningPod, record_pods
from scheduling import utilisation
from scheduling.models import ActivitySample
from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from workspaces.models import WorkspaceEvent

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def test_mean_held_integrates_steps_per_bucket() -> None:
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    got = utilisation.mean_held([(5.0, 15.0, 2.0), (0.0, 30.0, 1.0), (25.0, 40.0, 0.5)], edges)
    assert got.tolist() == pytest.approx([2.0, 2.0, 1.25])
    assert utilisation.mean_held([], edges).tolist() == [0.0, 0.0, 0.0]


def test_allocated_and_active_per_model(org: Org) -> None:
    offering = install_offerings()["h100-80gb-hbm3"]
    ws = factories.make_workspace(org.alpha, org.member, offering, state="running")
    pod = RunningPod("u1", "p1", ws.pk)
    record_pods(T0, [pod])
    record_pods(T0 + H, [pod])
    ActivitySample.objects.create(workspace=ws, at=T0 + 10 * timedelta(minutes=1), seconds=1800, gpu_seconds=1800,
                                  source="scrape", gpu_active=0.5)  # fmt: skip
    found = utilisation.series(T0, T0 + 2 * H, H)
    assert found.allocated == {"H100-80GB-HBM3": [1.0, 0.0]}
    assert found.active == {"H100-80GB-HBM3": [0.25, None]}  # half an hour at 50 %; then no telemetry


def test_queue_waits_count_from_the_queuing_an_admission_ended(org: Org) -> None:
    offering = install_offerings()["h100-80gb-hbm3"]
    ws = factories.make_workspace(org.alpha, org.member, offering)
    created = ws.created_at
    WorkspaceEvent.objects.create(workspace=ws, from_state="queued", to_state="queued", reason="waiting")
    admitted = WorkspaceEvent.objects.create(workspace=ws, from_state="queued", to_state="admitted", reason="go")
    WorkspaceEvent.objects.filter(pk=admitted.pk).update(at=created + timedelta(seconds=120))
    resumed = WorkspaceEvent.objects.create(workspace=ws, from_state="stopped", to_state="queued", reason="resume")
    WorkspaceEvent.objects.filter(pk=resumed.pk).update(at=created + timedelta(hours=5))
    again = WorkspaceEvent.objects.create(workspace=ws, from_state="queued", to_state="admitted", reason="go")
    WorkspaceEvent.objects.filter(pk=again.pk).update(at=created + timedelta(hours=5, seconds=30))
    [(label, p50, p95, p99)] = utilisation.queue_waits(created - H, created + 6 * H)
    assert label == "H100-80GB-HBM3 notebook"
    assert p50 == pytest.approx(75.0)  # 120 s for the request, 30 s for the resume (not 5 hours)
    assert p95 == pytest.approx(115.5)
    assert p99 == pytest.approx(119.1)


@pytest.mark.parametrize(("persona", "status"), [("operator", 200), ("finance", 403), ("lead", 403), ("member", 403)])
def test_only_operators_see_the_utilisation_page(org: Org, persona: str, status: int) -> None:
    client = Client()
    client.force_login(org.persona(persona))  # type: ignore[arg-type]
    assert client.get("/cluster/utilisation/?days=7").status_code == status


def test_a_bad_window_says_so(org: Org) -> None:
    client = Client()
    client.force_login(org.operator)
    text = client.get("/cluster/utilisation/?days=9").content.decode()
    assert "not &#x27;9&#x27;" in text or "not '9'" in text
