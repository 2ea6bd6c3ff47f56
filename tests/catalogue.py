"""The demo cluster's offerings, images and quotas as test data: proposed from real node objects."""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal
from typing import Any

from portal.models import Team
from scheduling.discovery import propose_offerings
from scheduling.models import TeamQuota
from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import default_cluster_file, load_cluster_file
from workspaces.models import AllowedRegistry, GpuOffering, Image


def demo_nodes() -> list[dict[str, Any]]:
    return build_cluster_nodes(load_cluster_file(default_cluster_file()), created="2026-01-01T00:00:00Z")


def install_offerings() -> dict[str, GpuOffering]:
    offerings = {}
    for proposal in propose_offerings(demo_nodes()):
        fields = asdict(proposal)
        fields.pop("nodes")
        offerings[proposal.slug] = GpuOffering.objects.create(**fields)
    return offerings


def install_images() -> None:
    Image.objects.create(
        slug="scipy",
        display_name="SciPy",
        reference="quay.io/jupyter/scipy-notebook:2025-06-02",
        kind=Image.Kind.NOTEBOOK,
    )
    Image.objects.create(
        slug="pytorch", display_name="PyTorch", reference="nvcr.io/nvidia/pytorch:25.05-py3", kind=Image.Kind.JOB
    )
    AllowedRegistry.objects.create(prefix="nvcr.io/nvidia/")


def set_quota(team: Team, flavour: str, amount: float) -> TeamQuota:
    quota, _ = TeamQuota.objects.update_or_create(
        team=team, flavour=flavour, defaults={"guaranteed": Decimal(str(amount))}
    )
    return quota
