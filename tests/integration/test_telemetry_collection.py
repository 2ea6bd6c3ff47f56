"""Telemetry collection on the full stack: running workspaces get one sample per pass with their GPUs'
activity (from the simulated cluster's dcgm-exporter page, read directly or through a real Prometheus) and
their notebook's kernels (through the API server's service proxy, with the notebook's own token)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from scheduling.kube.client import kube
from scheduling.loops import telemetry
from scheduling.models import ActivitySample
from scheduling.simcluster.testing import SimCluster
from scheduling.telemetry.sources import DirectScrape, PrometheusQuery
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.prometheus_fixtures import Prometheus
from tests.stack_fixtures import wait_for
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(org: Org, stack: SimCluster) -> dict[str, Workspace]:
    offerings = install_offerings()
    install_images()
    set_quota(org.alpha, offerings["a100-sxm4-80gb-1g-10gb"].flavour, 4)
    api = api_client_for(org.member)
    made = {}
    for name, kind in [("nb", "notebook"), ("cpu-nb", "notebook")]:
        offering = "cpu" if name == "cpu-nb" else "a100-sxm4-80gb-1g-10gb"
        payload: dict[str, Any] = {"kind": kind, "name": name, "team": "alpha", "offering": offering, "image": "scipy"}
        response = api.post(
            "/api/v1/workspaces/", payload | ({"gpu_count": 1} if offering != "cpu" else {}), format="json"
        )
        assert response.status_code == 202, response.json()
        made[name] = int(response.json()["id"])
    wait_for(
        lambda: Workspace.objects.filter(pk__in=made.values(), state="running").count() == 2, timeout=30, what="running"
    )
    return {name: Workspace.objects.get(pk=pk) for name, pk in made.items()}


def sample_of(workspace: Workspace, at: datetime) -> ActivitySample:
    """The row this test's pass wrote (the session worker's own passes write rows too, without a source)."""
    return ActivitySample.objects.get(workspace=workspace, at=at)


def test_a_pass_records_gpu_and_notebook_activity(stack: SimCluster, running: dict[str, Workspace]) -> None:
    now = timezone.now()
    result = telemetry.collect(kube(), now, source=DirectScrape([f"{stack.plain_url}/metrics"]))
    assert result.samples >= 2 and result.gpu_source == "scrape"
    gpu_nb = sample_of(running["nb"], now)
    assert gpu_nb.source == "scrape" and gpu_nb.seconds == 30
    assert gpu_nb.gpu_active is not None and 0 <= gpu_nb.gpu_active <= 1
    assert gpu_nb.fb_total_mib and gpu_nb.fb_total_mib < 11_000  # its own 1g.10gb MIG instance
    assert gpu_nb.kernels is not None and gpu_nb.last_activity is not None  # Jupyter answered its token
    cpu_nb = sample_of(running["cpu-nb"], now)
    assert cpu_nb.gpu_active is None and cpu_nb.fb_used_mib is None  # no GPU: no GPU figure, not 0
    assert cpu_nb.kernels is not None


def test_an_unreadable_source_leaves_gpu_figures_empty_not_zero(
    stack: SimCluster, running: dict[str, Workspace]
) -> None:
    now = timezone.now()
    result = telemetry.collect(kube(), now, source=DirectScrape(["http://127.0.0.1:9/metrics"], timeout=1))
    assert result.gpu_source == "none"
    sample = sample_of(running["nb"], now)
    assert sample.source == "none" and sample.gpu_active is None and sample.gpu_observed_at is None
    assert sample.kernels is not None  # the notebook was still read


def test_prometheus_gives_the_same_workspace_figures(
    stack: SimCluster, running: dict[str, Workspace], prometheus: Callable[[str], Prometheus]
) -> None:
    server = prometheus(stack.plain_url.removeprefix("http://"))
    source = PrometheusQuery(server.url)
    wait_for(lambda: source.readings(), timeout=20, what="Prometheus to scrape the exporter")
    now = timezone.now()
    telemetry.collect(kube(), now, source=source)
    sample = sample_of(running["nb"], now)
    assert sample.source == "prometheus" and sample.gpu_active is not None


def test_time_sliced_notebooks_get_their_own_activity(org: Org, stack: SimCluster) -> None:
    """Eight notebooks on the time-sliced L40S node (4 GPUs, 4 replicas each; the device plugin spreads them,
    so each GPU holds one busy and one quiet notebook): each gets its own workload's activity, not its GPU's
    (the simulated exporter runs with --kubernetes-virtual-gpus)."""
    offerings = install_offerings()
    install_images()
    set_quota(org.alpha, offerings["l40s-shared-4"].flavour, 8)
    api = api_client_for(org.member)
    profiles = {f"bg-{i}": "gpu-background" for i in range(4)} | {f"quiet-{i}": "none" for i in range(4)}
    made = {}
    for name, profile in profiles.items():
        payload = {"kind": "notebook", "name": name, "team": "alpha", "offering": "l40s-shared-4", "gpu_count": 1,
                   "image": "scipy", "env": {"GPUPORTAL_SIM_PROFILE": profile}}  # fmt: skip
        response = api.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        made[name] = int(response.json()["id"])
    wait_for(
        lambda: Workspace.objects.filter(pk__in=made.values(), state="running").count() == 8, timeout=30, what="running"
    )
    now = timezone.now()
    telemetry.collect(kube(), now, source=DirectScrape([f"{stack.plain_url}/metrics"]))
    for name, pk in made.items():
        sample = ActivitySample.objects.get(workspace_id=pk, at=now)
        assert sample.gpu_active is not None, name
        if profiles[name] == "gpu-background":
            assert sample.gpu_active > 0.5, name
        else:
            assert sample.gpu_active < 0.05, name
