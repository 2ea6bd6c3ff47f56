"""Catalogue writes are validated as strictly as requests, by the models themselves (API, admin and database)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from scheduling.demo import IMAGES
from tests import catalogue
from tests.conftest import Org, api_client_for
from workspaces.models import GpuOffering, Image, Workspace

WHOLE: dict[str, Any] = {
    "slug": "h100-new",
    "display_name": "H100 (new)",
    "kind": "whole",
    "gpu_model": "H100-80GB-HBM3",
    "resource_name": "nvidia.com/gpu",
    "gpu_equivalents": "1.0000",
    "allowed_counts": [1, 2, 4, 8],
}
CPU: dict[str, Any] = {"slug": "cpu-new", "display_name": "CPU only", "kind": "cpu", "allowed_counts": [0]}
IMAGE: dict[str, Any] = {"slug": "torch-new", "display_name": "Torch", "kind": "job"}


def _post(org: Org, path: str, body: dict[str, Any]) -> Any:
    return api_client_for(org.operator).post(path, body, format="json")


def _use(org: Org, offering: GpuOffering, image: str = "nvcr.io/nvidia/pytorch:25.05-py3") -> Workspace:
    return Workspace.objects.create(
        name="ws", kind="job", team=org.alpha, owner=org.member, offering=offering, gpu_count=1, image=image,
        command=["python"], cpu_millis=1000, memory_mib=1024, max_runtime_seconds=3600,
        gpu_equivalents=offering.gpu_equivalents,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"gpu_equivalents": "-8"}, "gpu_equivalents"),
        ({"gpu_equivalents": "0"}, "gpu_equivalents"),
        ({"gpu_equivalents": "2"}, "gpu_equivalents"),
        ({"allowed_counts": [-1]}, "allowed_counts"),
        ({"allowed_counts": [0, 1]}, "allowed_counts"),
        ({"allowed_counts": []}, "allowed_counts"),
        ({"allowed_counts": [1, 1]}, "allowed_counts"),
        ({"allowed_counts": ["1"]}, "allowed_counts"),
        ({"allowed_counts": [True]}, "allowed_counts"),
        ({"allowed_counts": [16]}, "allowed_counts"),
        ({"allowed_counts": {"a": 1}}, "allowed_counts"),
        ({"replicas": 0}, "replicas"),
        ({"cpu_millis_default": 0}, "cpu_millis_default"),
        ({"cpu_millis_default": 64000}, "cpu_millis_default"),
        ({"memory_mib_default": 10**6}, "memory_mib_default"),
        ({"display_name": "H100\x1b[31m"}, "display_name"),
        ({"resource_name": "nvidia.com/g\tpu"}, "resource_name"),
        ({"resource_name": "gpu"}, "resource_name"),
    ],
)
def test_a_gpu_offering_with_impossible_values_is_refused(org: Org, changes: dict[str, Any], field: str) -> None:
    response = _post(org, "/api/v1/offerings/", WHOLE | changes)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert field in body["errors"], body
    assert not GpuOffering.objects.filter(slug=WHOLE["slug"]).exists()


def test_a_cpu_offering_weighs_nothing(org: Org) -> None:
    response = _post(org, "/api/v1/offerings/", CPU | {"gpu_equivalents": "0.5"})
    assert response.status_code == 400
    assert "0 GPU-equivalents" in response.json()["errors"]["gpu_equivalents"][0]
    assert _post(org, "/api/v1/offerings/", CPU | {"allowed_counts": [2]}).status_code == 400
    assert _post(org, "/api/v1/offerings/", CPU).status_code == 201


def test_sound_offerings_are_accepted(org: Org) -> None:
    response = _post(org, "/api/v1/offerings/", WHOLE)
    assert response.status_code == 201, response.content
    mig = WHOLE | {"slug": "mig", "kind": "mig", "gpu_equivalents": "0.1429", "allowed_counts": [1]}
    assert _post(org, "/api/v1/offerings/", mig).status_code == 201


def test_every_discovered_offering_and_demo_image_is_valid(org: Org) -> None:
    for offering in catalogue.install_offerings().values():
        offering.full_clean()
    for slug, name, reference, kind in IMAGES:
        Image(slug=slug, display_name=name, reference=reference, kind=kind).full_clean()


def test_the_model_refuses_what_the_api_refuses(org: Org) -> None:
    # The admin saves through full_clean; scripts and the ORM hit the database's constraints.
    offering = GpuOffering(**(WHOLE | {"gpu_equivalents": Decimal(-8)}))
    with pytest.raises(ValidationError) as raised:
        offering.full_clean()
    assert "gpu_equivalents" in raised.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuOffering.objects.create(**(WHOLE | {"gpu_equivalents": Decimal(-8)}))
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuOffering.objects.create(**(CPU | {"gpu_equivalents": Decimal(1)}))
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuOffering.objects.create(**(WHOLE | {"replicas": 0}))


@pytest.mark.parametrize(
    "reference",
    [
        "nvcr.io/nvidia/\npytorch:25.05-py3",
        "nvcr.io/nvidia/py\x1btorch:25.05",
        "nvcr.io/nvidia/pytorch:25.05\x7f",
        "nvcr.io/nvidia/pytorch :25.05",
        "nvcr.io/NVIDIA/pytorch:25.05",
        "nvcr.io/nvidia/pytorch",
        "nvcr.io/nvidia/pytorch:",
        "nvcr.io//pytorch:1",
        "nvcr.io/nvidia/pytörch:1",
        "nvcr.io/nvidia/pytorch@sha256:xyz",
        "-bad.io/x:1",
    ],
)
def test_an_image_reference_outside_the_oci_grammar_is_refused(org: Org, reference: str) -> None:
    response = _post(org, "/api/v1/images/", IMAGE | {"reference": reference})
    assert response.status_code == 400, response.content
    assert "reference" in response.json()["errors"]
    assert not Image.objects.filter(slug=IMAGE["slug"]).exists()


def test_the_model_refuses_a_trailing_line_break_the_api_would_trim(org: Org) -> None:
    with pytest.raises(ValidationError) as raised:
        Image(**IMAGE, reference="nvcr.io/nvidia/pytorch:25.05-py3\n").full_clean()
    assert "reference" in raised.value.message_dict


@pytest.mark.parametrize(
    "reference",
    [
        "nvcr.io/nvidia/pytorch:25.05-py3",
        "localhost:5000/team/trainer:v1",
        "python:3.12-slim",
        "quay.io/jupyter/scipy-notebook@sha256:" + "a" * 64,
        "registry.example.org/a/b/c_d__e:1.0@sha256:" + "0" * 64,
    ],
)
def test_oci_references_are_accepted(org: Org, reference: str) -> None:
    response = _post(org, "/api/v1/images/", IMAGE | {"reference": reference})
    assert response.status_code == 201, response.content


def test_the_slug_of_an_offering_in_use_cannot_change(org: Org) -> None:
    offering = catalogue.install_offerings()["h100-80gb-hbm3"]
    _use(org, offering)
    client = api_client_for(org.operator)
    response = client.patch(f"/api/v1/offerings/{offering.slug}/", {"slug": "renamed"}, format="json")
    assert response.status_code == 400, response.content
    assert "used by 1 workspace" in response.json()["errors"]["slug"][0]
    offering.refresh_from_db()
    assert offering.slug == "h100-80gb-hbm3"
    # Everything else about it may still change.
    response = client.patch(f"/api/v1/offerings/{offering.slug}/", {"display_name": "H100 80GB"}, format="json")
    assert response.status_code == 200, response.content
    response = client.patch(f"/api/v1/offerings/{offering.slug}/", {"enabled": False}, format="json")
    assert response.status_code == 200
    assert response.json()["enabled"] is False


def test_the_slug_of_an_unused_offering_can_change(org: Org) -> None:
    offering = catalogue.install_offerings()["h100-80gb-hbm3"]
    response = api_client_for(org.operator).patch(
        f"/api/v1/offerings/{offering.slug}/", {"slug": "renamed"}, format="json"
    )
    assert response.status_code == 200, response.content
    offering.refresh_from_db()
    assert offering.slug == "renamed"


def test_the_slug_of_an_image_in_use_cannot_change(org: Org) -> None:
    offerings = catalogue.install_offerings()
    catalogue.install_images()
    _use(org, offerings["h100-80gb-hbm3"], image=Image.objects.get(slug="pytorch").reference)
    client = api_client_for(org.operator)
    response = client.patch("/api/v1/images/pytorch/", {"slug": "torch"}, format="json")
    assert response.status_code == 400, response.content
    assert "used by 1 workspace" in response.json()["errors"]["slug"][0]
    assert Image.objects.filter(slug="pytorch").exists()
    assert client.patch("/api/v1/images/scipy/", {"slug": "scipy-nb"}, format="json").status_code == 200
