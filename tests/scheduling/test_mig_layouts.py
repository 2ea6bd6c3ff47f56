"""The MIG layout planner on hand-worked cases: which idle node gets which named config, or none.

Weights are compute slices: a whole GPU 7, a 1g slice 1, a 2g 2, a 3g 3.
"""

from __future__ import annotations

from scheduling.planning.mig_layouts import NodeLayout, config_supply, plan, unserved

H100 = "H100-80GB-HBM3"
GPU = "nvidia.com/gpu"
G1 = "nvidia.com/mig-1g.10gb"
G2 = "nvidia.com/mig-2g.20gb"
G3 = "nvidia.com/mig-3g.40gb"


def whole(name: str, *, idle: bool = True, free: int | None = None) -> NodeLayout:
    return NodeLayout(name, H100, 8, "all-disabled", idle, {GPU: 8 if free is None else free})


def split(name: str, config: str, *, idle: bool = True) -> NodeLayout:
    return NodeLayout(name, H100, 8, config, idle, config_supply(H100, config, 8) if idle else {})


def test_it_knows_what_the_named_configs_give_an_8_gpu_h100_node() -> None:
    assert config_supply(H100, "all-disabled", 8) == {GPU: 8}
    assert config_supply(H100, "all-1g.10gb", 8) == {G1: 56}
    assert config_supply(H100, "all-balanced", 8) == {G1: 16, G2: 8, G3: 8}
    assert unserved({G1: 10, GPU: 2}, {G1: 4, GPU: 8}, {G1: 1, GPU: 7}) == 6


def test_no_demand_no_change() -> None:
    assert plan([whole("a"), split("b", "all-1g.10gb")], {}) == []
    assert plan([whole("a")], {(H100, G1): 0}) == []


def test_demand_that_already_fits_changes_nothing() -> None:
    assert plan([whole("a"), split("b", "all-1g.10gb")], {(H100, G1): 20, (H100, GPU): 4}) == []


def test_queued_1g_slices_split_an_idle_whole_gpu_node() -> None:
    busy = whole("a", idle=False, free=3)
    [change] = plan([busy, whole("b")], {(H100, G1): 10})
    assert (change.node, change.old, change.new) == ("b", "all-disabled", "all-1g.10gb")
    assert change.reason == ("queued and unserved: 10 x mig-1g.10gb; all-1g.10gb on b leaves nothing unserved")


def test_a_node_with_gpu_pods_is_never_chosen() -> None:
    assert plan([whole("a", idle=False, free=7)], {(H100, G1): 10}) == []


def test_whole_gpu_demand_keeps_the_last_whole_nodes() -> None:
    # 8 whole GPUs wanted, one idle whole node has them: splitting it would leave 56 slices unserved for 7.
    assert plan([whole("a"), whole("b", idle=False, free=0)], {(H100, G1): 7, (H100, GPU): 8}) == []


def test_low_whole_gpu_demand_lets_the_other_idle_node_split() -> None:
    # Two idle whole nodes, 8 whole GPUs wanted: one stays whole, the other splits.
    [change] = plan([whole("a"), whole("b")], {(H100, G1): 7, (H100, GPU): 8})
    assert change.new == "all-1g.10gb"
    assert change.node == "a"  # either serves; the first by name


def test_the_reverse_queued_whole_gpus_merge_an_idle_split_node() -> None:
    nodes = [whole("a", idle=False, free=0), split("b", "all-1g.10gb")]
    [change] = plan(nodes, {(H100, GPU): 4})
    assert (change.node, change.old, change.new) == ("b", "all-1g.10gb", "all-disabled")


def test_a_split_node_stays_while_its_slices_are_wanted_more() -> None:
    # 4 whole GPUs (28 slices) wanted, but 40 1g slices too: merging would leave 40 unserved instead of 28.
    nodes = [whole("a", idle=False, free=0), split("b", "all-1g.10gb")]
    assert plan(nodes, {(H100, GPU): 4, (H100, G1): 40}) == []


def test_mixed_slice_demand_chooses_the_balanced_layout() -> None:
    [change] = plan([whole("a")], {(H100, G1): 4, (H100, G3): 4})
    assert change.new == "all-balanced"


def test_one_change_per_pass_unless_asked_for_more() -> None:
    nodes = [whole("a"), whole("b"), whole("c")]
    assert [c.node for c in plan(nodes, {(H100, G1): 100})] == ["a"]
    assert [c.node for c in plan(nodes, {(H100, G1): 100}, max_changes=3)] == ["a", "b"]  # 112 >= 100


def test_parts_without_mig_and_custom_configs_are_left_alone() -> None:
    l40s = NodeLayout("l", "L40S", 4, "all-disabled", True, {GPU: 4})
    custom = NodeLayout("c", H100, 8, "half-3g", True, {GPU: 4, G3: 8})
    assert plan([l40s], {("L40S", GPU): 8}) == []
    assert plan([custom], {(H100, G1): 4}) == []
    assert plan([whole("a")], {("NoSuchGpu", G1): 4}) == []
