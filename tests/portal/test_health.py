from __future__ import annotations

import pytest
from django.test import Client


def test_it_answers_healthz_without_touching_dependencies() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_it_reports_each_dependency_in_readyz(settings) -> None:
    settings.KUBECONFIG = ""
    from scheduling.kube.client import reset_client

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
