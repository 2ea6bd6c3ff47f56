"""What-if: replay a pod list on a described cluster and report how much of it would be allocated.

    python -m scheduling.engine.whatif --variant default --add 2x8xH100-80GB-HBM3
    python -m scheduling.engine.whatif --pods pods.csv --nodes nodes.csv \\
        --mig node=openb-node-0227,config=all-1g.10gb --policy ours

Choices, kept simple and stated so the answer can be judged:

- The cluster is the node CSV, plus ``--add COUNTxGPUSxMODEL[,cpu=MILLI][,mem=MIB]`` nodes (default 16
  cores and 128 GiB per GPU), minus ``--remove NAME`` nodes.
- ``--mig node=NAME,config=CONFIG`` gives every GPU of a node the named mig-parted layout (``gpus.py``),
  fixed: instances exist as configured and a pod takes a free one; nothing is re-partitioned.
- Pods arrive in creation-time order (``--seed`` shuffles instead), once each, and never leave;
  timestamps are otherwise ignored. A pod that fits nowhere is dropped (no queue, no preemption).
- CPU-only, sharing and whole-GPU pods go through the chosen policy onto non-MIG GPUs. A single-GPU pod
  that fits no such GPU may take a free MIG instance whose compute share covers its request (the
  smallest such, on the best-fit node); that is what a user would do if told "a MIG slice is free".
- Allocation % is GPU handed out (a MIG instance counts its full share) over the cluster's GPUs at the
  end; unallocated % is the rest. Demand accepted % is the requested GPU of placed pods over all
  requested GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduling.engine import gpus, trace
from scheduling.engine.policies import POLICIES, make_policy
from scheduling.engine.policies.base import Policy
from scheduling.engine.shapes import MILLI, Placement, PodShape
from scheduling.engine.state import EXCLUSIVE, MIG, ClusterState, build_state

DEFAULT_CPU_PER_GPU = 16_000
DEFAULT_MIB_PER_GPU = 128 * 1024


@dataclass
class Instance:
    node: int
    gpu: int
    profile: str
    compute_milli: float  # compute share, milli-GPU
    held_milli: float  # what it locks up (gpus.gpu_equivalents)
    used: bool = False


@dataclass
class Outcome:
    offered: int = 0
    placed: int = 0
    demand_milli: float = 0.0
    placed_demand_milli: float = 0.0
    held_milli: float = 0.0
    on_mig: int = 0
    failed: Counter[str] = field(default_factory=Counter)


def parse_add(spec: str) -> list[trace.NodeRow]:
    """``2x8xH100-80GB-HBM3[,cpu=128000][,mem=1048576]`` -> two new 8-GPU nodes."""
    head, *opts = spec.split(",")
    count, per_node, model = head.split("x", 2)
    n, g = int(count), int(per_node)
    kv = dict(o.split("=", 1) for o in opts)
    cpu = int(kv.get("cpu", g * DEFAULT_CPU_PER_GPU))
    mem = int(kv.get("mem", g * DEFAULT_MIB_PER_GPU))
    return [trace.NodeRow(f"whatif-{model.lower()}-{i}", cpu, mem, g, model) for i in range(n)]


def parse_mig(spec: str) -> tuple[str, str]:
    kv = dict(o.split("=", 1) for o in spec.split(","))
    return kv["node"], kv["config"]


def build_cluster(nodes: Sequence[trace.NodeRow], mig_configs: dict[str, str]) -> tuple[ClusterState, list[Instance]]:
    unknown = set(mig_configs) - {n.name for n in nodes}
    if unknown:
        raise ValueError(f"--mig names unknown nodes: {', '.join(sorted(unknown))}")
    layouts = {name: gpus.named_layout(next(n.model for n in nodes if n.name == name), cfg)
               for name, cfg in mig_configs.items()}  # fmt: skip
    modes = [MIG if layouts.get(n.name) is not None else EXCLUSIVE for n in nodes]
    state = build_state(
        [n.name for n in nodes], [n.model for n in nodes], [n.gpus for n in nodes],
        [n.cpu_milli for n in nodes], [n.memory_mib for n in nodes], modes=modes,
    )  # fmt: skip
    instances: list[Instance] = []
    for i, n in enumerate(nodes):
        for profile, _start in layouts.get(n.name) or []:
            p = gpus.get_model(n.model).profile(profile)
            share = p.compute_slices * MILLI / gpus.COMPUTE_SLICES
            held = gpus.gpu_equivalents(n.model, profile) * MILLI
            instances.extend(Instance(i, g, profile, share, held) for g in range(n.gpus))
    return state, instances


def _take_instance(state: ClusterState, pool: list[Instance], pod: PodShape) -> Instance | None:
    if pod.num_gpu != 1:
        return None
    host = state.host_ok(pod)
    fits = [x for x in pool if not x.used and host[x.node] and x.compute_milli >= pod.gpu_milli]
    if not fits:
        return None
    left = {x.node: state.cpu_free[x.node] for x in fits}
    return min(fits, key=lambda x: (x.compute_milli, left[x.node], x.node, x.gpu))


def replay_whatif(state: ClusterState, pool: list[Instance], pods: Sequence[PodShape], policy: Policy) -> Outcome:
    out = Outcome()
    for pod in pods:
        out.offered += 1
        out.demand_milli += pod.total_milli
        where = policy.choose(state, pod)
        if where is not None:
            state.apply(pod, where)
            out.held_milli += pod.total_milli
        else:
            inst = _take_instance(state, pool, pod)
            if inst is None:
                kind = "cpu-only" if pod.num_gpu == 0 else "sharing" if pod.is_sharing else f"{pod.num_gpu}-gpu"
                out.failed[kind] += 1
                continue
            inst.used = True
            state.apply(PodShape(pod.cpu_milli, pod.memory_mib), Placement(inst.node))  # its CPU and memory
            out.held_milli += inst.held_milli
            out.on_mig += 1
        out.placed += 1
        out.placed_demand_milli += pod.total_milli
    return out


def report(state: ClusterState, out: Outcome) -> str:
    cap = state.total_gpus * MILLI
    alloc = 100.0 * out.held_milli / cap if cap else 0.0
    models = ", ".join(f"{m} {int(state.gpu_count[state.model_idx == i].sum())}" for i, m in enumerate(state.models))
    lines = [
        f"cluster: {state.n_nodes} nodes, {state.total_gpus} GPUs ({models}), "
        f"{int((state.mode == MIG).sum())} MIG nodes",
        f"pods: {out.placed}/{out.offered} placed ({out.on_mig} on MIG instances); "
        f"failed: {dict(out.failed) or 'none'}",
        f"GPU demand: {out.demand_milli / MILLI:.1f} offered, {out.placed_demand_milli / MILLI:.1f} placed "
        f"({100.0 * out.placed_demand_milli / max(out.demand_milli, 1.0):.2f}% accepted)",
        f"allocation: {alloc:.2f}%  unallocated: {100.0 - alloc:.2f}%",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduling.engine.whatif", description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=Path, default=trace.DEFAULT_NODES)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--pods", type=Path)
    src.add_argument("--variant", default="default")
    ap.add_argument("--add", action="append", default=[], help="COUNTxGPUSxMODEL[,cpu=MILLI][,mem=MIB]")
    ap.add_argument("--remove", action="append", default=[], help="node name to take out")
    ap.add_argument("--mig", action="append", default=[], help="node=NAME,config=CONFIG")
    ap.add_argument("--policy", default="ours", choices=sorted(POLICIES))
    ap.add_argument("--seed", type=int, help="shuffle arrivals with this seed instead of creation order")
    args = ap.parse_args(argv)

    nodes = [n for n in trace.read_nodes(args.nodes) if n.name not in set(args.remove)]
    for spec in args.add:
        nodes.extend(parse_add(spec))
    rows = trace.read_pods(args.pods or trace.variant_path(args.variant))
    if args.seed is None:
        ordered = [r.shape for r in sorted(rows, key=lambda r: (r.created, r.name))]
    else:
        ordered = [rows[i].shape for i in np.random.default_rng(args.seed).permutation(len(rows))]
    try:
        state, pool = build_cluster(nodes, dict(parse_mig(s) for s in args.mig))
    except (ValueError, KeyError, gpus.MigError, gpus.UnknownGpuModel) as e:
        ap.error(str(e))
    policy = make_policy(args.policy, [r.shape for r in rows], np.random.default_rng(args.seed or 0))
    print(report(state, replay_whatif(state, pool, ordered, policy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
