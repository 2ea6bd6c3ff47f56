"""A node's GPUs read from the labels GFD and the MIG manager publish and the device plugin's allocatable:
the demo cluster as the simulated cluster renders it, and hand-made edge cases."""

from __future__ import annotations

from typing import Any

from scheduling.engine.quota import UNIT
from scheduling.node_gpus import capacity_by_model, read_node
from tests.catalogue import demo_nodes


def by_name() -> dict[str, Any]:
    return {node["metadata"]["name"]: node for node in demo_nodes()}


def test_it_reads_whole_mig_and_time_sliced_nodes_of_the_demo_cluster() -> None:
    nodes = {name: read_node(node) for name, node in by_name().items()}
    h100, a100, l40s, cpu = nodes["gpu-h100-0"], nodes["gpu-a100-0"], nodes["gpu-l40s-0"], nodes["cpu-0"]
    assert (h100.model, h100.count, h100.replicas, h100.mig_enabled) == ("H100-80GB-HBM3", 8, 1, False)
    assert h100.devices["nvidia.com/gpu"] == 8 and h100.healthy_whole_gpus == 8
    assert a100.mig_enabled and a100.mig_config == "all-balanced" and a100.has_mig_devices
    assert (l40s.model, l40s.replicas, l40s.devices["nvidia.com/gpu"]) == ("L40S", 4, 16)
    assert (cpu.product, cpu.model, cpu.count, dict(cpu.devices)) == ("", "", 0, {})
    assert all(node.ready and not node.cordoned for node in nodes.values())


def test_a_lost_gpu_leaves_allocatable_but_not_the_count() -> None:
    node = by_name()["gpu-h100-0"]
    node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    read = read_node(node)
    assert (read.count, read.healthy_whole_gpus) == (8, 7)


def test_mig_single_strategy_product_names_the_base_model_and_unknown_models_read_as_none() -> None:
    single = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}}}
    unknown = {"metadata": {"name": "m", "labels": {"nvidia.com/gpu.product": "NVIDIA-Imaginary-9000"}}}
    assert read_node(single).model == "A100-SXM4-80GB"
    assert (read_node(unknown).product, read_node(unknown).model) == ("NVIDIA-Imaginary-9000", "")


def test_bad_label_values_read_as_defaults_not_errors() -> None:
    node = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.count": "eight", "nvidia.com/gpu.replicas": "x"}}}
    read = read_node(node)
    assert (read.count, read.replicas) == (0, 1)


def test_quota_capacity_counts_every_gpu_of_nodes_that_are_not_cordoned() -> None:
    nodes = by_name()
    nodes["gpu-h100-1"]["spec"]["unschedulable"] = True
    capacity = capacity_by_model(map(read_node, nodes.values()))
    assert capacity["H100-80GB-HBM3"] == 8 * UNIT  # one of the two H100 nodes is cordoned
    assert capacity["A100-SXM4-80GB"] == 8 * UNIT
    assert "" not in capacity
