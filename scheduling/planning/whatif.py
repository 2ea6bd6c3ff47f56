"""What-if: replay a pod list on a described cluster and report how much of it would be allocated.

    python -m scheduling.planning.whatif --variant default --add 2x8xH100-80GB-HBM3
    python -m scheduling.planning.whatif --pods pods.csv --nodes nodes.csv \\
        --mig node=openb-node-0227,config=all-1g.10gb --policy ours

Choices, kept simple and stated so the answer can be judged:

- The cluster is the node CSV, plus ``--add COUNTxGPUSxMODEL[,cpu=MILLI][,mem=MIB]`` nodes (default 16
  cores and 128 GiB per GPU), minus ``--remove NAME`` nodes.
- ``--mig node=NAME,config=CONFIG`` gives every GPU of a node the named mig-parted layout (``gpus.py``),
  fixed: instances exist as configured and a pod takes a free one; nothing is re-partitioned.
- Pods arrive in creation-time order (``--seed`` shuffles instead), once each, and never leave;
  timestamps are otherwise ignored. A pod that fits nowhere is dropped (no queue, no preemption).
- ``--timed`` replays in time instead: each pod arrives at its creation time, runs for its lifetime
  (deletion minus scheduled or creation time) once placed and leaves; a pod that fits nowhere waits in
  a first-come queue (with backfill) retried whenever a pod leaves. It reports the queue wait and the
  time-averaged allocation. ``python manage.py whatif_history`` feeds it the portal's own requests.
- CPU-only, sharing and whole-GPU pods go through the chosen policy onto non-MIG GPUs. A single-GPU pod
  that fits no such GPU may take a free MIG instance whose compute share covers its request (the
  smallest such, on the best-fit node); that is what a user would do if told "a MIG slice is free".
- Allocation % is GPU handed out (a MIG instance counts its full share) over the cluster's GPUs at the
  end; unallocated % is the rest. Demand accepted % is the requested GPU of placed pods over all
  requested GPU.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduling.engine import gpus
from scheduling.engine.policies import POLICIES, make_policy
from scheduling.engine.policies.base import Policy
from scheduling.engine.shapes import MILLI, Placement, PodShape
from scheduling.engine.state import EXCLUSIVE, MIG, ClusterState, build_state
from scheduling.planning import trace

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


Hold = Placement | Instance


def _kind(pod: PodShape) -> str:
    return "cpu-only" if pod.num_gpu == 0 else "sharing" if pod.is_sharing else f"{pod.num_gpu}-gpu"


def _place(state: ClusterState, pool: list[Instance], pod: PodShape, policy: Policy) -> tuple[Hold, float] | None:
    """Place ``pod`` through the policy, else on a free MIG instance; returns where and the milli-GPU held."""
    where = policy.choose(state, pod)
    if where is not None:
        state.apply(pod, where)
        return where, float(pod.total_milli)
    inst = _take_instance(state, pool, pod)
    if inst is None:
        return None
    inst.used = True
    state.apply(PodShape(pod.cpu_milli, pod.memory_mib), Placement(inst.node))  # its CPU and memory
    return inst, inst.held_milli


def _release(state: ClusterState, pod: PodShape, hold: Hold) -> None:
    if isinstance(hold, Instance):
        hold.used = False
        state.release(PodShape(pod.cpu_milli, pod.memory_mib), Placement(hold.node))
    else:
        state.release(pod, hold)


def replay_whatif(state: ClusterState, pool: list[Instance], pods: Sequence[PodShape], policy: Policy) -> Outcome:
    out = Outcome()
    for pod in pods:
        out.offered += 1
        out.demand_milli += pod.total_milli
        placed = _place(state, pool, pod, policy)
        if placed is None:
            out.failed[_kind(pod)] += 1
            continue
        out.held_milli += placed[1]
        out.on_mig += isinstance(placed[0], Instance)
        out.placed += 1
        out.placed_demand_milli += pod.total_milli
    return out


@dataclass
class TimedOutcome:
    offered: int = 0
    waits: list[float] = field(default_factory=list)  # seconds from arrival to placement, placed pods
    never: int = 0  # still queued when the last pod left
    span: float = 0.0  # seconds from the first arrival to the last event
    held_milli_seconds: float = 0.0
    peak_queue: int = 0


def replay_timed(
    state: ClusterState, pool: list[Instance], rows: Sequence[trace.PodRow], policy: Policy
) -> TimedOutcome:
    """Pods arrive at their creation time, run for their lifetime once placed, then leave; a pod that
    fits nowhere waits in a first-come queue that is retried whenever a pod leaves (later pods may start
    ahead of one that does not fit yet: backfill, as kube-scheduler does)."""
    out = TimedOutcome()
    arrivals = sorted(rows, key=lambda r: (r.created, r.name))
    leaving: list[tuple[float, int, PodShape, Hold, float]] = []  # (time, seq, pod, hold, milli)
    queue: list[trace.PodRow] = []
    held, last, seq = 0.0, float(arrivals[0].created) if arrivals else 0.0, 0

    def advance(to: float) -> None:
        nonlocal held, last
        out.held_milli_seconds += held * (to - last)
        last = to

    def start(row: trace.PodRow, now: float) -> bool:
        nonlocal held, seq
        placed = _place(state, pool, row.shape, policy)
        if placed is None:
            return False
        held += placed[1]
        seq += 1
        heapq.heappush(leaving, (now + row.lifetime, seq, row.shape, placed[0], placed[1]))
        out.waits.append(now - row.created)
        return True

    def retry(now: float) -> None:
        failed: set[PodShape] = set()  # a shape that did not fit will not fit again this round
        waiting = []
        for row in queue:
            if row.shape in failed or not start(row, now):
                failed.add(row.shape)
                waiting.append(row)
        queue[:] = waiting

    i = 0
    while i < len(arrivals) or leaving:
        if leaving and (i == len(arrivals) or leaving[0][0] <= arrivals[i].created):
            now, _, pod, hold, milli = heapq.heappop(leaving)
            advance(now)
            _release(state, pod, hold)
            held -= milli
            retry(now)
        else:
            row = arrivals[i]
            i += 1
            out.offered += 1
            advance(float(row.created))
            if queue or not start(row, float(row.created)):
                queue.append(row)
                if len(queue) > 1:
                    retry(float(row.created))  # keep first come, first served among the waiting
        out.peak_queue = max(out.peak_queue, len(queue))
    out.never = len(queue)
    out.span = last - (float(arrivals[0].created) if arrivals else 0.0)
    return out


def report_timed(state: ClusterState, out: TimedOutcome) -> str:
    cap = state.total_gpus * MILLI
    alloc = 100.0 * out.held_milli_seconds / (cap * out.span) if cap and out.span else 0.0
    waits = np.asarray(out.waits) if out.waits else np.zeros(1)
    return "\n".join(
        [
            f"cluster: {state.n_nodes} nodes, {state.total_gpus} GPUs, {int((state.mode == MIG).sum())} MIG nodes",
            f"pods: {len(out.waits)}/{out.offered} started, {out.never} still queued at the end "
            f"(longest queue {out.peak_queue})",
            f"queue wait (s): mean {waits.mean():.0f}, median {np.median(waits):.0f}, "
            f"p95 {np.percentile(waits, 95):.0f}, max {waits.max():.0f}; "
            f"{100.0 * float((waits > 0).mean()):.1f}% of started pods waited",
            f"allocation over {out.span / 3600:.1f} h: mean {alloc:.2f}%  unallocated: {100.0 - alloc:.2f}%",
        ]
    )


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
    ap = argparse.ArgumentParser(prog="python -m scheduling.planning.whatif", description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=Path, default=trace.DEFAULT_NODES)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--pods", type=Path)
    src.add_argument("--variant", default="default")
    ap.add_argument("--add", action="append", default=[], help="COUNTxGPUSxMODEL[,cpu=MILLI][,mem=MIB]")
    ap.add_argument("--remove", action="append", default=[], help="node name to take out")
    ap.add_argument("--mig", action="append", default=[], help="node=NAME,config=CONFIG")
    ap.add_argument("--policy", default="ours", choices=sorted(POLICIES))
    ap.add_argument("--seed", type=int, help="shuffle arrivals with this seed instead of creation order")
    ap.add_argument("--timed", action="store_true", help="replay in time: lifetimes, a queue and its wait")
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
    if args.timed:
        print(report_timed(state, replay_timed(state, pool, rows, policy)))
    else:
        print(report(state, replay_whatif(state, pool, ordered, policy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
