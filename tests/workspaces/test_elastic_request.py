"""Elastic training jobs (issue 18, part 4): the request, its manifest, how its state is read, and its page."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from kubernetes.client import ApiClient

from scheduling.demand import spec_for
from scheduling.kube.manifests import make_training_job, mounts_home, needs_headless_service
from scheduling.loops.observe import observe_job
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.kube import make_spec
from workspaces.models import ELASTIC_SIZE_EVENT, SHRINK_NOTICE_EVENT, Workspace
from workspaces.transitions import note, transition


@pytest.fixture
def catalogue(org: Org) -> None:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 8)


def job(**overrides: Any) -> dict[str, Any]:
    payload = {"kind": "job", "name": "elastic", "team": "alpha", "offering": "h100-80gb-hbm3", "gpu_count": 1,
               "workers": 8, "min_workers": 2, "image": "pytorch", "command": ["torchrun", "train.py"]}  # fmt: skip
    return payload | overrides


def test_it_queues_an_elastic_job_at_its_minimum(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(), format="json")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["workers"], body["min_workers"], body["max_workers"]) == (2, 2, 8)
    workspace = Workspace.objects.get(pk=body["id"])
    assert workspace.gpu_equivalents == 2  # the quota it asks for is its minimum's
    assert workspace.gpu_equivalents_for(8) == 8


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"min_workers": 9}, "min_workers", "Between 1 and the most workers (8)."),
        ({"min_workers": 0}, "min_workers", "Ensure this value is greater than or equal to 1."),
        ({"offering": "a100-sxm4-80gb-1g-10gb"}, "min_workers", "Elastic jobs run on whole GPUs."),
        (
            {"kind": "notebook", "workers": 1, "min_workers": 1, "command": [], "image": "scipy"},
            "min_workers",
            "Only training jobs are elastic.",
        ),
    ],
)
def test_it_refuses_a_bad_elastic_request(
    org: Org, catalogue: None, overrides: dict[str, Any], field: str, message: str
) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(**overrides), format="json")
    assert response.status_code == 400, response.json()
    assert message in str(response.json()["errors"][field])
    assert not Workspace.objects.exists()


def test_the_database_refuses_a_size_outside_the_range(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(), format="json")
    workspace = Workspace.objects.get(pk=response.json()["id"])
    with pytest.raises(IntegrityError), transaction.atomic():
        Workspace.objects.filter(pk=workspace.pk).update(workers=9)
    with pytest.raises(IntegrityError), transaction.atomic():
        Workspace.objects.filter(pk=workspace.pk).update(workers=1)


def test_the_page_form_requests_an_elastic_job(org: Org, catalogue: None) -> None:
    browser = Client()
    browser.force_login(org.member)
    form = {"kind": "job", "name": "elastic", "team": "alpha", "offering": "h100-80gb-hbm3", "gpu_count": "1",
            "workers": "4", "min_workers": "1", "image": "pytorch", "command": "torchrun train.py"}  # fmt: skip
    response = browser.post("/workspaces/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    workspace = Workspace.objects.get()
    assert (workspace.workers, workspace.min_workers, workspace.max_workers) == (1, 1, 4)


def test_the_job_page_shows_its_size_over_time(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(), format="json")
    workspace = Workspace.objects.get(pk=response.json()["id"])
    transition(workspace, Workspace.State.ADMITTED, "Admitted.", source="scheduler")
    note(workspace, "Grew to 8 of at most 8 workers.", details={"event": ELASTIC_SIZE_EVENT, "workers": 8})
    note(workspace, "Will shrink to 2 workers at 10:00:00 UTC.", details={"event": SHRINK_NOTICE_EVENT, "workers": 2})
    assert [size for _, size, _ in workspace.size_history()] == [2, 8, 2]
    browser = Client()
    browser.force_login(org.member)
    page = browser.get(f"/workspaces/{workspace.pk}/").content.decode()
    assert 'id="size-history"' in page
    assert "Grew to 8 of at most 8 workers." in page
    assert "elastic, 2 to 8" in page


def test_a_fixed_size_job_has_no_size_history(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(min_workers=None), format="json")
    workspace = Workspace.objects.get(pk=response.json()["id"])
    assert (workspace.workers, workspace.min_workers, workspace.max_workers) == (8, None, None)
    assert workspace.size_history() == []


def test_its_manifest_asks_torchrun_for_min_to_max_nodes(org: Org, catalogue: None) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(min_workers=1, workers=4), format="json")
    spec = spec_for(Workspace.objects.get(pk=response.json()["id"]))
    assert spec.elastic == (1, 4) and spec.workers == 1
    # One worker now, up to four later: the service for worker 0's name is there from the start, and no
    # RWO home volume (workers may land on several nodes).
    assert needs_headless_service(spec) and not mounts_home(spec)
    body = ApiClient().sanitize_for_serialization(make_training_job(spec))
    assert body["spec"]["completions"] == body["spec"]["parallelism"] == 1
    env = {e["name"]: e.get("value") for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    base = body["metadata"]["name"]
    assert env["PET_NNODES"] == "1:4"
    assert env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_RDZV_ENDPOINT"] == f"{base}-0.{base}:29500"
    assert "WORLD_SIZE" not in env and "RANK" in env


def test_a_fixed_job_keeps_its_world_size() -> None:
    body = ApiClient().sanitize_for_serialization(make_training_job(make_spec(kind="job", workers=2)))
    env = {e["name"] for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "WORLD_SIZE" in env and not any(name.startswith("PET_") for name in env)


def _pod(ready: bool) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running" if ready else "Pending", "conditions": [condition]},
    }


def test_an_elastic_job_runs_once_its_minimum_is_ready() -> None:
    job_object: dict[str, Any] = {"status": {}}
    growing = observe_job(job_object, [_pod(True), _pod(True), _pod(False)], 3, minimum=2)
    assert growing.state == Workspace.State.RUNNING
    assert growing.reason.startswith("Running 2 of 3 worker(s) (elastic, at least 2)")
    assert observe_job(job_object, [_pod(True), _pod(False)], 3, minimum=2).state == Workspace.State.PROVISIONING
    assert observe_job(job_object, [_pod(True), _pod(True), _pod(False)], 3).state == Workspace.State.PROVISIONING
