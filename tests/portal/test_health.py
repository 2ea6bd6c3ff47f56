from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from scheduling.kube.client import reset_client
from scheduling.simcluster.testing import SimCluster, running_simcluster


def test_it_answers_healthz_without_touching_dependencies() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_it_reports_each_dependency_in_readyz(settings) -> None:
    settings.KUBECONFIG = ""
    reset_client()
    response = Client().get("/readyz")
    body = response.json()
    assert set(body["checks"]) == {"database", "broker", "kubernetes"}
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True
    assert body["checks"]["kubernetes"] == {
        "ok": False,
        "error": "KubeNotConfigured: No Kubernetes cluster configured: set KUBECONFIG or KUBE_IN_CLUSTER=true.",
    }
    assert response.status_code == 503
    assert body["status"] == "not ready"
    assert body["failed"] == ["kubernetes"]


@pytest.fixture
def cluster(settings, tmp_path) -> Iterator[SimCluster]:
    with running_simcluster(tmp_dir=tmp_path) as sim:
        settings.KUBECONFIG = str(sim.kubeconfig_path)
        reset_client()
        yield sim
    reset_client()


@pytest.mark.django_db
def test_readyz_names_kubernetes_through_an_outage_of_every_path_and_recovers(cluster: SimCluster) -> None:
    assert Client().get("/readyz").status_code == 200
    cluster.inject_fault(status=503, duration_s=60, message="apiserver is shutting down")

    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["failed"] == ["kubernetes"]
    assert "apiserver is shutting down" in body["checks"]["kubernetes"]["error"]

    cluster.advance_clock(61)
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json()["failed"] == []


@pytest.mark.django_db
def test_readyz_fails_when_the_api_answers_version_but_not_reads(cluster: SimCluster) -> None:
    cluster.inject_fault(verb="list", resource="pods", status=503, duration_s=60, message="etcd unavailable")

    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["kubernetes"]
