"""GPU-model constrained variants of a pod list, as the FGD paper's "GPU-type constraint" workloads.

The paper's constrained workloads are the production pod list with a share of its GPU pods given a
``gpu_spec``: one model, or a ``|``-separated set of models, that the pod may run on. The public trace's
lists here carry no such constraint, while every request in the portal names its model (an offering is
per model), so the placement benchmark makes them. ``share`` percent of the GPU pods (by count, rounded)
are constrained; which pods, and which models each gets, follows a *mix*:

- ``gpus``: every GPU pod alike; a single model with probability ``1 - set_share``, else a set of similar
  models (names sharing their leading letters: ``V100M16`` and ``V100M32``, ``G2`` and ``G3``; or
  ``families``), drawn in proportion to the GPUs the cluster has of it. Mild: most constraints name the
  models that hold most of the GPUs.
- ``openb``: as in the paper's own constrained list (``openb_pod_list_gpuspec33`` of the FGD simulator,
  tallied by pod kind: :data:`OPENB_MIX`). Production pods mostly name the older, scarcer cards: over half
  of the constraints are T4, which holds 14% of the GPUs, and sharing pods name only T4, P100 or a set of
  five. A whole-GPU pod is constrained about 1.3 times as often as a sharing one. Specs naming models the
  cluster lacks keep the models it has (none left: that spec is not drawn).

Either way a pod gets only a spec with at least one model whose nodes could hold it when empty (enough
GPUs, CPU and memory): nobody asks for a model whose nodes are all too small for the request. A pod no
spec fits is left alone and another is constrained in its stead, so the share holds. Deterministic for a
seed. Pure: rows in, rows out.

    python -m scheduling.planning.constrain --variant default --share 20 --mix openb --seed 1 --out pods.csv
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as with_fields
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scheduling.engine.shapes import PodShape
from scheduling.planning import trace

DEFAULT_SET_SHARE = 0.3
Spec = frozenset[str]
F64 = npt.NDArray[np.float64]
SHARING, ONE_GPU, MULTI_GPU = "sharing", "one-gpu", "multi-gpu"


def _specs(text: str) -> dict[Spec, float]:
    out: dict[Spec, float] = defaultdict(float)
    for part in text.split(","):
        models, _, count = part.strip().rpartition(" ")
        out[frozenset(models.split("|"))] += float(count)
    return dict(out)


@dataclass(frozen=True)
class KindMix:
    rate: float  # share of this kind's pods that carry a constraint (relative weight when choosing pods)
    specs: Mapping[Spec, float]  # spec -> how often


# Tallied from the FGD simulator's data/csv/openb_pod_list_gpuspec33_cpu0.csv (7,064 GPU pods, 2,388 with a
# gpu_spec): per kind of pod, the share constrained and how often each spec appears.
OPENB_MIX: Mapping[str, KindMix] = {
    SHARING: KindMix(884 / 3078, _specs("T4 593, P100 278, G2|P100|T4|V100M16|V100M32 13")),
    ONE_GPU: KindMix(1476 / 3911, _specs(
        "T4 698, G2 321, V100M16|V100M32 156, P100|V100M16|V100M32 102, G3 80, P100|T4|V100M16|V100M32 33, "
        "G2|P100|T4|V100M16|V100M32 26, A10|G2|T4|V100M16|V100M32 24, V100M32 18, A10|T4 6, P100|V100M16 4, "
        "A10|G2|P100|T4|V100M16|V100M32 3, V100M16 3, P100 1, T4|V100M16|V100M32 1"
    )),
    MULTI_GPU: KindMix(28 / 75, _specs(
        "G2 10, V100M16|V100M32 7, G3 6, V100M32 2, T4|V100M16|V100M32 2, P100|V100M16|V100M32 1"
    )),
}  # fmt: skip
MIXES = ("gpus", "openb")


def kind(pod: PodShape) -> str:
    return SHARING if pod.is_sharing else ONE_GPU if pod.num_gpu == 1 else MULTI_GPU


def family(model: str) -> str:
    """A model's family: its leading letters (``V100M32`` -> ``V``, ``G3`` -> ``G``)."""
    match = re.match(r"[A-Za-z]*", model)
    return match.group(0) if match and match.group(0) else model


def model_sets(nodes: Sequence[trace.NodeRow], families: Sequence[Spec] | None = None) -> list[Spec]:
    """The sets of similar models: ``families`` if given, else models grouped by :func:`family` (two or more)."""
    if families is not None:
        return [f for f in families if len(f) > 1]
    grouped: dict[str, set[str]] = defaultdict(set)
    for n in nodes:
        if n.gpus:
            grouped[family(n.model)].add(n.model)
    return [frozenset(models) for _, models in sorted(grouped.items()) if len(models) > 1]


def _hosts(node: trace.NodeRow, pod: PodShape) -> bool:
    return node.gpus >= pod.num_gpu and node.cpu_milli >= pod.cpu_milli and node.memory_mib >= pod.memory_mib


def spec_text(models: Spec) -> str:
    return "|".join(sorted(models))


class SpecDrawer:
    """Which pods are constrained and to what, for one mix on one cluster."""

    def __init__(
        self, nodes: Sequence[trace.NodeRow], mix: str, set_share: float, families: Sequence[Spec] | None
    ) -> None:
        if mix not in MIXES:
            raise ValueError(f"unknown mix {mix!r}; known: {', '.join(MIXES)}")
        if not 0.0 <= set_share <= 1.0:
            raise ValueError(f"set_share must be 0-1, not {set_share}")
        self.nodes = [n for n in nodes if n.gpus]
        gpus: dict[str, int] = defaultdict(int)
        for n in self.nodes:
            gpus[n.model] += n.gpus
        self.mix: dict[str, KindMix] = {}
        if mix == "gpus":
            singles = {frozenset([m]): g for m, g in sorted(gpus.items())}
            sets = {s: sum(gpus[m] for m in s) for s in model_sets(self.nodes, families) if s <= set(gpus)}
            weights = _blend(singles, sets, set_share)
            self.mix = {k: KindMix(1.0, weights) for k in (SHARING, ONE_GPU, MULTI_GPU)}
        else:
            for k, km in OPENB_MIX.items():
                present: dict[Spec, float] = defaultdict(float)
                for spec, weight in km.specs.items():
                    if kept := spec & set(gpus):
                        present[frozenset(kept)] += weight
                self.mix[k] = KindMix(km.rate, dict(present))
        self._cache: dict[tuple[str, int, int, int], tuple[list[Spec], F64]] = {}

    def rate(self, pod: PodShape) -> float:
        return self.mix[kind(pod)].rate

    def options(self, pod: PodShape) -> tuple[list[Spec], F64]:
        """The specs ``pod`` may get and their probabilities (empty: none fits it)."""
        key = (kind(pod), pod.num_gpu, pod.cpu_milli, pod.memory_mib)
        if key not in self._cache:
            hosts = {n.model for n in self.nodes if _hosts(n, pod)}
            specs = [s for s in self.mix[key[0]].specs if s & hosts]
            weight = np.array([self.mix[key[0]].specs[s] for s in specs], dtype=np.float64)
            self._cache[key] = (specs, weight / weight.sum() if len(specs) else weight)
        return self._cache[key]

    def draw(self, pod: PodShape, rng: np.random.Generator) -> Spec | None:
        specs, p = self.options(pod)
        return specs[int(rng.choice(len(specs), p=p))] if specs else None


def _blend(singles: Mapping[Spec, float], sets: Mapping[Spec, float], set_share: float) -> dict[Spec, float]:
    """Singles and sets each in proportion to their GPUs, sets together ``set_share`` of the whole."""
    if not sets:
        return dict(singles)
    a, b = sum(singles.values()), sum(sets.values())
    return {
        **{s: (1 - set_share) * w / a for s, w in singles.items()},
        **{s: set_share * w / b for s, w in sets.items()},
    }


def constrain(
    pods: Sequence[trace.PodRow],
    nodes: Sequence[trace.NodeRow],
    share: float,
    seed: int,
    *,
    mix: str = "gpus",
    set_share: float = DEFAULT_SET_SHARE,
    families: Sequence[Spec] | None = None,
) -> list[trace.PodRow]:
    """``pods`` with ``share`` percent of the GPU pods given a GPU model constraint (see the module)."""
    if not 0.0 <= share <= 100.0:
        raise ValueError(f"share must be 0-100 percent, not {share}")
    drawer = SpecDrawer(nodes, mix, set_share, families)
    rng = np.random.default_rng(seed)
    ordered = sorted(range(len(pods)), key=lambda i: pods[i].name)
    gpu_pods = np.array([i for i in ordered if pods[i].shape.num_gpu > 0], dtype=np.int64)
    wanted = round(len(gpu_pods) * share / 100.0)
    # An order to take pods in, each kind weighted by its rate: Efraimidis-Spirakis keys, u ** (1 / w).
    rates = np.array([drawer.rate(pods[i].shape) for i in gpu_pods], dtype=np.float64)
    keys = rng.random(len(gpu_pods)) ** (1.0 / np.maximum(rates, 1e-12))
    out = list(pods)
    done = 0
    for i in gpu_pods[np.argsort(-keys, kind="stable")]:
        if done >= wanted:
            break
        spec = drawer.draw(pods[i].shape, rng)
        if spec is None:
            continue
        out[i] = with_fields(pods[i], shape=with_fields(pods[i].shape, gpu_models=spec))
        done += 1
    return out


def write_pods(path: Path, pods: Sequence[trace.PodRow]) -> None:
    """The openb pod CSV columns the benchmark reads."""
    columns = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time",
               "deletion_time", "scheduled_time"]  # fmt: skip
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for p in pods:
            s = p.shape
            spec = spec_text(s.gpu_models) if s.gpu_models else ""
            w.writerow([p.name, s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli, spec, p.created, p.deleted,
                        p.scheduled])  # fmt: skip


def parse_families(text: str) -> list[Spec] | None:
    """``G2|G3,V100M16|V100M32`` -> two sets; empty -> ``None`` (group by name)."""
    return [frozenset(m for m in part.split("|") if m) for part in text.split(",") if part] if text else None


def summary(pods: Sequence[trace.PodRow]) -> Mapping[str, int]:
    """How many pods carry each constraint (for the command's report)."""
    counts: dict[str, int] = defaultdict(int)
    for p in pods:
        if p.shape.gpu_models:
            counts[spec_text(p.shape.gpu_models)] += 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduling.planning.constrain", description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=Path, default=trace.DEFAULT_NODES, help="node CSV (the cluster's model mix)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--pods", type=Path, help="pod CSV")
    src.add_argument("--variant", default="default", help="pod list variant of the trace")
    ap.add_argument("--share", type=float, required=True, help="percent of GPU pods to constrain (0-100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mix", choices=MIXES, default="openb", help="which pods and models (see the module)")
    ap.add_argument("--set-share", type=float, default=DEFAULT_SET_SHARE, help="mix gpus: the share given a set")
    ap.add_argument("--families", default="", help="sets of similar models, e.g. 'G2|G3,V100M16|V100M32'")
    ap.add_argument("--out", type=Path, required=True, help="pod CSV to write")
    args = ap.parse_args(argv)
    path = args.pods or trace.variant_path(args.variant)
    if not path.exists():
        ap.error(f"no pod list at {path}")
    try:
        pods = constrain(trace.read_pods(path), trace.read_nodes(args.nodes), args.share, args.seed, mix=args.mix,
                         set_share=args.set_share, families=parse_families(args.families))  # fmt: skip
    except ValueError as exc:
        ap.error(str(exc))
    write_pods(args.out, pods)
    counts = summary(pods)
    print(f"{sum(counts.values())} of {sum(p.shape.num_gpu > 0 for p in pods)} GPU pods constrained -> {args.out}")
    for spec, n in counts.items():
        print(f"  {spec:<20} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
