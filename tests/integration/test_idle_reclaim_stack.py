"""Idle reclaim on the full stack: PostgreSQL, Redis, a real Celery worker with its beat, a simulated cluster,
and a real Prometheus server scraping the cluster's dcgm-exporter page, which the portal queries.

The simulated cluster runs at real speed here: Jupyter's timestamps and the portal's clock must agree, as
they do on a real cluster. Time is shortened on the portal's side instead: one minute of the idle rules
lasts ``MINUTE`` real seconds (``IDLE_POLICY_MINUTE_SECONDS``), so the shortest window operators allow (30
min) is 30 s and the grace period (5 min) 5 s; telemetry is collected every second.

What each notebook does comes from its simulated workload profile (``GPUPORTAL_SIM_PROFILE``):
``none`` is opened and forgotten (no kernel started, nothing done); ``cpu-preprocessing`` keeps its kernel busy with
the GPU idle; ``gpu-background`` keeps the GPU busy with no browser and an idle kernel; a training job with
profile ``none`` holds its GPU and does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from kubernetes import client as k8s

from scheduling.demand import SIM_DURATION_ENV, SIM_PROFILE_ENV, spec_for
from scheduling.kube import names
from scheduling.kube.client import reset_client
from scheduling.models import TeamPolicy
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.prometheus_fixtures import Prometheus
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace, WorkspaceEvent

pytestmark = pytest.mark.django_db(transaction=True)

# Real seconds per minute of the idle rules: the shortest window (30 min) must outlast the 20 s a notebook's
# kernel takes to start, or every notebook would look idle before its kernel is up.
MINUTE = 1.0
WINDOW_S = 30 * MINUTE
GRACE_S = 5 * MINUTE
MIG = "a100-sxm4-80gb-1g-10gb"
WHOLE = "h100-80gb-hbm3"


@pytest.fixture(scope="module")
def real_time_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=5, speed=1.0, tmp_dir=tmp_path_factory.mktemp("idle-stack")) as cluster:
        yield cluster


@pytest.fixture
def idle_stack(
    org: Org,
    stack: SimCluster,
    real_time_cluster: SimCluster,
    dedicated_worker: Callable[..., Worker],
    prometheus: Callable[[str], Prometheus],
    settings: Any,
) -> Iterator[tuple[SimCluster, Prometheus]]:
    """A worker of the test's own on the real-time cluster, reading GPU activity from Prometheus."""
    server = prometheus(real_time_cluster.plain_url.removeprefix("http://"))
    timing = {"TELEMETRY_INTERVAL_SECONDS": "1", "IDLE_POLICY_MINUTE_SECONDS": str(MINUTE)}
    dedicated_worker(
        KUBECONFIG=str(real_time_cluster.kubeconfig_path),
        TELEMETRY_SOURCE="prometheus",
        PROMETHEUS_URL=server.url,
        **timing,
    )
    settings.KUBECONFIG = str(real_time_cluster.kubeconfig_path)  # the web side reads the same cluster
    settings.NOTEBOOK_PROXY_URL = real_time_cluster.plain_url
    settings.TELEMETRY_INTERVAL_SECONDS = 1.0
    settings.IDLE_POLICY_MINUTE_SECONDS = MINUTE
    reset_client()
    offerings = install_offerings()
    install_images()
    for slug in (MIG, WHOLE):
        set_quota(org.alpha, offerings[slug].flavour, 8)
    # The shortest rules operators allow; one keep-alive of an (accelerated) hour per run.
    TeamPolicy.objects.create(
        team=org.alpha,
        idle_window_minutes=30,
        idle_grace_minutes=5,
        stuck_window_minutes=30,
        keep_alive_hours=1,
        keep_alives_per_run=1,
    )
    yield real_time_cluster, server
    reset_client()


def request(org: Org, name: str, offering: str, profile: str, *, kind: str = "notebook") -> int:
    payload: dict[str, Any] = {
        "kind": kind,
        "name": name,
        "team": "alpha",
        "offering": offering,
        "gpu_count": 1,
        "image": "scipy" if kind == "notebook" else "pytorch",
        "env": {SIM_PROFILE_ENV: profile} | ({SIM_DURATION_ENV: "900"} if kind == "job" else {}),
    }
    if kind == "job":
        payload["command"] = ["python", "train.py"]
    response = api_client_for(org.member).post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    return int(response.json()["id"])


def workspace(pk: int) -> Workspace:
    return Workspace.objects.get(pk=pk)


def idle_events(pk: int) -> list[WorkspaceEvent]:
    return list(WorkspaceEvent.objects.filter(workspace_id=pk, source="idle").order_by("at"))


def home_claim_uid(cluster: SimCluster, pk: int) -> str:
    ws = workspace(pk)
    claim = k8s.CoreV1Api(cluster.api_client()).read_namespaced_persistent_volume_claim(
        names.home_pvc_name(spec_for(ws)), names.namespace_for(ws.team.slug)
    )
    return str(claim.metadata.uid)


def test_only_the_forgotten_notebook_is_reclaimed_and_it_resumes_with_its_volume(
    org: Org, idle_stack: tuple[SimCluster, Prometheus]
) -> None:
    """And keep-alive: a second forgotten notebook, kept alive once warned, outlives the first; a second
    keep-alive is refused (one per run)."""
    cluster, _ = idle_stack
    idle = request(org, "forgotten", MIG, "none")
    kept = request(org, "kept", MIG, "none")
    preprocessing = request(org, "preprocessing", "a100-sxm4-80gb-2g-20gb", "cpu-preprocessing")
    background = request(org, "background", WHOLE, "gpu-background")
    job = request(org, "stuck-job", WHOLE, "none", kind="job")
    everyone = (idle, kept, preprocessing, background, job)
    wait_for(lambda: all(workspace(pk).state == "running" for pk in everyone), timeout=60, what="all five running")
    volume = home_claim_uid(cluster, idle)

    wait_for(lambda: workspace(kept).idle_warned_at, timeout=90, what="the idle warning")
    api = api_client_for(org.member)
    response = api.post(f"/api/v1/workspaces/{kept}/keep-alive/")
    assert response.status_code == 202, response.json()
    refused = api.post(f"/api/v1/workspaces/{kept}/keep-alive/")
    assert refused.status_code == 400 and "allows 1 keep-alive per run" in str(refused.json())
    assert workspace(kept).keep_alives_used == 1

    reclaimed = wait_for(lambda: workspace(idle).state == "reclaimed" or None, timeout=90, what="the reclaim")
    assert reclaimed
    warning, reclaim = idle_events(idle)[-2:]
    assert warning.reason.startswith("Idle warning.") and warning.details["event"] == "idle_warning"
    assert reclaim.to_state == "reclaimed" and "Home volume kept" in reclaim.reason
    # The grace period was given (the events are written a moment after the pass that decided them).
    assert (reclaim.at - warning.at).total_seconds() >= GRACE_S - 0.5
    assert "GPU activity at most" in warning.reason and "no kernel busy" in warning.reason

    # The training job with idle GPUs was flagged, never stopped; by now its window has passed too.
    flagged = wait_for(lambda: workspace(job).flagged_stuck_at, timeout=30, what="the job flagged")
    assert flagged and workspace(job).state == "running"
    assert any(e.details.get("event") == "possibly_stuck" for e in idle_events(job))
    # A busy kernel on an idle GPU, and a busy GPU without a browser: active, never even warned.
    for pk in (preprocessing, background):
        assert workspace(pk).state == "running" and workspace(pk).idle_warned_at is None
        assert not [e for e in idle_events(pk) if e.details.get("event") == "idle_warning"]

    # Kept alive for an (accelerated) hour, 60 s: the warning lifted, still running after the other's reclaim.
    wait_for(lambda: workspace(kept).idle_warned_at is None or None, timeout=10, what="the warning lifted")
    assert "Kept alive by its owner" in idle_events(kept)[-1].reason
    assert workspace(kept).state == "running"

    # Resumed, it gets its home volume back: the same claim, never deleted in between.
    response = api_client_for(org.member).post(f"/api/v1/workspaces/{idle}/resume/")
    assert response.status_code == 202, response.json()
    wait_for(lambda: workspace(idle).state == "running" or None, timeout=60, what="the resume")
    assert home_claim_uid(cluster, idle) == volume
    resumed = workspace(idle)
    assert resumed.idle_warned_at is None and resumed.keep_alives_used == 0


def test_prometheus_stopped_midway_reclaims_nothing_and_the_page_says_stale(
    org: Org, idle_stack: tuple[SimCluster, Prometheus], tmp_path: Path
) -> None:
    _, server = idle_stack
    pk = request(org, "unwatched", MIG, "none")
    wait_for(lambda: workspace(pk).state == "running" or None, timeout=60, what="running")
    wait_for(lambda: workspace(pk).samples.filter(source="prometheus").exists() or None, timeout=20, what="samples")
    server.stop()
    # Long enough for the idle window and the grace period to pass, with a margin of a few collections.
    time.sleep(WINDOW_S + GRACE_S + 6)
    assert workspace(pk).state == "running"
    assert not WorkspaceEvent.objects.filter(workspace_id=pk, to_state="reclaimed").exists()
    latest = workspace(pk).samples.latest("at")
    assert latest.gpu_active is None and latest.source == "none"  # missing, never zero
    page = Client()
    page.force_login(org.member)
    html = page.get(f"/workspaces/{pk}/").content.decode()
    assert 'id="stale-telemetry"' in html and "GPU telemetry is stale or missing" in html
