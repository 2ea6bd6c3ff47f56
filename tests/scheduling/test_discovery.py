"""Offerings proposed from node labels and allocatable, as GFD and the device plugin publish them."""

from __future__ import annotations

from decimal import Decimal

from scheduling.discovery import propose_offerings
from tests.catalogue import demo_nodes


def test_it_proposes_one_offering_per_shape_of_the_demo_cluster() -> None:
    proposals = {p.slug: p for p in propose_offerings(demo_nodes())}
    assert set(proposals) == {
        "cpu",
        "h100-80gb-hbm3",
        "a100-sxm4-80gb-1g-10gb",
        "a100-sxm4-80gb-2g-20gb",
        "a100-sxm4-80gb-3g-40gb",
        "h200-141gb-1g-18gb",
        "l40s-shared-4",
    }
    whole = proposals["h100-80gb-hbm3"]
    assert (whole.kind, whole.resource_name, whole.allowed_counts) == ("whole", "nvidia.com/gpu", [1, 2, 4, 8])
    assert whole.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert whole.nodes == ["gpu-h100-0", "gpu-h100-1"]
    mig = proposals["a100-sxm4-80gb-3g-40gb"]
    assert (mig.resource_name, mig.mig_profile, mig.gpu_equivalents) == (
        "nvidia.com/mig-3g.40gb",
        "3g.40gb",
        Decimal("0.5"),
    )
    shared = proposals["l40s-shared-4"]
    assert (shared.resource_name, shared.gpu_equivalents, shared.replicas) == ("nvidia.com/gpu", Decimal("0.25"), 4)
    assert shared.node_selector == {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}
    assert "no memory" in shared.description
