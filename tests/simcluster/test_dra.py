"""Dynamic Resource Allocation on the simulated cluster, through the official client and kubectl: the NVIDIA
driver's DeviceClasses and ResourceSlices, claims from templates and shared claims, CEL selectors and
matchAttribute constraints, allocation, reservedFor and release, and strict 1.34 schemas."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from scheduling.simcluster import dra_cel, resources, validation
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.simcluster.conftest import SPEED, wait_for, wait_for_phase

CLUSTER = {
    "seed": 11,
    "nodes": [
        {
            "name": "dra-h100",
            "cpu": 64,
            "memory": "512Gi",
            "gpu": {"model": "H100-80GB-HBM3", "count": 2},
            "gpuDriver": "dra",
        },
        {
            "name": "dra-a100-mig",
            "cpu": 64,
            "memory": "512Gi",
            "gpu": {"model": "A100-SXM4-80GB", "count": 1},
            "migConfig": "all-balanced",
            "gpuDriver": "dra",
        },
        {"name": "plugin-h100", "cpu": 64, "memory": "512Gi", "gpu": {"model": "H100-80GB-HBM3", "count": 1}},
    ],
}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ONE_H100 = 'device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h100") && device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'  # noqa: E501


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    tmp = tmp_path_factory.mktemp("dra")
    nodes_file = tmp / "cluster.yaml"
    nodes_file.write_text(yaml.safe_dump(CLUSTER))
    with running_simcluster(nodes_file, seed=11, speed=SPEED, tmp_dir=tmp) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def resource(api: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api)


def _template(name: str, request: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request], **devices}}},
    }


def _pod(name: str, claim: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [TOLERATION],
            "resourceClaims": [{"name": "gpu", **claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def _claim_of(v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str, pod: str) -> Any:
    statuses = v1.read_namespaced_pod(pod, namespace).status.resource_claim_statuses
    return resource.read_namespaced_resource_claim(statuses[0].resource_claim_name, namespace)


def test_the_driver_publishes_device_classes_and_one_slice_per_dra_node(resource: client.ResourceV1Api) -> None:
    classes = {c.metadata.name: c for c in resource.list_device_class().items}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= set(classes)
    assert "'gpu'" in classes["gpu.nvidia.com"].spec.selectors[0].cel.expression
    slices = {s.spec.node_name: s for s in resource.list_resource_slice().items}
    assert set(slices) == {"dra-h100", "dra-a100-mig"}  # the device-plugin node publishes none
    h100 = slices["dra-h100"]
    assert h100.spec.driver == "gpu.nvidia.com" and h100.spec.pool.name == "dra-h100"
    assert [d.name for d in h100.spec.devices] == ["gpu-0", "gpu-1"]
    gpu0 = h100.spec.devices[0]
    assert gpu0.attributes["type"].string == "gpu"
    assert gpu0.attributes["productName"].string == "NVIDIA H100 80GB HBM3"
    assert gpu0.attributes["architecture"].string == "Hopper"
    assert gpu0.attributes["cudaComputeCapability"].version == "9.0.0"
    assert gpu0.capacity["memory"].value == "81559Mi"
    mig = {d.name: d for d in slices["dra-a100-mig"].spec.devices}
    # all-balanced on an 80 GB part: 2 x 1g.10gb + 2g.20gb + 3g.40gb, named gpu-<minor>-mig-<profile>-<gi id>-<start>
    profiles = sorted(d.attributes["profile"].string for d in mig.values())
    assert profiles == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    one = next(d for d in mig.values() if d.attributes["profile"].string == "1g.10gb")
    assert one.name.startswith("gpu-0-mig-1g10gb-") and one.attributes["type"].string == "mig"
    assert one.attributes["parentUUID"].string.startswith("GPU-") and one.attributes["uuid"].string.startswith("MIG-")
    assert {"memory", "multiprocessors", "copyEngines"} <= set(one.capacity)


def test_a_node_under_dra_advertises_no_device_plugin_resources(v1: client.CoreV1Api) -> None:
    dra = v1.read_node("dra-h100").status.allocatable
    plugin = v1.read_node("plugin-h100").status.allocatable
    assert "nvidia.com/gpu" not in dra and plugin["nvidia.com/gpu"] == "1"


def test_a_template_claim_per_pod_gets_a_whole_h100_and_goes_with_the_pod(
    sim: SimCluster, v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": ONE_H100}}]},
    }
    resource.create_namespaced_resource_claim_template(namespace, _template("one-h100", request))
    v1.create_namespaced_pod(namespace, _pod("nb", {"resourceClaimTemplateName": "one-h100"}))
    wait_for_phase(v1, namespace, "nb", "Running")
    pod = v1.read_namespaced_pod("nb", namespace)
    assert pod.spec.node_name == "dra-h100"
    claim = _claim_of(v1, resource, namespace, "nb")
    assert claim.metadata.name.startswith("nb-gpu-")
    assert claim.metadata.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim.metadata.owner_references[0].uid == pod.metadata.uid
    assert claim.spec.devices.requests[0].exactly.count == 1  # defaulted
    assert claim.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    results = claim.status.allocation.devices.results
    assert [(r.driver, r.pool, r.request) for r in results] == [("gpu.nvidia.com", "dra-h100", "gpu")]
    assert claim.status.allocation.node_selector.node_selector_terms[0].match_fields[0].values == ["dra-h100"]
    assert [r.name for r in claim.status.reserved_for] == ["nb"]
    # dcgm-exporter with KUBERNETES_ENABLE_DRA labels the claim beside the pod (facts doc 6).
    metrics = urllib.request.urlopen(f"{sim.plain_url}/metrics", timeout=10).read().decode()  # noqa: S310
    series = [
        line
        for line in metrics.splitlines()
        if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and 'pod="nb"' in line
    ]
    assert series and f'dra_claim_name="{claim.metadata.name}"' in series[0]
    assert f'dra_claim_namespace="{namespace}"' in series[0]
    v1.delete_namespaced_pod("nb", namespace, grace_period_seconds=0)
    wait_for(lambda: not resource.list_namespaced_resource_claim(namespace).items, what="the claim to go with its pod")


def test_a_mig_claim_lands_on_a_mig_device(
    v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    selector = {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'}}
    request = {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "selectors": [selector]}}
    resource.create_namespaced_resource_claim_template(namespace, _template("mig-1g10gb", request))
    for name in ("m1", "m2", "m3"):
        v1.create_namespaced_pod(namespace, _pod(name, {"resourceClaimTemplateName": "mig-1g10gb"}))
    wait_for_phase(v1, namespace, "m1", "Running")
    wait_for_phase(v1, namespace, "m2", "Running")
    devices = {_claim_of(v1, resource, namespace, n).status.allocation.devices.results[0].device for n in ("m1", "m2")}
    assert len(devices) == 2 and all(d.startswith("gpu-0-mig-1g10gb-") for d in devices)
    # Only two 1g.10gb devices exist: the third waits, in the scheduler's words.
    wait_for(
        lambda: any(
            c.reason == "Unschedulable" and "cannot allocate all claims" in c.message
            for c in v1.read_namespaced_pod("m3", namespace).status.conditions or []
        ),
        what="m3 to be unschedulable",
    )
    v1.delete_namespaced_pod("m1", namespace, grace_period_seconds=0)
    wait_for_phase(v1, namespace, "m3", "Running")


def test_two_pods_naming_one_claim_share_one_gpu(
    v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    resource.create_namespaced_resource_claim(namespace, claim)
    for name in ("a", "b"):
        v1.create_namespaced_pod(namespace, _pod(name, {"resourceClaimName": "shared-gpu"}))
    wait_for_phase(v1, namespace, "a", "Running")
    wait_for_phase(v1, namespace, "b", "Running")
    stored = resource.read_namespaced_resource_claim("shared-gpu", namespace)
    assert len(stored.status.allocation.devices.results) == 1
    assert sorted(r.name for r in stored.status.reserved_for) == ["a", "b"]
    assert (
        v1.read_namespaced_pod("a", namespace).spec.node_name == v1.read_namespaced_pod("b", namespace).spec.node_name
    )
    v1.delete_namespaced_pod("a", namespace, grace_period_seconds=0)
    wait_for(
        lambda: [
            r.name for r in resource.read_namespaced_resource_claim("shared-gpu", namespace).status.reserved_for or []
        ]
        == ["b"],
        what="a to leave reservedFor",
    )
    v1.delete_namespaced_pod("b", namespace, grace_period_seconds=0)
    wait_for(
        lambda: resource.read_namespaced_resource_claim("shared-gpu", namespace).status.allocation is None,
        what="the claim nobody reserves to be deallocated",
    )


def test_match_attribute_keeps_two_mig_devices_on_one_parent(
    v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    mig = {"deviceClassName": "mig.nvidia.com"}
    requests = [{"name": "a", "exactly": mig}, {"name": "b", "exactly": mig}]
    constraints = [{"requests": ["a", "b"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "pair"},
        "spec": {"devices": {"requests": requests, "constraints": constraints}},
    }
    resource.create_namespaced_resource_claim(namespace, body)
    v1.create_namespaced_pod(namespace, _pod("pair", {"resourceClaimName": "pair"}))
    wait_for_phase(v1, namespace, "pair", "Running")
    results = resource.read_namespaced_resource_claim("pair", namespace).status.allocation.devices.results
    assert [r.request for r in results] == ["a", "b"] and len({r.device for r in results}) == 2
    assert all(r.device.startswith("gpu-0-mig-") for r in results)


def test_bad_claims_are_refused_with_field_errors(resource: client.ResourceV1Api, namespace: str) -> None:
    def refused(body: dict[str, Any], status: int = 422) -> str:
        with pytest.raises(ApiException) as caught:
            resource.create_namespaced_resource_claim(namespace, body)
        assert caught.value.status == status
        return str(caught.value.body)

    def claim(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "bad"},
            "spec": {"devices": {"requests": [request]}},
        }

    broken_cel = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": "device.attributes["}}]},
    }
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in refused(claim(broken_cel))
    # Strict 1.34 schema: an unknown field is a strict decoding error (400), as with the real API server.
    unknown = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "unknownField": 1}}
    assert "unknownField" in refused(claim(unknown), 400)
    assert "exactly one of" in refused(claim({"name": "gpu"}))
    assert not resource.list_namespaced_resource_claim(namespace).items


def test_a_claims_spec_is_immutable(resource: client.ResourceV1Api, namespace: str) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "fixed"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    resource.create_namespaced_resource_claim(namespace, body)
    with pytest.raises(ApiException) as caught:
        resource.patch_namespaced_resource_claim(
            "fixed",
            namespace,
            {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}}},
        )
    assert caught.value.status == 422 and "field is immutable" in str(caught.value.body)


def test_claims_can_be_watched(resource: client.ResourceV1Api, namespace: str) -> None:
    # Watch from the list's resourceVersion, so the events are there whenever the stream connects.
    since = resource.list_namespaced_resource_claim(namespace).metadata.resource_version
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "watched"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    resource.create_namespaced_resource_claim(namespace, body)
    resource.delete_namespaced_resource_claim("watched", namespace)
    seen: list[tuple[str, str]] = []
    # The client derives V1ResourceClaim from the list's return type; the model is ResourceV1ResourceClaim.
    w = watch.Watch(return_type="ResourceV1ResourceClaim")
    for event in w.stream(
        resource.list_namespaced_resource_claim, namespace, resource_version=since, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "watched"), ("DELETED", "watched")]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_gets_claims_and_slices(
    sim: SimCluster, resource: client.ResourceV1Api, namespace: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "from-kubectl", "namespace": namespace},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            }
        )
    )

    def kubectl(*args: str) -> str:
        command = ["kubectl", "--kubeconfig", str(sim.kubeconfig_path), "--cache-dir", str(tmp_path / "cache"), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert kubectl("apply", "-f", str(manifest)).strip() == "resourceclaim.resource.k8s.io/from-kubectl created"
    assert "from-kubectl" in kubectl("get", "resourceclaims", "-n", namespace)
    assert "dra-h100" in kubectl("get", "resourceslices")
    assert resource.read_namespaced_resource_claim("from-kubectl", namespace).metadata.name == "from-kubectl"


def test_cel_helpers_compare_quantities_and_versions() -> None:
    device = {
        "attributes": {"driverVersion": {"version": "570.172.8"}, "type": {"string": "gpu"}},
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    activation = dra_cel.device_activation("gpu.nvidia.com", device)
    memory = 'device.capacity["gpu.nvidia.com"].memory'
    assert dra_cel.matches(f'{memory}.compareTo(quantity("79Gi")) >= 0', activation)
    assert not dra_cel.matches(f'{memory}.compareTo(quantity("80Gi")) >= 0', activation)  # the facts' memory trap
    assert dra_cel.matches(
        'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("565.0.0")) >= 0', activation
    )
    assert dra_cel.matches('device.attributes["other.example.com"].size() == 0', activation)
    with pytest.raises(dra_cel.SelectorError, match="no such member"):
        dra_cel.matches('device.attributes["gpu.nvidia.com"].profile == "1g.10gb"', activation)


def test_what_the_driver_and_the_controllers_write_validates_against_the_strict_schemas(
    api: client.ApiClient, v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "checked"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    resource.create_namespaced_resource_claim(namespace, claim)
    v1.create_namespaced_pod(namespace, _pod("checked", {"resourceClaimName": "checked"}))
    wait_for_phase(v1, namespace, "checked", "Running")
    written = {
        "deviceclasses": resource.list_device_class().items,
        "resourceslices": resource.list_resource_slice().items,
        "resourceclaims": [resource.read_namespaced_resource_claim("checked", namespace)],  # with its status
    }
    for plural, objects in written.items():
        rtype = resources.lookup("resource.k8s.io", "v1", plural)
        assert rtype is not None and objects
        for obj in objects:
            body = api.sanitize_for_serialization(obj)
            assert validation.check_schema(body, rtype) == [], (plural, body["metadata"]["name"])


def test_a_pod_waits_for_its_template_and_runs_once_it_exists(
    v1: client.CoreV1Api, resource: client.ResourceV1Api, namespace: str
) -> None:
    v1.create_namespaced_pod(namespace, _pod("early", {"resourceClaimTemplateName": "later"}))
    wait_for(
        lambda: any(
            c.reason == "Unschedulable" and 'waiting for resource claim of entry "gpu"' in c.message
            for c in v1.read_namespaced_pod("early", namespace).status.conditions or []
        ),
        what="the pod to wait for its claim",
    )
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    resource.create_namespaced_resource_claim_template(namespace, _template("later", request))
    wait_for_phase(v1, namespace, "early", "Running")
