"""The demo catalogue: images, allowed registries and team quotas (offerings come from the cluster)."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from portal.models import Team
from scheduling.models import TeamQuota
from workspaces.models import AllowedRegistry, Image

IMAGES = (
    ("scipy-notebook", "Jupyter SciPy", "quay.io/jupyter/scipy-notebook:2025-06-02", Image.Kind.NOTEBOOK),
    (
        "pytorch-notebook",
        "Jupyter PyTorch (CUDA 12)",
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02",
        Image.Kind.NOTEBOOK,
    ),
    ("pytorch", "NVIDIA PyTorch 25.05", "nvcr.io/nvidia/pytorch:25.05-py3", Image.Kind.JOB),
    ("cuda-base", "CUDA 12.8 base", "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", Image.Kind.JOB),
)
REGISTRIES = ("nvcr.io/nvidia/", "quay.io/jupyter/", "ghcr.io/example-org/")
# Guaranteed GPU-equivalents per team and GPU model.
QUOTAS = {
    "vision": {"H100-80GB-HBM3": 8, "A100-SXM4-80GB": 4, "H200-141GB": 2, "L40S": 2},
    "language": {"H100-80GB-HBM3": 8, "A100-SXM4-80GB": 2, "H200-141GB": 2, "L40S": 1},
    "platform-ml": {"H100-80GB-HBM3": 4, "A100-SXM4-80GB": 2, "H200-141GB": 4, "L40S": 1},
}


@transaction.atomic
def seed_demo_catalogue() -> None:
    for slug, name, reference, kind in IMAGES:
        Image.objects.update_or_create(slug=slug, defaults={"display_name": name, "reference": reference, "kind": kind})
    for prefix in REGISTRIES:
        AllowedRegistry.objects.get_or_create(prefix=prefix)
    for team_slug, flavours in QUOTAS.items():
        team = Team.objects.filter(slug=team_slug).first()
        if team is None:
            continue
        for flavour, amount in flavours.items():
            TeamQuota.objects.update_or_create(team=team, flavour=flavour, defaults={"guaranteed": Decimal(amount)})
