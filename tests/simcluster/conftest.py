"""A simulated cluster per test module, reached only through the official client, kubectl and the
simulator's /_sim/ endpoints; a fresh namespace per test."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.simcluster.testing import SimCluster, running_simcluster

T = TypeVar("T")
SPEED = 10.0  # simulated seconds per real second: a 2 s image pull takes 0.2 s
_counter = itertools.count()


def wait_for(probe: Callable[[], T | None], *, timeout: float = 15.0, interval: float = 0.02, what: str = "") -> T:
    """Poll until probe returns something truthy; fail with `what` after timeout (real seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what or probe}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=7, speed=SPEED, tmp_dir=tmp_path_factory.mktemp("simcluster")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    api_client = sim.api_client()
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def batch(api: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api)


@pytest.fixture
def namespace(v1: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug}-{next(_counter)}"
    v1.create_namespace({"metadata": {"name": name}})
    yield name
    v1.delete_namespace(name)

    def gone() -> bool:
        try:
            v1.read_namespace(name)
        except ApiException as exc:
            return bool(exc.status == 404)
        return False

    wait_for(gone, what=f"namespace {name} to go away")


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pod_manifest(name: str, *, limits: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"}
    if limits:
        container["resources"] = {"limits": limits}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], "restartPolicy": "Never", **spec},
    }
    if limits and any(k.startswith("nvidia.com/") for k in limits):
        body["spec"].setdefault("tolerations", [GPU_TOLERATION])
    return body


def phase_of(v1: client.CoreV1Api, namespace: str, name: str) -> str:
    return str(v1.read_namespaced_pod(name, namespace).status.phase)


def wait_for_phase(v1: client.CoreV1Api, namespace: str, name: str, phase: str, timeout: float = 15.0) -> None:
    wait_for(lambda: phase_of(v1, namespace, name) == phase, timeout=timeout, what=f"pod {name} to be {phase}")
