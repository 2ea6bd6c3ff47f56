"""A request for a GPU model that is fully used waits in the queue, says why, and starts on release."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_request_on_a_full_gpu_model_waits_with_the_reason_and_starts_on_release(org: Org, stack: SimCluster) -> None:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 17)
    client = api_client_for(org.member)

    def request(name: str, count: int) -> int:
        payload = {
            "kind": "notebook",
            "name": name,
            "team": "alpha",
            "offering": "h100-80gb-hbm3",
            "gpu_count": count,
            "image": "scipy",
        }
        response = client.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        return int(response.json()["id"])

    def get(workspace_id: int) -> dict[str, Any]:
        return dict(client.get(f"/api/v1/workspaces/{workspace_id}/").json())

    big = [request(f"big-{i}", 8) for i in range(2)]
    wait_for(lambda: all(get(w)["state"] == "running" for w in big), what="the 8-GPU notebooks to run")
    ninth = request("ninth", 1)

    def ninth_waits() -> dict[str, Any] | None:
        seen = get(ninth)
        return seen if seen["reason"].startswith("Waiting for a free") else None

    waiting = wait_for(ninth_waits, what="the ninth request's reason")
    assert waiting["state"] == "queued"
    assert waiting["reason"] == (
        "Waiting for a free NVIDIA H100 80GB HBM3 (whole GPU): 0/7 nodes are available: "
        "2 Insufficient nvidia.com/gpu, 5 node(s) didn't match the offering's node selector."
    )
    assert client.post(f"/api/v1/workspaces/{big[0]}/stop/").status_code == 202
    wait_for(lambda: get(ninth)["state"] == "running", what="the ninth request to start by itself")
    assert get(big[0])["state"] == "stopped"
