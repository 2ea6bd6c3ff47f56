"""Notebooks on DRA GPUs end to end: discovery proposes DRA offerings from the driver's ResourceSlices, a
researcher asks through the API, the worker's cycle places them by the slices' devices and the claims
already allocated, the pods ask with a claim from the team's ResourceClaimTemplate, and the simulated
kube-scheduler allocates a whole H100 and a 1g.10gb MIG device. Stopping gives the devices back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduling.discovery import propose_offerings
from scheduling.kube.client import kube, reset_client
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.catalogue import install_images, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import SPEED, Worker, wait_for
from workspaces.models import GpuOffering, Workspace

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTER = {
    "seed": 5,
    "nodes": [
        {
            "name": "dra-h100",
            "cpu": 64,
            "memory": "512Gi",
            "gpu": {"model": "H100-80GB-HBM3", "count": 1},
            "gpuDriver": "dra",
        },
        {
            "name": "dra-a100",
            "cpu": 64,
            "memory": "512Gi",
            "gpu": {"model": "A100-SXM4-80GB", "count": 1},
            "migConfig": "all-balanced",
            "gpuDriver": "dra",
        },
    ],
}


@pytest.fixture
def dra_stack(
    stack: SimCluster, dedicated_worker: Callable[..., Worker], settings: Any, tmp_path: Path
) -> Iterator[SimCluster]:
    """A cluster of DRA nodes of its own, with a worker of its own pointed at it (the session's cluster
    has none, and its node counts are what other tests rely on)."""
    nodes_file = tmp_path / "dra.yaml"
    nodes_file.write_text(yaml.safe_dump(CLUSTER))
    with running_simcluster(nodes_file, seed=5, speed=SPEED, tmp_dir=tmp_path) as cluster:
        settings.KUBECONFIG = str(cluster.kubeconfig_path)
        reset_client()
        dedicated_worker(KUBECONFIG=str(cluster.kubeconfig_path))
        yield cluster
        reset_client()


def _install_dra_offerings() -> dict[str, GpuOffering]:
    cluster = kube()
    offerings = {}
    for proposal in propose_offerings(cluster.list("Node", None, ""), cluster.list("ResourceSlice", None, "")):
        fields = asdict(proposal)
        fields.pop("nodes")
        offerings[proposal.slug] = GpuOffering.objects.create(**fields)
    return offerings


def _running(workspace_id: int) -> Workspace | None:
    workspace = Workspace.objects.get(pk=workspace_id)
    assert workspace.state not in ("failed", "deleted"), workspace.events.values_list("reason", flat=True)
    return workspace if workspace.state == "running" else None


def test_notebooks_on_a_dra_whole_gpu_and_a_dra_mig_device(org: Org, dra_stack: SimCluster) -> None:
    offerings = _install_dra_offerings()
    whole, mig = offerings["h100-80gb-hbm3-dra"], offerings["a100-sxm4-80gb-1g-10gb-dra"]
    assert (whole.device_class, whole.resource_name) == ("gpu.nvidia.com", "nvidia.com/gpu")
    assert (mig.device_class, mig.resource_name) == ("mig.nvidia.com", "nvidia.com/mig-1g.10gb")
    assert 'profile == "1g.10gb"' in mig.device_selector
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 4)
    set_quota(org.alpha, "A100-SXM4-80GB", 4)
    client = api_client_for(org.member)

    def request(name: str, offering: str) -> int:
        payload = {"kind": "notebook", "name": name, "team": "alpha", "offering": offering, "gpu_count": 1,
                   "image": "scipy"}  # fmt: skip
        response = client.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        return int(response.json()["id"])

    on_gpu, on_mig = request("on-h100", whole.slug), request("on-mig", mig.slug)
    wait_for(lambda: _running(on_gpu), timeout=60, what="the notebook on a DRA H100 to run")
    wait_for(lambda: _running(on_mig), timeout=60, what="the notebook on a DRA MIG device to run")

    cluster = kube()
    pods = {
        p["metadata"]["name"]: p for p in cluster.list("Pod", "team-alpha", "app.kubernetes.io/managed-by=gpu-portal")
    }
    claims = {c["metadata"]["name"]: c for c in cluster.list("ResourceClaim", "team-alpha")}
    placed = {}
    for pod in pods.values():
        container = pod["spec"]["containers"][0]
        assert not any(k.startswith("nvidia.com/") for k in container["resources"].get("limits", {}))
        assert container["resources"]["claims"] == [{"name": "gpu"}]
        [entry] = pod["spec"]["resourceClaims"]
        assert entry["resourceClaimTemplateName"].startswith("gpu-claim-")
        claim = claims[pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]]
        [result] = claim["status"]["allocation"]["devices"]["results"]
        placed[pod["metadata"]["labels"]["gpuportal.io/workspace-id"]] = (pod["spec"]["nodeName"], result["device"])
    assert placed[str(on_gpu)] == ("dra-h100", "gpu-0")
    node, device = placed[str(on_mig)]
    assert node == "dra-a100" and device.startswith("gpu-0-mig-1g10gb-")
    # The cycle counted the claims' devices: a second H100 notebook waits, in the portal's words.
    waiting = request("second-h100", whole.slug)
    wait_for(
        lambda: "Insufficient nvidia.com/gpu" in Workspace.objects.get(pk=waiting).reason,
        timeout=30,
        what="the second H100 notebook to wait for the only H100",
    )
    response = client.post(f"/api/v1/workspaces/{on_gpu}/stop/")
    assert response.status_code in (200, 202), response.json()
    wait_for(lambda: _running(waiting), timeout=60, what="the waiting notebook to get the H100 back")
