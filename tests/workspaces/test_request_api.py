"""Requesting workspaces through the API: good requests queue, bad ones get a clear 400 and create nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from workspaces.models import Workspace, WorkspaceEvent


@pytest.fixture
def catalogue(org: Org) -> None:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 8)
    set_quota(org.alpha, "A100-SXM4-80GB", 2)


def notebook(**overrides: Any) -> dict[str, Any]:
    return {
        "kind": "notebook",
        "name": "seg-tests",
        "team": "alpha",
        "offering": "a100-sxm4-80gb-1g-10gb",
        "image": "scipy",
    } | overrides


def test_it_queues_a_valid_notebook_request(org: Org, catalogue: None, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = api_client_for(org.member).post("/api/v1/workspaces/", notebook(), format="json")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["state"] == "queued"
    assert body["offering"] == "a100-sxm4-80gb-1g-10gb"
    workspace = Workspace.objects.get(pk=body["id"])
    assert workspace.image == "quay.io/jupyter/scipy-notebook:2025-06-02"
    assert str(workspace.gpu_equivalents) == "0.1429"
    assert workspace.max_runtime_seconds == 8 * 3600
    assert WorkspaceEvent.objects.filter(workspace=workspace, reason__startswith="Requested by alice").exists()
    assert len(callbacks) == 1  # the scheduling cycle is enqueued after commit


def test_it_queues_a_two_worker_training_job(org: Org, catalogue: None) -> None:
    payload = {
        "kind": "job",
        "name": "train-vit",
        "team": "alpha",
        "offering": "h100-80gb-hbm3",
        "gpu_count": 2,
        "workers": 2,
        "image": "pytorch",
        "command": ["python", "train.py"],
        "env": {"EPOCHS": "3"},
    }
    response = api_client_for(org.member).post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    assert Workspace.objects.get().gpu_equivalents == 4


BAD_REQUESTS = [
    ({"offering": "no-such-gpu"}, "offering: There is no GPU offering called 'no-such-gpu'."),
    (
        {"offering": "h100-80gb-hbm3", "gpu_count": 0},
        "gpu_count: NVIDIA H100 80GB HBM3 (whole GPU) comes in counts of 1, 2, 4, 8 per pod.",
    ),
    (
        {"offering": "h100-80gb-hbm3", "gpu_count": 3},
        "gpu_count: NVIDIA H100 80GB HBM3 (whole GPU) comes in counts of 1, 2, 4, 8 per pod.",
    ),
    ({"name": "x" * 500}, "name: Ensure this field has no more than 40 characters."),
    (
        {"name": "Bad Name!"},
        "name: Use lower-case letters, digits and hyphens, starting and ending with a letter or digit.",
    ),
    (
        {"image": "docker.io/evil/miner:latest"},
        "image: Images from docker.io are not allowed; ask an operator to allow the registry.",
    ),
    ({"image": "nosuch"}, "image: There is no notebook image called 'nosuch' in the catalogue."),
    (
        {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}},
        "env: NVIDIA_VISIBLE_DEVICES is set by the portal or the GPU runtime and cannot be chosen.",
    ),
    (
        {"env": {"CUDA_VISIBLE_DEVICES": "0,1"}},
        "env: CUDA_VISIBLE_DEVICES is set by the portal or the GPU runtime and cannot be chosen.",
    ),
    (
        {"env": {"RANK": "3"}},  # the job builder sets it; refused at request time, not at provisioning
        "env: RANK is set by the portal or the GPU runtime and cannot be chosen.",
    ),
    (
        {"env": {"1BAD": "x"}},
        "env: '1BAD' is not a valid variable name (letters, digits and _; not starting with a digit).",
    ),
    ({"team": "beta"}, "team: You are not a member of a team called 'beta'."),
    ({"max_runtime_hours": 1000}, "max_runtime_hours: Alpha allows at most 72 hours."),
    (
        {"command": ["python", "x.py"]},
        "command: Notebooks run the image's Jupyter server; a command is only for training jobs.",
    ),
    (
        {
            "offering": "h100-80gb-hbm3",
            "gpu_count": 8,
            "team": "alpha",
            "kind": "job",
            "workers": 2,
            "image": "pytorch",
            "command": ["train"],
        },
        "gpu_count: Alpha may use at most 8 GPU-equivalents of H100-80GB-HBM3 for this kind of workspace; "
        "this request needs 16, so it could never start.",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_REQUESTS)
def test_it_rejects_bad_requests_with_a_clear_message(
    org: Org, catalogue: None, overrides: dict[str, Any], message: str
) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", notebook(**overrides), format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == message
    assert not Workspace.objects.exists()


def test_it_rejects_bad_requests_on_the_page_too(org: Org, catalogue: None) -> None:
    client = Client()
    client.force_login(org.member)
    response = client.post("/workspaces/new/", notebook(gpu_count="3", offering="h100-80gb-hbm3"))
    assert response.status_code == 400
    assert b"comes in counts of 1, 2, 4, 8 per pod." in response.content
    assert not Workspace.objects.exists()


@pytest.fixture
def betas_workspace(org: Org, catalogue: None) -> Workspace:
    response = api_client_for(org.beta_lead).post(
        "/api/v1/workspaces/", notebook(team="beta", offering="cpu"), format="json"
    )
    assert response.status_code == 202, response.json()
    return Workspace.objects.get(pk=response.json()["id"])


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", ""),
        ("post", "stop/"),
        ("post", "resume/"),
        ("post", "extend/"),
        ("delete", ""),
        ("get", "logs/"),
        ("get", "cluster-events/"),
    ],
)
def test_it_hides_other_teams_workspaces_from_the_api(
    org: Org, betas_workspace: Workspace, method: str, path: str
) -> None:
    client = api_client_for(org.member)
    response = getattr(client, method)(f"/api/v1/workspaces/{betas_workspace.pk}/{path}", {"hours": 1}, format="json")
    assert response.status_code == 404
    betas_workspace.refresh_from_db()
    assert betas_workspace.state == "queued"
    assert client.get("/api/v1/workspaces/").json()["count"] == 0


@pytest.mark.parametrize("path", ["", "stop/", "resume/", "delete/", "extend/"])
def test_it_hides_other_teams_workspaces_from_the_pages(org: Org, betas_workspace: Workspace, path: str) -> None:
    client = Client()
    client.force_login(org.member)
    method = client.get if path == "" else client.post
    assert method(f"/workspaces/{betas_workspace.pk}/{path}").status_code == 404
    betas_workspace.refresh_from_db()
    assert betas_workspace.state == "queued"


def test_it_lets_teammates_look_but_not_touch(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", notebook(offering="cpu"), format="json")
    workspace_id = response.json()["id"]
    lead_is_teammate = api_client_for(org.lead)
    assert lead_is_teammate.get(f"/api/v1/workspaces/{workspace_id}/").status_code == 200
    outsider_finance = api_client_for(org.finance)
    assert outsider_finance.get(f"/api/v1/workspaces/{workspace_id}/").status_code == 200
    assert outsider_finance.post(f"/api/v1/workspaces/{workspace_id}/stop/").status_code == 403
    assert Workspace.objects.get(pk=workspace_id).state == "queued"
    assert lead_is_teammate.post(f"/api/v1/workspaces/{workspace_id}/stop/").status_code == 202
    assert Workspace.objects.get(pk=workspace_id).state == "cancelled"


@pytest.mark.parametrize(("path", "key"), [("logs/", "lines"), ("cluster-events/", "events")])
def test_logs_and_events_say_when_no_cluster_is_configured(
    org: Org, betas_workspace: Workspace, settings: Any, path: str, key: str
) -> None:
    from scheduling.kube.client import reset_client

    settings.KUBECONFIG, settings.KUBE_IN_CLUSTER = "", False
    reset_client()
    response = api_client_for(org.beta_lead).get(f"/api/v1/workspaces/{betas_workspace.pk}/{path}")
    reset_client()
    assert response.status_code == 200, response.content
    assert "No Kubernetes cluster configured" in str(response.json()[key])
