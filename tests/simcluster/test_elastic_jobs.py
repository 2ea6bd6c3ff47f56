"""Elastic Indexed Jobs (Kubernetes 1.27+) on the simulated cluster, through the portal's own call
(``Kube.scale_job``): parallelism and completions change together; new indexes start, the highest go."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from scheduling.kube.calls import Kube, PermanentKubeError
from tests.simcluster.conftest import wait_for
from tests.simcluster.test_api_controllers import _job

# The client itself calls the deprecated urllib3 getheaders() when it builds an ApiException.
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheaders:DeprecationWarning")


def _indexes(v1: client.CoreV1Api, namespace: str, job: str, *, running: bool = False) -> list[int]:
    pods = v1.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={job}").items
    return sorted(
        int(p.metadata.labels["batch.kubernetes.io/job-completion-index"])
        for p in pods
        if p.metadata.deletion_timestamp is None and (not running or p.status.phase == "Running")
    )


@pytest.fixture
def kube(api: client.ApiClient) -> Kube:
    return Kube(api, timeout=10.0)


def test_it_grows_and_shrinks_an_indexed_job(v1: Any, batch: Any, namespace: str, kube: Kube) -> None:
    batch.create_namespaced_job(namespace, _job("el", completionMode="Indexed", completions=2, parallelism=2))
    wait_for(lambda: _indexes(v1, namespace, "el", running=True) == [0, 1], what="two workers running")

    job = kube.scale_job(namespace, "el", 4)
    assert job is not None and job["spec"]["parallelism"] == job["spec"]["completions"] == 4
    wait_for(lambda: _indexes(v1, namespace, "el", running=True) == [0, 1, 2, 3], what="four workers running")

    kube.scale_job(namespace, "el", 1)
    wait_for(lambda: _indexes(v1, namespace, "el") == [0], what="the highest indexes to go")
    status = batch.read_namespaced_job("el", namespace).status
    assert not status.failed  # scaled away, not failed
    assert not [c for c in status.conditions or [] if c.type in ("Failed", "Complete")]


def test_completions_of_any_other_job_are_immutable(batch: Any, namespace: str, kube: Kube) -> None:
    batch.create_namespaced_job(namespace, _job("fixed", completions=2, parallelism=2))
    with pytest.raises(PermanentKubeError) as raised:
        kube.scale_job(namespace, "fixed", 3)
    assert raised.value.status == 422
    assert "spec.completions" in str(raised.value) and "field is immutable" in str(raised.value)
    # An Indexed Job may not part completions from parallelism either.
    batch.create_namespaced_job(namespace, _job("idx", completionMode="Indexed", completions=2, parallelism=2))
    with pytest.raises(ApiException) as refused:
        batch.patch_namespaced_job("idx", namespace, {"spec": {"completions": 3}})
    assert refused.value.status == 422


def test_scaling_a_job_that_is_gone_answers_none(namespace: str, kube: Kube) -> None:
    assert kube.scale_job(namespace, "nothing-here", 3) is None
