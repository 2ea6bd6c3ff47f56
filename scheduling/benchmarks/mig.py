"""MIG variant of the placement benchmark (``python -m scheduling.benchmarks.placement --mig``).

The question: on the same pods, how much GPU does MIG's slot geometry cost compared with fractional
sharing (time-slicing with a share-aware scheduler, the trace's own model)?

Conversion, stated so the numbers can be judged:

- Cluster: every node of the node CSV keeps its CPU, memory and GPU count; 8-GPU nodes become
  H100-80GB (``H100-80GB-HBM3``), all others A100-80GB (``A100-SXM4-80GB``). Both have the same profile
  names and geometry (facts doc 3.1), so one request fits either.
- Pods: a sharing pod becomes one instance of the smallest plain profile whose compute share
  (slices / 7) covers its share (``mig.smallest_profile``); a pod of k whole GPUs becomes k ``7g.80gb``
  instances; CPU-only pods are unchanged.
- MIG run: every GPU is MIG-enabled and instances are created where the engine places them (a dynamic
  layout; the MIG manager would apply it). CPU-only pods go through the named policy, MIG requests
  through :class:`MigPlacer`.
- Sharing run: the original pods on the converted cluster in exclusive mode, through the named policy.

Reported at 100% arrived (arrived % counts the original requests for both runs): unallocated GPU %
(GPU handed out; a MIG instance holds its whole ``gpu_equivalents`` share even if the pod wanted less),
GPU demand accepted %, and MIG fragmentation (free slices no profile can use) at 90%; pods accepted %
(marked ``*``) is over the whole run to 130% arrived.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scheduling.benchmarks.replay import RunResult, replay
from scheduling.engine import gpus, mig
from scheduling.engine.mig_placement import MigPlacer, mig_fragmentation
from scheduling.engine.policies import make_policy
from scheduling.engine.policies.router import Router
from scheduling.engine.shapes import MILLI, PodShape
from scheduling.engine.state import MIG, build_state
from scheduling.planning import trace

BIG_NODE_MODEL = "H100-80GB-HBM3"
SMALL_NODE_MODEL = "A100-SXM4-80GB"


def convert_nodes(nodes: Sequence[trace.NodeRow]) -> list[trace.NodeRow]:
    return [
        trace.NodeRow(n.name, n.cpu_milli, n.memory_mib, n.gpus, BIG_NODE_MODEL if n.gpus == 8 else SMALL_NODE_MODEL)
        for n in nodes
    ]


def to_mig(pod: PodShape, model: str = SMALL_NODE_MODEL) -> PodShape:
    """The MIG request standing in for a pod (see the module docstring)."""
    if pod.num_gpu == 0:
        return pod
    if pod.is_sharing:
        profile = mig.smallest_profile(model, pod.gpu_milli)
    else:
        profile = next(p.name for p in gpus.mig_profiles(model) if p.compute_slices == gpus.COMPUTE_SLICES)
    return PodShape(pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, None, profile)


def granted_milli(pod: PodShape) -> float:
    """GPU a placed pod holds: its MIG instances' share of their GPUs (the same on both models)."""
    if pod.mig_profile is None:
        return float(pod.total_milli)
    return pod.num_gpu * MILLI * gpus.gpu_equivalents(SMALL_NODE_MODEL, pod.mig_profile)


def _row(label: str, policy: str, runs: list[tuple[RunResult, float]]) -> dict[str, object]:
    return {
        "mode": label,
        "policy": policy,
        "unallocated_pct": round(float(np.mean([r.unallocated_at(100) for r, _ in runs])), 3),
        "demand_accepted_pct": round(float(np.mean([r.accepted_at(100) for r, _ in runs])), 3),
        "pods_accepted_pct": round(float(np.mean([100.0 * r.placed / r.offered for r, _ in runs])), 3),
        "mig_frag_90_pct": round(float(np.mean([f for _, f in runs])), 3) if label == "mig" else None,
        "per_seed_unallocated": [round(r.unallocated_at(100), 3) for r, _ in runs],
    }


def run(
    nodes: Sequence[trace.NodeRow], pods: Sequence[trace.PodRow], policies: Sequence[str], seeds: Sequence[int]
) -> list[dict[str, object]]:
    converted = convert_nodes(nodes)
    shapes = [p.shape for p in pods]
    rows: list[dict[str, object]] = []
    for name in policies:
        mig_runs: list[tuple[RunResult, float]] = []
        share_runs: list[tuple[RunResult, float]] = []
        for seed in seeds:
            state = trace.state_from_nodes(converted)
            arrivals = trace.workload(pods, state.total_gpus, seed)
            share_runs.append((replay(state, arrivals, make_policy(name, shapes, np.random.default_rng(seed))), 0.0))
            mig_state = build_state(
                [n.name for n in converted], [n.model for n in converted], [n.gpus for n in converted],
                [n.cpu_milli for n in converted], [n.memory_mib for n in converted], modes=[MIG] * len(converted),
            )  # fmt: skip
            router = Router(make_policy(name, shapes, np.random.default_rng(seed)), MigPlacer())
            res = replay(
                mig_state, [to_mig(p) for p in arrivals], router,
                demand=[p.total_milli for p in arrivals], granted=granted_milli, snapshot_at=(90,),
            )  # fmt: skip
            frag = mig_fragmentation(res.snapshots[90]) if 90 in res.snapshots else float("nan")
            mig_runs.append((res, frag))
        rows.append(_row("sharing", name, share_runs))
        rows.append(_row("mig", name, mig_runs))
    return rows


def main(
    nodes: Sequence[trace.NodeRow],
    sources: Sequence[tuple[str, Path]],
    policies: Sequence[str],
    seeds: Sequence[int],
    json_path: str | None,
) -> int:
    out: list[dict[str, object]] = []
    head = f"{'variant':<12} {'policy':<9} {'mode':<8} {'unalloc %':>9} {'demand ok %':>11} {'pods ok %*':>10}"
    print(f"{head} {'MIG frag@90':>11}")
    for variant, path in sources:
        for row in run(nodes, trace.read_pods(path), policies, seeds):
            row["variant"] = variant
            out.append(row)
            frag = row["mig_frag_90_pct"]
            shown = "" if frag is None else frag
            print(
                f"{variant:<12} {row['policy']!s:<9} {row['mode']!s:<8} {row['unallocated_pct']:>9} "
                f"{row['demand_accepted_pct']:>11} {row['pods_accepted_pct']:>10} {shown:>11}"
            )
    if json_path:
        payload = json.dumps(out, indent=1)
        if json_path == "-":
            print(payload)
        else:
            Path(json_path).write_text(payload)
    return 0
