"""CPU time of one telemetry collection at scale, without the network: what the portal does with the answers.

``python -m scheduling.benchmarks.telemetry --nodes 1000 --workspaces 5000``: a cluster of ``nodes`` x 8 GPUs
whose pods belong to ``workspaces`` workspaces (mostly one GPU each, some jobs of 2-8 pods), read two ways:

- **scrape**: every node's dcgm-exporter page as the default and DCP counter sets produce it (20 families per
  GPU, full labels), parsed with ``scheduling.telemetry.dcgm.parse_exposition``;
- **prometheus**: one instant query's JSON answer for the four series the portal reads.

Then the join to workspaces and the figures of each sample (``samples.workspace_figures``). Printed: CPU
seconds per phase and per cycle (target: under 1 s on a 2-core machine), rows per cycle, and rows kept
under the default retention (raw for a day every 30 s, then hourly for 90 days). The database insert is
not included (one multi-row INSERT per 1,000 rows).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from scheduling.telemetry.dcgm import METRICS, PodActivity, PodKey, device_readings, parse_exposition, pod_activity
from scheduling.telemetry.samples import Figures, workspace_figures
from scheduling.telemetry.sources import readings_from_query

GPUS_PER_NODE = 8
OTHER_FAMILIES = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)


def layout(nodes: int, workspaces: int, seed: int) -> dict[tuple[int, int], tuple[PodKey, int]]:
    """(node, gpu) -> (pod, workspace id): GPUs handed out in order, a workspace's pods on consecutive GPUs."""
    rng = random.Random(seed)
    holders: dict[tuple[int, int], tuple[PodKey, int]] = {}
    slots = [(n, g) for n in range(nodes) for g in range(GPUS_PER_NODE)]
    cursor = 0
    for ws in range(1, workspaces + 1):
        pods = 1 if rng.random() < 0.85 else rng.choice([2, 4, 8])
        for index in range(pods):
            if cursor >= len(slots):
                return holders
            holders[slots[cursor]] = ((f"team-{ws % 40}", f"ws-{ws}-{index}"), ws)
            cursor += 1
    return holders


def _labels(node: int, gpu: int, holder: tuple[PodKey, int] | None) -> str:
    base = (
        f'gpu="{gpu}",UUID="GPU-{node:04d}-{gpu}",pci_bus_id="00000000:{gpu + 16:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-{node:04d}",DCGM_FI_DRIVER_VERSION="570.172.08"'
    )
    if holder:
        (namespace, pod), _ = holder
        base += f',container="main",namespace="{namespace}",pod="{pod}"'
    return base


def exporter_pages(nodes: int, holders: dict[tuple[int, int], tuple[PodKey, int]]) -> list[str]:
    pages = []
    for node in range(nodes):
        lines = []
        for family in (*METRICS, *OTHER_FAMILIES):
            lines += [f"# HELP {family} DCGM field.", f"# TYPE {family} gauge"]
            for gpu in range(GPUS_PER_NODE):
                lines.append(f"{family}{{{_labels(node, gpu, holders.get((node, gpu)))}}} {0.37 * (gpu + 1):.2f}")
        pages.append("\n".join(lines) + "\n")
    return pages


def query_answer(nodes: int, holders: dict[tuple[int, int], tuple[PodKey, int]], now: float) -> bytes:
    result: list[dict[str, Any]] = []
    for node in range(nodes):
        for gpu in range(GPUS_PER_NODE):
            holder = holders.get((node, gpu))
            if holder is None:
                continue
            (namespace, pod), _ = holder
            labels = {"gpu": str(gpu), "UUID": f"GPU-{node:04d}-{gpu}", "Hostname": f"gpu-{node:04d}",
                      "modelName": "NVIDIA H100 80GB HBM3", "container": "main", "namespace": namespace, "pod": pod,
                      "job": "dcgm-exporter", "instance": f"10.0.{node // 250}.{node % 250}:9400"}  # fmt: skip
            for metric in METRICS:
                result.append({"metric": {"__name__": metric, **labels}, "value": [now, "0.42"]})
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def _figures(pods_of: dict[int, list[PodKey]], activity: dict[PodKey, PodActivity]) -> list[Figures]:
    return [workspace_figures(pods, activity, None) for pods in pods_of.values()]


def _cpu(what: Callable[[], Any]) -> tuple[Any, float]:
    started = time.process_time()
    answer = what()
    return answer, time.process_time() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scheduling.benchmarks.telemetry", description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workspaces", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    holders = layout(args.nodes, args.workspaces, args.seed)
    pods_of: dict[int, list[PodKey]] = {}
    for pod, ws in holders.values():
        pods_of.setdefault(ws, []).append(pod)
    pages = exporter_pages(args.nodes, holders)
    now = datetime.now(UTC)
    body = query_answer(args.nodes, holders, now.timestamp())
    print(f"{args.nodes} nodes x {GPUS_PER_NODE} GPUs, {len(holders)} GPUs held by {len(pods_of)} workspaces")
    print(f"exporter pages {sum(map(len, pages)) / 1e6:.1f} MB, query answer {len(body) / 1e6:.1f} MB")

    scraped, parse_s = _cpu(lambda: [device_readings(parse_exposition(page), now) for page in pages])
    queried, query_s = _cpu(lambda: readings_from_query(body))
    for name, readings, read_s in (
        ("scrape", [r for page in scraped for r in page], parse_s),
        ("prometheus", queried, query_s),
    ):
        activity, join_s = _cpu(partial(pod_activity, readings))
        figures, figures_s = _cpu(partial(_figures, pods_of, activity))
        total = read_s + join_s + figures_s
        print(
            f"{name:>10}: read {read_s:.2f} s, per pod {join_s:.2f} s, figures {figures_s:.2f} s "
            f"= {total:.2f} s CPU per cycle, {len(figures)} rows"
        )
    rows = len(pods_of)
    raw_day, hourly_day = rows * 86_400 // 30, rows * 24
    print(f"rows per day: {raw_day:,} raw (kept 24 h), then {hourly_day:,} hourly (kept 90 days: {hourly_day * 90:,})")


if __name__ == "__main__":
    main()
