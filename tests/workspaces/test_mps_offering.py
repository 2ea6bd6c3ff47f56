"""An MPS share in the catalogue: proposed by discovery with its per-workspace memory cap, shown with that cap
on the request form and in the API, refused when its shape is not one the device plugin can serve, and its
pods carry the simulated workload's GPU memory for the simulated cluster to hold against the cap."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from scheduling.demand import SIM_GPU_MEMORY_ENV, spec_for
from scheduling.discovery import propose_offerings
from scheduling.kube import manifests
from scheduling.kube.keys import SIM_GPU_MEMORY_ANNOTATION
from tests.catalogue import install_images, set_quota
from tests.conftest import Org, api_client_for
from tests.factories import make_workspace
from tests.mps_cluster import CAP_MIB, mps_nodes
from workspaces.models import GpuOffering

CAP_TEXT = "GPU memory cap: 10 GiB per workspace"


@pytest.fixture
def share(org: Org) -> GpuOffering:
    proposal = next(p for p in propose_offerings(mps_nodes()) if p.kind == GpuOffering.Kind.MPS)
    fields = asdict(proposal)
    fields.pop("nodes")
    offering = GpuOffering(**fields)
    offering.full_clean()
    offering.save()
    install_images()
    set_quota(org.alpha, offering.gpu_model, 1)
    return offering


def test_it_shows_the_cap_on_the_request_form(org: Org, share: GpuOffering) -> None:
    client = Client()
    client.force_login(org.member)
    page = client.get("/workspaces/new/").content.decode()
    assert CAP_TEXT in page
    assert "share one fault domain" in page
    assert share.get_kind_display() == "Shared GPU (MPS, memory-capped)"


def test_it_shows_the_cap_in_the_api(org: Org, share: GpuOffering) -> None:
    listed = api_client_for(org.member).get("/api/v1/offerings/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    row = next(r for r in rows if r["slug"] == share.slug)
    assert (row["kind"], row["memory_cap_mib"], row["active_thread_percentage"]) == ("mps", CAP_MIB, 25)
    assert (row["memory_cap_note"], row["gpu_equivalents"]) == (CAP_TEXT, "0.2500")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"memory_cap_mib": None}, "memory_cap_mib"),
        ({"active_thread_percentage": None}, "active_thread_percentage"),
        ({"replicas": 1}, "replicas"),
        ({"allowed_counts": [1, 2]}, "allowed_counts"),
    ],
)
def test_it_refuses_an_mps_share_the_device_plugin_cannot_serve(
    share: GpuOffering, changes: dict[str, Any], field: str
) -> None:
    for name, value in changes.items():
        setattr(share, name, value)
    with pytest.raises(ValidationError) as refused:
        share.full_clean()
    assert field in refused.value.message_dict


def test_only_mps_shares_carry_a_cap(share: GpuOffering) -> None:
    share.kind = GpuOffering.Kind.SHARED
    with pytest.raises(ValidationError) as refused:
        share.full_clean()
    assert {"memory_cap_mib", "active_thread_percentage"} <= set(refused.value.message_dict)


def test_its_pod_asks_for_one_replica_and_carries_the_simulated_memory(org: Org, share: GpuOffering) -> None:
    workspace = make_workspace(org.alpha, org.member, share, env={SIM_GPU_MEMORY_ENV: "12288"})
    spec = spec_for(workspace)
    assert spec.gpu is not None and spec.gpu.sharing == "mps"
    pod = manifests.make_notebook_pod(spec, base_url="/")
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert pod.metadata.annotations[SIM_GPU_MEMORY_ANNOTATION] == "12288"
    not_a_number = make_workspace(org.alpha, org.member, share, env={SIM_GPU_MEMORY_ENV: "12 GiB"})
    assert spec_for(not_a_number).simulated_gpu_memory_mib is None
