"""Every object the portal can create validates against the Kubernetes 1.34 strict schemas, for every
offering the demo cluster yields and both kinds of workspace (and the Ingress of a real-cluster setup)."""

from __future__ import annotations

from typing import Literal

import kubernetes_validate
import pytest
from kubernetes.client import ApiClient

from scheduling.discovery import propose_offerings
from scheduling.kube import manifests
from scheduling.kube.spec import SHARING_OF_KIND, GpuRequest, WorkspaceSpec
from tests.catalogue import demo_nodes

PROPOSALS = propose_offerings(demo_nodes())


def spec_for(proposal, kind: Literal["notebook", "job"], workers: int) -> WorkspaceSpec:
    gpu = None
    if proposal.kind != "cpu":
        gpu = GpuRequest(
            proposal.resource_name, max(proposal.allowed_counts), proposal.node_selector, SHARING_OF_KIND[proposal.kind]
        )
    return WorkspaceSpec(
        workspace_id=7,
        name=f"{kind}-{proposal.slug}",
        kind=kind,
        team_slug="vision",
        owner="alice@example.org",
        image="quay.io/jupyter/scipy-notebook:2025-06-02",
        command=("python", "train.py") if kind == "job" else (),
        env={"EPOCHS": "3"},
        gpu=gpu,
        cpu_millis=2000,
        memory_mib=8192,
        workers=workers,
        max_runtime_seconds=72 * 3600,
        home_volume_gib=10,
        workload_profile="bursty-notebook",
    )


@pytest.mark.parametrize("proposal", PROPOSALS, ids=[p.slug for p in PROPOSALS])
@pytest.mark.parametrize(("kind", "workers"), [("notebook", 1), ("job", 1), ("job", 2)])
def test_every_object_validates_strictly(proposal, kind: Literal["notebook", "job"], workers: int) -> None:
    spec = spec_for(proposal, kind, workers)
    objects = [manifests.make_namespace("vision"), *manifests.objects_for(spec, token="t" * 48, base_url="/ws/x/")]
    if kind == "notebook":
        objects.append(
            manifests.make_notebook_ingress(
                spec, host="nb.example.org", path="/ws/team-vision/x/", tls_secret="nb-tls", ingress_class="nginx"
            )
        )
    for obj in objects:
        body = ApiClient().sanitize_for_serialization(obj)
        kubernetes_validate.validate(body, "1.34.0", strict=True)


def test_every_gpu_offering_kind_has_a_sharing_mode():
    from workspaces.models import GpuOffering

    assert set(SHARING_OF_KIND) == {k.value for k in GpuOffering.Kind} - {GpuOffering.Kind.CPU.value}
