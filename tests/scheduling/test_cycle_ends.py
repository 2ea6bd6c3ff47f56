"""The scheduling cycle writes the end of a training job whose every worker succeeded, as the cluster shows
it, so that its quota goes to the queue at once rather than when the reconcile pass next lists the cluster;
a job with a worker still running keeps its quota."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduling.kube.calls import Kube
from scheduling.kube.client import kube
from scheduling.loops.cycle import run_cycle
from scheduling.loops.observe import JOB_DONE
from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from tests.scheduling.test_live_capacity import bound_pod
from tests.stack_fixtures import wait_for
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"
NAMESPACE = "cycle-ends"


@pytest.fixture
def h100(org: Org) -> GpuOffering:
    set_quota(org.alpha, H100, 2)
    return install_offerings()["h100-80gb-hbm3"]


@pytest.fixture
def cluster(stack_cluster: SimCluster, cluster_client: None) -> Iterator[Kube]:
    client = kube()
    client.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    yield client
    for pod in client.list("Pod", NAMESPACE, ""):
        client.delete("Pod", NAMESPACE, pod["metadata"]["name"])


def worker_pod(client: Kube, workspace: Workspace, *, runs_for: int | None) -> str:
    """One of ``workspace``'s worker pods on an H100 node; with ``runs_for`` (simulated seconds) it succeeds
    after that long, else it runs until deleted."""
    pod = bound_pod("gpu-h100-0", {"nvidia.com/gpu": "1"}, workspace.pk, runs_for=runs_for, namespace=NAMESPACE)
    client.ensure(pod)
    return str(pod["metadata"]["name"])


def phase(client: Kube, name: str) -> str:
    pod = client.get("Pod", NAMESPACE, name)
    assert pod is not None, f"pod {name} is gone"
    return str(pod["status"].get("phase"))


def job(org: Org, h100: GpuOffering, name: str, workers: int = 1, state: str = "queued") -> Workspace:
    return make_workspace(org, h100, 1, name=name, kind="job", workers=workers, state=state,
                          gpu_equivalents=h100.gpu_equivalents * workers)  # fmt: skip


def test_a_job_whose_workers_all_succeeded_ends_in_the_cycle_and_frees_its_quota(
    org: Org, h100: GpuOffering, cluster: Kube
) -> None:
    done = job(org, h100, "done", workers=2, state="running")
    pods = [worker_pod(cluster, done, runs_for=1) for _ in range(2)]
    wait_for(lambda: all(phase(cluster, pod) == "Succeeded" for pod in pods), what="both workers to succeed")
    following = job(org, h100, "following", workers=2)

    assert run_cycle(cluster) == 1

    done.refresh_from_db()
    assert (done.state, done.reason) == ("succeeded", JOB_DONE)
    assert done.finished_at is not None
    assert done.events.filter(to_state="succeeded", source="scheduler").count() == 1
    following.refresh_from_db()
    assert following.state == "admitted"


def test_a_job_with_a_worker_still_running_keeps_its_quota(org: Org, h100: GpuOffering, cluster: Kube) -> None:
    running = job(org, h100, "running", workers=2, state="running")
    finished = worker_pod(cluster, running, runs_for=1)
    worker_pod(cluster, running, runs_for=None)
    wait_for(lambda: phase(cluster, finished) == "Succeeded", what="one worker to succeed")
    waiting = job(org, h100, "waiting")

    assert run_cycle(cluster) == 0

    running.refresh_from_db()
    assert running.state == "running"
    waiting.refresh_from_db()
    assert waiting.state == "queued"
    assert waiting.reason.startswith("Waiting for team quota: Alpha uses 2 of its 2")
