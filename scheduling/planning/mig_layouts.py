"""Which idle GPU nodes should change their MIG layout for the queue that waits: pure planning.

The granularity is the node. ``nvidia.com/mig.config`` names one mig-parted config for the whole node
(facts doc 3.4), and the GPU Operator's ``default-mig-parted-config`` holds only configs that give every GPU
the same layout (``all-disabled``, ``all-balanced``, ``all-<profile>``). Per-GPU layouts need a config whose
entries name device indices (facts doc 3.3) in a ConfigMap the portal would have to write and the operator
to be pointed at; that is the next step. So only a node with no GPU pods at all is ever chosen, and only
the named configs are proposed.

The choice: for each GPU model, the queued demand (units per device-plugin resource) is set against what
the cluster can hand out now. What remains unserved is weighed in compute slices (a whole GPU is 7, a
``2g`` slice 2), so a whole GPU and seven ``1g`` slices count the same. A change is proposed only when it
strictly lowers that weight; the one that lowers it most wins (ties: node name, then config order). So a
queue of ``1g.10gb`` requests splits an idle whole-GPU node, but not when whole-GPU requests wait that the
split would leave unserved, and nothing changes when nothing waits or what waits already fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.engine import gpus

GPU_RESOURCE = "nvidia.com/gpu"  # whole GPUs (MIG strategy mixed, facts doc 1.1)
DISABLED = "all-disabled"
BALANCED = "all-balanced"


@dataclass(frozen=True)
class NodeLayout:
    """One GPU node as the planner sees it."""

    name: str
    model: str  # GPU catalogue key, e.g. H100-80GB-HBM3
    gpu_count: int
    config: str  # the applied ``nvidia.com/mig.config`` (all-disabled when unset)
    idle: bool  # no GPU pod on it, so its layout may change without disturbing anyone
    free: Mapping[str, int]  # device-plugin units it can hand out now (allocatable less what pods hold)


@dataclass(frozen=True)
class Change:
    """Switch ``node`` from ``old`` to ``new``; ``reason`` says why, in an operator's words."""

    node: str
    model: str
    old: str
    new: str
    reason: str


def config_supply(model: str, config: str, gpu_count: int) -> dict[str, int]:
    """Device-plugin units a node of ``gpu_count`` ``model`` GPUs offers under a named config."""
    layout = gpus.named_layout(model, config)
    if layout is None:
        return {GPU_RESOURCE: gpu_count}
    return {gpus.resource_name(profile): n * gpu_count for profile, n in gpus.layout_counts(layout).items()}


def _weights(model: str) -> dict[str, int]:
    weights = {GPU_RESOURCE: gpus.COMPUTE_SLICES}
    for profile in gpus.mig_profiles(model):
        weights[profile.resource_name] = profile.compute_slices
    return weights


def unserved(demand: Mapping[str, int], free: Mapping[str, int], weights: Mapping[str, int]) -> int:
    """Compute slices of queued demand that the free units cannot serve."""
    return sum(max(0, want - free.get(r, 0)) * weights.get(r, gpus.COMPUTE_SLICES) for r, want in demand.items())


def _candidates(model: str, demand: Mapping[str, int]) -> list[str]:
    """Configs worth trying: one ``all-<profile>`` per profile asked for, ``all-balanced``, ``all-disabled``."""
    names = set(gpus.named_config_names(model))
    wanted = [f"all-{p.config_suffix}" for p in gpus.mig_profiles(model) if demand.get(p.resource_name, 0) > 0]
    return [c for c in (*wanted, BALANCED, DISABLED) if c in names]


def _eligible(node: NodeLayout, model: str) -> bool:
    if not node.idle or node.model != model or node.gpu_count <= 0:
        return False
    try:
        gpus.named_layout(model, node.config)
    except gpus.MigError:
        return False  # a custom config: the planner cannot tell what it gives, so it leaves it alone
    return True


def _describe(demand: Mapping[str, int], free: Mapping[str, int]) -> str:
    short = [
        f"{want - free.get(r, 0)} x {r.removeprefix('nvidia.com/')}"
        for r, want in sorted(demand.items())
        if want > free.get(r, 0)
    ]
    return ", ".join(short)


def plan_model(
    model: str, nodes: Sequence[NodeLayout], demand: Mapping[str, int], *, max_changes: int = 1
) -> list[Change]:
    """The changes for one GPU model's nodes, at most ``max_changes``, each strictly reducing the unserved
    demand given the ones before it."""
    if not gpus.get_model(model).mig_capable or not any(n > 0 for n in demand.values()):
        return []
    weights = _weights(model)
    free: dict[str, int] = {}
    for node in nodes:
        if node.model == model:
            for r, n in node.free.items():
                free[r] = free.get(r, 0) + n
    changes: list[Change] = []
    taken: set[str] = set()
    for _ in range(max_changes):
        now = unserved(demand, free, weights)
        if now == 0:
            break
        best: tuple[int, Change, dict[str, int]] | None = None
        for node in sorted(nodes, key=lambda n: n.name):
            if node.name in taken or not _eligible(node, model):
                continue
            without = {r: n - node.free.get(r, 0) for r, n in free.items()}
            for config in _candidates(model, demand):
                if config == node.config:
                    continue
                after = dict(without)
                for r, n in config_supply(model, config, node.gpu_count).items():
                    after[r] = after.get(r, 0) + n
                score = unserved(demand, after, weights)
                if score < now and (best is None or score < best[0]):
                    reason = f"queued and unserved: {_describe(demand, free)}; {config} on {node.name} leaves " + (
                        f"{_describe(demand, after)} unserved" if score else "nothing unserved"
                    )
                    best = (score, Change(node.name, model, node.config, config, reason), after)
        if best is None:
            break
        changes.append(best[1])
        taken.add(best[1].node)
        free = best[2]
    return changes


def plan(nodes: Iterable[NodeLayout], demand: Mapping[tuple[str, str], int], *, max_changes: int = 1) -> list[Change]:
    """Changes across the fleet: ``demand`` is queued units per (GPU model, device-plugin resource).
    At most ``max_changes`` in all, models taken in name order."""
    fleet = list(nodes)
    by_model: dict[str, dict[str, int]] = {}
    for (model, resource), n in demand.items():
        by_model.setdefault(model, {})[resource] = by_model.get(model, {}).get(resource, 0) + n
    changes: list[Change] = []
    for model in sorted(by_model):
        if len(changes) >= max_changes:
            break
        try:
            gpus.get_model(model)
        except gpus.UnknownGpuModel:
            continue
        changes += plan_model(model, fleet, by_model[model], max_changes=max_changes - len(changes))
    return changes
