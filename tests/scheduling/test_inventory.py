"""The live cluster as the placement engine sees it: node choice from real node objects (the demo cluster
rendered by the simulated cluster's node builder) and hand-made pods."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduling.engine.policies.balanced import BalancedFGD
from scheduling.engine.policies.router import Router
from scheduling.engine.workload import OnlineWorkload
from scheduling.inventory import Capacity, Demand
from tests.catalogue import demo_nodes

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}


def whole(count: int, pods: int = 1) -> Demand:
    return Demand("nvidia.com/gpu", count, 4000, 16384, H100, pods, "exclusive", "H100-80GB-HBM3")


def mig_slice(profile: str) -> Demand:
    return Demand(f"nvidia.com/mig-{profile}", 1, 2000, 8192, A100, 1, "mig", "A100-SXM4-80GB", profile)


SHARED = Demand("nvidia.com/gpu", 1, 2000, 8192, L40S, 1, "time-sliced", "L40S", replicas=4)
CPU = Demand("", 0, 2000, 4096, {})


def pod(node: str, limits: dict[str, str], workspace: int = 0, phase: str = "Running") -> dict[str, Any]:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": dict(limits)}
    return {
        "metadata": {"labels": {"gpuportal.io/workspace-id": str(workspace)} if workspace else {}},
        "spec": {"nodeName": node, "containers": [{"resources": resources}]},
        "status": {"phase": phase},
    }


def gpus(n: int) -> dict[str, str]:
    return {"nvidia.com/gpu": str(n)}


def test_modes_and_device_counts_come_from_the_node_objects() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [])
    by_name = {n.name: i for i, n in enumerate(capacity.nodes)}
    assert capacity.state.mode[by_name["gpu-a100-0"]] == 2  # MIG
    assert capacity.state.mode[by_name["gpu-l40s-0"]] == 1  # time-sliced, 4 replicas per GPU
    assert capacity.state.ts_replicas[by_name["gpu-l40s-0"]] == 4
    assert capacity.free["nvidia.com/mig-3g.40gb"][by_name["gpu-a100-0"]] == 8
    assert capacity.free["nvidia.com/gpu"][by_name["gpu-h100-1"]] == 8


def test_bound_pods_hold_their_devices_and_name_their_workspaces() -> None:
    pods = [
        pod("gpu-h100-0", gpus(6), 7),
        pod("gpu-h100-1", gpus(8), 8, phase="Succeeded"),  # finished: holds nothing
        {"metadata": {}, "spec": {"containers": []}, "status": {"phase": "Pending"}},  # not bound
    ]
    capacity = Capacity.from_objects(demo_nodes(), pods)
    assert capacity.free["nvidia.com/gpu"][:2].tolist() == [2, 8]
    assert capacity.state.full_free[:2].tolist() == [2, 8]
    assert capacity.bound == frozenset({7})


def test_the_engine_packs_whole_gpus_so_a_full_node_stays_free() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-1", gpus(6))])
    # Two GPUs fit on either H100 node; the engine takes the partly used one and keeps gpu-h100-0 whole.
    assert capacity.place(whole(2)) == ["gpu-h100-1"]
    assert capacity.place(whole(8)) == ["gpu-h100-0"]
    assert capacity.place(whole(1)) is None
    assert capacity.explain(whole(1)) == (
        "0/7 nodes are available: 2 Insufficient nvidia.com/gpu, 5 node(s) didn't match the offering's node selector."
    )


def test_a_multi_worker_job_goes_to_one_node_when_it_fits_there() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [])
    placed = capacity.place(whole(4, pods=2))
    assert placed is not None and len(placed) == 2 and len(set(placed)) == 1
    spread = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-0", gpus(4)), pod("gpu-h100-1", gpus(4))])
    assert sorted(spread.place(whole(4, pods=2)) or []) == ["gpu-h100-0", "gpu-h100-1"]


def test_all_or_nothing_a_job_that_does_not_fit_reserves_nothing() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-0", gpus(4))])
    assert capacity.place(whole(8, pods=2)) is None
    assert capacity.free["nvidia.com/gpu"][:2].tolist() == [4, 8]
    assert capacity.state.full_free[:2].tolist() == [4, 8]


def test_mig_and_time_sliced_requests_use_the_device_plugin_counts() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-a100-0", {"nvidia.com/mig-3g.40gb": "7"})])
    assert capacity.place(mig_slice("3g.40gb")) == ["gpu-a100-0"]
    assert capacity.place(mig_slice("3g.40gb")) is None
    assert "1 Insufficient nvidia.com/mig-3g.40gb" in capacity.explain(mig_slice("3g.40gb"))
    assert capacity.place(mig_slice("1g.10gb")) == ["gpu-a100-0"]  # other profiles keep their own count
    placed = [capacity.place(SHARED) for _ in range(17)]
    assert placed[:16] == [["gpu-l40s-0"]] * 16 and placed[16] is None  # 4 GPUs x 4 replicas


def test_cpu_only_pods_stay_off_gpu_nodes() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [])
    chosen = {node for _ in range(10) for node in capacity.place(CPU) or []}
    assert chosen and chosen <= {"cpu-0", "cpu-1"}


def test_reserving_on_a_pinned_node_fails_when_that_node_is_full() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-0", gpus(6))])
    assert capacity.reserve(whole(4), "gpu-h100-0") is False
    assert capacity.reserve(whole(2), "gpu-h100-0") is True
    assert capacity.free["nvidia.com/gpu"][0] == 0
    assert capacity.reserve(whole(1), "no-such-node") is False


def test_a_lost_gpu_shrinks_what_the_engine_may_use() -> None:
    nodes = demo_nodes()
    h100 = next(n for n in nodes if n["metadata"]["name"] == "gpu-h100-0")
    h100["status"]["allocatable"]["nvidia.com/gpu"] = "7"  # the device plugin reports one GPU unhealthy
    capacity = Capacity.from_objects(nodes, [])
    assert capacity.state.gpu_count[0] == 7
    assert capacity.place(whole(8)) == ["gpu-h100-1"]
    assert capacity.place(whole(8)) is None


@pytest.mark.parametrize("taint", [{"key": "maintenance", "effect": "NoSchedule"}])
def test_cordoned_tainted_and_not_ready_nodes_are_left_out(taint: dict[str, str]) -> None:
    nodes = demo_nodes()
    nodes[0]["spec"]["unschedulable"] = True
    nodes[1]["spec"].setdefault("taints", []).append(taint)
    capacity = Capacity.from_objects(nodes, [])
    assert [n.name for n in capacity.nodes][:2] == ["gpu-a100-0", "gpu-h200-0"]
    assert capacity.place(whole(1)) is None


STATE_ARRAYS = ("cpu_free", "mem_free", "gpu_free", "full_free", "ts_free", "mig_state")


def test_room_held_on_a_pinned_node_is_what_the_policy_would_choose_there_without_asking_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole-GPU and CPU-only pods on their one node need no policy (it would have one candidate): the cycle
    holds every pinned workspace's room again each time. Sharing, MIG and replica pods still ask it."""
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-0", gpus(3), 1), pod("gpu-h100-1", gpus(1), 2)])
    for demand, node in [(whole(2), "gpu-h100-0"), (whole(2), "gpu-h100-0"), (whole(1), "gpu-h100-1"), (CPU, "cpu-0")]:
        mask, (shape,) = capacity._one(capacity._index[node]), capacity._shapes(demand)
        expected = capacity.copy()
        with expected.state.restricted(mask):  # the policy's own answer, from its one candidate
            choice = expected.router.choose(expected.state, shape)
        assert choice is not None and capacity._sole_node(mask, shape) == choice.node
        expected.state.apply(shape, choice)
        assert capacity.reserve(demand, node) is True
        for name in STATE_ARRAYS:
            assert np.array_equal(getattr(capacity.state, name), getattr(expected.state, name)), name
    calls: list[Any] = []
    monkeypatch.setattr(capacity.router, "choose", lambda *args: calls.append(args))
    assert capacity.reserve(whole(1), "gpu-h100-0") is True and calls == []
    assert capacity.reserve(whole(1), "gpu-h100-0") is False and calls == []  # full: the node's counts say so
    assert capacity.reserve(SHARED, "gpu-l40s-0") is True and len(calls) == 1  # a replica pod still asks


def test_a_pod_given_back_leaves_the_capacity_exactly_as_it_was() -> None:
    """What the live capacity relies on between cycles: occupy then vacate, in any order, is no change, for
    whole GPUs, MIG slices, time-sliced replicas, CPU-only pods and a pod on an overcommitted node."""
    capacity = Capacity.from_objects(demo_nodes(), [pod("gpu-h100-0", gpus(3), 1)])
    before = capacity.copy()
    huge = {"requests": {"cpu": "9000", "memory": "1Ti"}, "limits": {}}  # more than any node has
    pods = [
        pod("gpu-h100-0", gpus(4), 2),
        pod("gpu-h100-1", gpus(8), 3),
        pod("gpu-a100-0", {"nvidia.com/mig-3g.40gb": "2"}, 4),
        pod("gpu-a100-0", {"nvidia.com/mig-1g.10gb": "1"}, 4),
        pod("gpu-l40s-0", gpus(1), 5),
        pod("cpu-0", {}, 6),
        {"metadata": {}, "spec": {"nodeName": "cpu-1", "containers": [{"resources": huge}]}, "status": {}},
    ]
    held = [capacity.occupy(p) for p in pods]
    assert all(h is not None for h in held)
    assert capacity.bound == {1, 2, 3, 4, 5, 6}
    assert not np.array_equal(capacity.state.cpu_free, before.state.cpu_free)
    for h in [held[i] for i in (3, 0, 6, 2, 5, 1, 4)]:
        assert h is not None
        capacity.vacate(h)
    for name in STATE_ARRAYS:
        assert np.array_equal(getattr(capacity.state, name), getattr(before.state, name)), name
    assert all(np.array_equal(capacity.free[k], before.free[k]) for k in before.free)
    assert capacity.bound == {1}


def test_a_copy_decides_apart_from_its_original() -> None:
    capacity = Capacity.from_objects(demo_nodes(), [])
    twin = capacity.copy()
    assert twin.place(whole(8)) is not None
    assert int(capacity.free["nvidia.com/gpu"].sum()) == int(twin.free["nvidia.com/gpu"].sum()) + 8
    assert int(capacity.state.full_free.sum()) == int(twin.state.full_free.sum()) + 8


def test_the_live_policy_learns_which_models_the_offerings_name() -> None:
    # Every portal request names its offering's model: the placement engine's demand carries it, and the
    # policy's per-model demand (what keeps a model in demand for the requests that need it) learns it.
    policy = BalancedFGD(OnlineWorkload(with_memory=True))
    capacity = Capacity.from_objects(demo_nodes(), [], router=Router(policy))
    assert capacity.place(whole(2)) is not None
    assert policy.model_demand() == {"H100-80GB-HBM3": 1.0}
    assert capacity.place(CPU) is not None
    assert policy.model_demand() == {"H100-80GB-HBM3": 1.0}  # a CPU-only pod names no model
