"""A 2-worker training job through the full stack: real worker, Redis, PostgreSQL, the simulated cluster."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client

from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

# The worker process must see what the test writes: every test commits for real.
pytestmark = pytest.mark.django_db(transaction=True)


def request_job(org: Org, name: str, *, workers: int = 2) -> Workspace:
    """A training job of ``workers`` x 1 H100 asked for through the API by Alpha's member."""
    payload = {
        "kind": "job",
        "name": name,
        "team": "alpha",
        "offering": "h100-80gb-hbm3",
        "gpu_count": 1,
        "workers": workers,
        "image": "pytorch",
        "command": ["python", "train.py"],
    }
    response = api_client_for(org.member).post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    return Workspace.objects.get(pk=response.json()["id"])


def state_of(workspace: Workspace) -> str:
    workspace.refresh_from_db()
    return workspace.state


def _story(workspace: Workspace) -> str:
    """Its moves so far, for a failure message."""
    moves = workspace.events.order_by("pk").values_list("from_state", "to_state", "reason")
    return "; ".join(f"{a}->{b}: {why}" for a, b, why in moves)


def test_it_runs_a_two_worker_job_to_success_with_every_transition(org: Org, stack: SimCluster) -> None:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 8)
    job = request_job(org, "train")
    wait_for(lambda: state_of(job) == "running", what="the job to run")
    pods = client.CoreV1Api(stack.api_client()).list_namespaced_pod(
        "team-alpha", label_selector=f"job-name=ws-{job.pk}-train"
    )
    assert len(pods.items) == 2
    wait_for(lambda: state_of(job) == "succeeded", timeout=20, what="the job to succeed")
    states = list(job.events.exclude(from_state="queued", to_state="queued").values_list("from_state", "to_state"))
    path = [states[0][0]] + [to for _, to in states]
    assert [s for i, s in enumerate(path) if i == 0 or s != path[i - 1]] == [
        "queued",
        "admitted",
        "provisioning",
        "running",
        "succeeded",
    ]


def test_it_provisions_exactly_once_when_the_worker_dies_mid_way(
    org: Org, stack: SimCluster, dedicated_worker: Callable[..., Worker]
) -> None:
    # Its own, so that killing it upsets no other test; the job outlives the test, so that a slow restart
    # cannot let it finish before the worker sees it run.
    worker = dedicated_worker(SIMCLUSTER_JOB_SECONDS="600")
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 8)
    # Job creation hangs long enough for the worker to be killed with the headless service made and the Job not.
    stack.inject_fault(verb="create", resource="jobs", delay_s=4.0, count=1)
    job = request_job(org, "crashy")
    core = client.CoreV1Api(stack.api_client())
    selector = f"gpuportal.io/workspace-id={job.pk}"
    wait_for(lambda: core.list_namespaced_service("team-alpha", label_selector=selector).items, what="the service")
    worker.kill()
    worker.start()
    # The claim is exactly once, not speed: a loaded machine may take a while to boot the worker again.
    try:
        wait_for(lambda: state_of(job) == "running", timeout=60, what="the job to run after the restart")
    except pytest.fail.Exception as timed_out:
        pytest.fail(f"{timed_out}; its moves: {_story(job)}")
    batch = client.BatchV1Api(stack.api_client())
    assert len(batch.list_namespaced_job("team-alpha", label_selector=selector).items) == 1
    assert len(core.list_namespaced_service("team-alpha", label_selector=selector).items) == 1
    assert len(core.list_namespaced_pod("team-alpha", label_selector=selector).items) == 2
