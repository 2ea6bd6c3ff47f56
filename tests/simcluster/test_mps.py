"""MPS shares end to end on the simulated cluster, over HTTP: discovery proposes the share with its memory
cap from the nodes the API serves, the portal's pod asks for one replica by the device plugin's own name,
and a workload over its MPS client's memory limit fails with CUDA's error where the portal reads it."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from kubernetes import client

from scheduling.discovery import OfferingProposal, propose_offerings
from scheduling.kube import manifests
from scheduling.kube.spec import GpuRequest, WorkspaceSpec
from scheduling.loops.observe import observe_job, observe_pod
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.mps_cluster import CAP_MIB, MPS_NODE, mps_nodes, write_cluster_file
from tests.simcluster.conftest import SPEED, wait_for_phase

# The client itself calls the deprecated urllib3 getheaders() when it reads a log.
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheaders:DeprecationWarning")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    tmp = tmp_path_factory.mktemp("mps")
    with running_simcluster(write_cluster_file(tmp), seed=11, speed=SPEED, tmp_dir=tmp) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def share(api: client.ApiClient, v1: client.CoreV1Api) -> OfferingProposal:
    nodes = [api.sanitize_for_serialization(n) for n in v1.list_node().items]
    return next(p for p in propose_offerings(nodes) if p.kind == "mps")


def spec_on(share: OfferingProposal, name: str, gpu_memory_mib: int | None) -> WorkspaceSpec:
    gpu = GpuRequest(share.resource_name, 1, share.node_selector, "mps")
    return WorkspaceSpec(
        workspace_id=7,
        name=name,
        kind="notebook",
        team_slug="vision",
        owner="alice",
        image="quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20",
        command=(),
        env={},
        gpu=gpu,
        cpu_millis=2000,
        memory_mib=8192,
        workers=1,
        max_runtime_seconds=3600,
        home_volume_gib=10,
        simulated_gpu_memory_mib=gpu_memory_mib,
    )


def start(api: client.ApiClient, v1: client.CoreV1Api, namespace: str, spec: WorkspaceSpec) -> str:
    pod: dict[str, Any] = api.sanitize_for_serialization(manifests.make_notebook_pod(spec, base_url="/"))
    pod["metadata"]["namespace"] = namespace
    v1.create_namespaced_pod(namespace, pod)
    return str(pod["metadata"]["name"])


def test_discovery_proposes_the_share_capped_at_memory_over_replicas(share: OfferingProposal) -> None:
    assert (share.resource_name, share.replicas, share.allowed_counts) == ("nvidia.com/gpu", 4, [1])
    assert (share.memory_cap_mib, share.active_thread_percentage) == (CAP_MIB, 25)
    assert share.node_selector == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}
    assert str(share.gpu_equivalents) == "0.2500"


def test_a_renamed_share_is_proposed_under_the_shared_name() -> None:
    share = next(p for p in propose_offerings(mps_nodes("mps-4-renamed")) if p.kind == "mps")
    assert (share.resource_name, share.memory_cap_mib) == ("nvidia.com/gpu.shared", CAP_MIB)
    assert share.node_selector == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}  # no -SHARED when renamed


def test_the_pod_asks_for_one_replica_by_its_real_name(share: OfferingProposal) -> None:
    pod = client.ApiClient().sanitize_for_serialization(
        manifests.make_notebook_pod(spec_on(share, "nb", None), base_url="/")
    )
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "2000m", "memory": "8192Mi", "nvidia.com/gpu": "1"}
    # The MPS control daemon sets the client's limits; nothing CUDA_MPS_* rides in the pod (GPU doc 1.3).
    assert not [e for e in container["env"] if e["name"].startswith("CUDA_")]
    two = replace(spec_on(share, "nb", None), gpu=GpuRequest(share.resource_name, 2, share.node_selector, "mps"))
    with pytest.raises(ValueError, match="exactly one replica"):  # failRequestsGreaterThanOne (GPU doc 1.3)
        manifests.check_spec(two)


def test_a_workload_over_its_cap_fails_with_cudas_error(
    api: client.ApiClient, v1: client.CoreV1Api, namespace: str, share: OfferingProposal
) -> None:
    name = start(api, v1, namespace, spec_on(share, "greedy", 12288))
    wait_for_phase(v1, namespace, name, "Failed")
    pod = api.sanitize_for_serialization(v1.read_namespaced_pod(name, namespace))
    assert pod["spec"]["nodeName"] == MPS_NODE
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    expected = "CUDA out of memory: MPS client pinned device memory limit 10240 MiB exceeded (asked 12288 MiB)"
    assert (terminated["reason"], terminated["exitCode"], terminated["message"]) == ("Error", 1, expected)
    assert expected in v1.read_namespaced_pod_log(name, namespace)
    seen = observe_pod(pod)  # what the reconcile loop writes on the workspace
    assert (seen.state, seen.reason, seen.recreate) == ("failed", f"Failed: {expected}", False)


def test_a_workload_within_its_cap_runs(
    sim: SimCluster, api: client.ApiClient, v1: client.CoreV1Api, namespace: str, share: OfferingProposal
) -> None:
    name = start(api, v1, namespace, spec_on(share, "modest", CAP_MIB))
    wait_for_phase(v1, namespace, name, "Running")
    sim.advance_clock(600)
    sim.settle()
    pod = api.sanitize_for_serialization(v1.read_namespaced_pod(name, namespace))
    assert (pod["status"]["phase"], pod["spec"]["nodeName"]) == ("Running", MPS_NODE)
    assert observe_pod(pod).state == "running"
    # dcgm-exporter reports what the client holds: its declared memory, within its cap.
    metrics = urllib.request.urlopen(f"{sim.plain_url}/metrics", timeout=5).read().decode()  # noqa: S310
    used = [
        line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_FB_USED{") and f'pod="{name}"' in line
    ]
    assert len(used) == 1 and used[0].endswith(f" {CAP_MIB}")


def test_a_failed_job_says_what_its_worker_died_of() -> None:
    oom = "CUDA out of memory: MPS client pinned device memory limit 10240 MiB exceeded (asked 12288 MiB)"
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    worker = {
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"state": {"terminated": {"exitCode": 1, "reason": "Error", "message": oom}}}],
        }
    }
    seen = observe_job({"status": {"conditions": [failed]}}, [worker], 1)
    assert (seen.state, seen.reason) == ("failed", f"Failed: Job has reached the specified backoff limit ({oom})")
