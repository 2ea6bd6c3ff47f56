"""The MIG manager and the device-plugin config switch, driven by node labels through the API."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes.client.rest import ApiException

from scheduling.simcluster.testing import SimCluster
from tests.simcluster.conftest import SPEED, pod_manifest, wait_for, wait_for_phase

A100 = "gpu-a100-0"
STATE = "nvidia.com/mig.config.state"


def _label(v1, node: str, key: str, value: str) -> None:
    v1.patch_node(node, {"metadata": {"labels": {key: value}}})


def _state(v1, node: str = A100) -> str:
    return str(v1.read_node(node).metadata.labels.get(STATE))


@contextmanager
def frozen_clock(sim: SimCluster) -> Iterator[None]:
    """Nearly stop simulated time, so a state that lasts one simulated second can be seen however slow the machine."""
    sim.set_speed(0.0001)
    try:
        yield
    finally:
        sim.set_speed(SPEED)


def test_it_applies_a_new_layout_when_no_gpu_pod_runs(v1, sim):
    with frozen_clock(sim):
        _label(v1, A100, "nvidia.com/mig.config", "all-1g.10gb")
        wait_for(lambda: _state(v1) == "pending", what="pending")  # the manager reacts to the label on its own loop
    node = wait_for(lambda: (n := v1.read_node(A100)).metadata.labels[STATE] == "success" and n, what="success")
    assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "56"
    assert node.status.allocatable["nvidia.com/mig-3g.40gb"] == "0"  # gone, kept at zero as the kubelet does
    assert node.metadata.labels["nvidia.com/mig-1g.10gb.count"] == "56"
    assert "nvidia.com/mig-3g.40gb.count" not in node.metadata.labels
    assert node.metadata.labels["nvidia.com/gpu.deploy.device-plugin"] == "true"


def test_it_pauses_the_gpu_operands_while_pending(v1, sim):
    with frozen_clock(sim):
        _label(v1, A100, "nvidia.com/mig.config", "all-balanced")
        node = wait_for(lambda: (n := v1.read_node(A100)).metadata.labels[STATE] == "pending" and n, what="pending")
        assert node.metadata.labels["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-mig-change"
        assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "0"
    wait_for(lambda: _state(v1) == "success", what="success")
    assert v1.read_node(A100).status.allocatable["nvidia.com/mig-3g.40gb"] == "8"


def test_it_refuses_while_a_gpu_pod_runs_and_changes_nothing(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("busy", limits={"nvidia.com/mig-2g.20gb": 1}))
    wait_for_phase(v1, namespace, "busy", "Running")
    before = v1.read_node(A100)

    _label(v1, A100, "nvidia.com/mig.config", "all-1g.10gb")

    after = wait_for(lambda: (n := v1.read_node(A100)).metadata.labels[STATE] == "failed" and n, what="failed")
    assert after.status.allocatable == before.status.allocatable
    changed = {k for k in after.metadata.labels if after.metadata.labels[k] != before.metadata.labels.get(k)}
    assert changed == {"nvidia.com/mig.config", STATE}


def test_it_fails_an_unknown_layout(v1):
    _label(v1, A100, "nvidia.com/mig.config", "all-9g.99gb")

    wait_for(lambda: _state(v1) == "failed", what="failed")
    _label(v1, A100, "nvidia.com/mig.config", "all-balanced")
    wait_for(lambda: _state(v1) == "success", what="back to success")


def test_it_switches_time_slicing_replicas_with_the_device_plugin_label(v1):
    node = "gpu-l40s-0"
    assert v1.read_node(node).status.allocatable["nvidia.com/gpu"] == "16"

    _label(v1, node, "nvidia.com/device-plugin.config", "default")

    def unshared():
        n = v1.read_node(node)
        return n if n.status.allocatable["nvidia.com/gpu"] == "4" else None

    updated = wait_for(unshared, what="4 whole GPUs")
    assert updated.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert updated.metadata.labels["nvidia.com/gpu.replicas"] == "1"


def test_it_keeps_user_labels_and_cordon_across_republishing(v1):
    _label(v1, "gpu-h100-0", "team", "vision")
    v1.patch_node("gpu-h100-0", {"spec": {"unschedulable": True}})
    try:
        node = wait_for(
            lambda: (n := v1.read_node("gpu-h100-0")).spec.taints and len(n.spec.taints) == 2 and n, what="taint"
        )
        assert node.metadata.labels["team"] == "vision"
        assert {t.key for t in node.spec.taints} == {"nvidia.com/gpu", "node.kubernetes.io/unschedulable"}
    finally:
        v1.patch_node("gpu-h100-0", {"spec": {"unschedulable": None}})
    node = wait_for(lambda: (n := v1.read_node("gpu-h100-0")).spec.taints and len(n.spec.taints) == 1 and n)
    assert node.metadata.labels["team"] == "vision"
    assert not node.spec.unschedulable


def test_it_rejects_a_bad_label_value(v1):
    try:
        _label(v1, A100, "nvidia.com/mig.config", "not a valid label value!")
    except ApiException as exc:
        assert exc.status == 422
    else:
        raise AssertionError("expected 422")
