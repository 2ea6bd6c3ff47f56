"""A notebook's own account of its use: Jupyter's status and kernels read as one activity record, through
the API server's service proxy (the official client over HTTP against the simulated cluster)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from kubernetes import client

from scheduling.kube.calls import Kube, PermanentKubeError
from scheduling.simcluster.testing import SimCluster, running_simcluster
from scheduling.telemetry.jupyter import (
    KERNELS_PATH,
    KERNELS_QUERY,
    STATUS_PATH,
    NotebookActivity,
    NotJupyter,
    notebook_activity,
)
from tests.simcluster.conftest import pod_manifest, wait_for, wait_for_phase

NAMESPACE = "team-notebooks"
TOKEN = "9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a"
STATUS = json.dumps({"started": "2026-12-01T08:00:00Z", "last_activity": "2026-12-01T09:00:00Z", "kernels": 2})


def kernel(state: str, last: str = "2026-12-01T09:30:00.123Z", connections: int = 0) -> dict[str, object]:
    return {"id": "k", "name": "python3", "execution_state": state, "last_activity": last, "connections": connections}


def test_only_idle_and_dead_kernels_rest() -> None:
    states = ["idle", "dead", "busy", "starting", "restarting", "autorestarting"]
    activity = notebook_activity(STATUS, json.dumps([kernel(s, connections=1) for s in states]))
    assert activity == NotebookActivity(
        kernels=6, busy_kernels=4, connections=6, last_activity=datetime(2026, 12, 1, 9, 30, 0, 123000, tzinfo=UTC)
    )


def test_the_servers_last_activity_counts_when_no_kernel_is_newer() -> None:
    activity = notebook_activity(STATUS, json.dumps([kernel("idle", last="2026-12-01T08:30:00Z")]))
    assert activity.last_activity == datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert activity.busy_kernels == 0
    assert notebook_activity(STATUS, "[]").kernels == 0


@pytest.mark.parametrize(
    ("status", "kernels"),
    [
        ("<html>login</html>", "[]"),
        (STATUS, '{"message": "Forbidden"}'),
        (json.dumps({"last_activity": "2026-12-01T09:00:00"}), "[]"),  # no zone: cannot be compared
        (json.dumps({"last_activity": None}), "[]"),
        (STATUS, json.dumps(["k"])),
    ],
)
def test_answers_that_are_not_jupyters_are_refused(status: str, kernels: str) -> None:
    with pytest.raises(NotJupyter):
        notebook_activity(status, kernels)


# -- through the service proxy, against the simulated cluster's Jupyter ------------------------------------


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with running_simcluster(seed=3, speed=20.0, tmp_dir=tmp_path_factory.mktemp("jupyter")) as sim:
        api = sim.api_client()
        v1 = client.CoreV1Api(api)
        v1.create_namespace({"metadata": {"name": NAMESPACE}})
        v1.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "tok"}, "stringData": {"token": TOKEN}})
        for name, profile in [("trainer", "steady-training"), ("empty", "none")]:
            _notebook(v1, sim, name, profile)
        yield Kube(api, timeout=5)
        api.close()


def _notebook(v1: client.CoreV1Api, sim: SimCluster, name: str, profile: str) -> None:
    body = pod_manifest(name, limits={"nvidia.com/gpu": 1})
    container = body["spec"]["containers"][0]
    container["image"] = "quay.io/jupyter/scipy-notebook:2025-06-02"
    container["env"] = [{"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "token"}}}]
    # As the portal starts notebooks: under a base URL (the proxy path itself when there is no Ingress).
    container["args"] = ["start-notebook.py", f"--ServerApp.base_url={base_url(name)}"]
    body["metadata"] |= {"labels": {"app": name}, "annotations": {"sim.gpuportal.io/workload-profile": profile}}
    v1.create_namespaced_pod(NAMESPACE, body)
    service = {"metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"port": 8888}]}}
    v1.create_namespaced_service(NAMESPACE, service)
    wait_for_phase(v1, NAMESPACE, name, "Running")


def base_url(name: str) -> str:
    return f"/api/v1/namespaces/{NAMESPACE}/services/{name}:8888/proxy/"


def read(kube: Kube, name: str, token: str = TOKEN) -> NotebookActivity:
    def get(path: str, query: dict[str, str]) -> bytes:
        return kube.service_proxy_get(NAMESPACE, name, 8888, base_url(name) + path, query | {"token": token})

    return notebook_activity(get(STATUS_PATH, {}), get(KERNELS_PATH, KERNELS_QUERY))


def test_a_training_notebook_has_a_busy_kernel_and_a_browser(kube: Kube) -> None:
    def started() -> NotebookActivity | None:
        activity = read(kube, "trainer")
        return activity if activity.kernels else None

    activity = wait_for(started, what="the kernel to start")
    assert (activity.busy_kernels, activity.connections) == (1, 1)


def test_a_server_without_kernels_is_read_as_such(kube: Kube) -> None:
    activity = read(kube, "empty")
    assert (activity.kernels, activity.busy_kernels, activity.connections) == (0, 0, 0)


def test_polling_does_not_count_as_activity(kube: Kube) -> None:
    first = read(kube, "empty")
    assert read(kube, "empty").last_activity == first.last_activity  # the server start, still


def test_a_wrong_token_is_refused_not_read_as_idle(kube: Kube) -> None:
    with pytest.raises(PermanentKubeError) as refused:
        read(kube, "empty", token="wrong")
    assert refused.value.status == 403
