"""`python -m scheduling.benchmarks.simcluster --nodes 1000 --pods 10000`: how many pod create + schedule +
run cycles per second the simulated cluster sustains.

It writes a cluster file of the requested size (half 8 x H100 nodes, half CPU nodes), starts the server
as a separate process, creates the pods through the official client from several threads (every fifth
pod asks for a GPU) and polls until every pod reports Running.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

NAMESPACE = "bench"


def cluster_file(nodes: int) -> dict[str, Any]:
    gpu_nodes = nodes // 2
    specs: list[dict[str, Any]] = [
        {"name": f"gpu-{i:04d}", "cpu": 224, "memory": "2Ti", "gpu": {"model": "H100-80GB-HBM3", "count": 8}}
        for i in range(gpu_nodes)
    ]
    specs += [{"name": f"cpu-{i:04d}", "cpu": 64, "memory": "256Gi"} for i in range(nodes - gpu_nodes)]
    return {"seed": 1, "nodes": specs}


def pod(i: int) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": "500m", "memory": "512Mi"}
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    if i % 5 == 0:
        limits["nvidia.com/gpu"] = 1
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec["containers"] = [{"name": "main", "image": "busybox:1.37", "resources": {"limits": limits}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:06d}"}, "spec": spec}


def start_server(nodes_file: Path, kubeconfig: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "scheduling.simcluster", "--nodes", str(nodes_file), "--kubeconfig", str(kubeconfig),
        "--speed", "100", "--start-delay", "2",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: S603 - our own module
    assert server.stdout is not None
    server.stdout.readline()  # the URL, printed once the kubeconfig is written
    return server


def run(nodes: int, pods: int, threads: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        nodes_file = Path(tmp) / "cluster.yaml"
        nodes_file.write_text(yaml.safe_dump(cluster_file(nodes)))
        kubeconfig = Path(tmp) / "kubeconfig"
        server = start_server(nodes_file, kubeconfig)
        try:
            return _measure(kubeconfig, pods, threads)
        finally:
            server.terminate()
            server.wait(timeout=30)


def _measure(kubeconfig: Path, pods: int, threads: int) -> dict[str, float]:
    api = config.new_client_from_config(config_file=str(kubeconfig))
    api.configuration.connection_pool_maxsize = threads
    v1 = client.CoreV1Api(api)
    v1.create_namespace({"metadata": {"name": NAMESPACE}})
    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        # The response is not turned into model objects: that client-side cost is not the cluster's.
        list(pool.map(lambda i: v1.create_namespaced_pod(NAMESPACE, pod(i), _preload_content=False), range(pods)))
    created = time.monotonic()
    while _not_running(v1) and time.monotonic() - created < 600:
        time.sleep(0.5)
    finished = time.monotonic()
    running = pods - _not_running(v1)
    api.close()
    return {
        "pods": pods,
        "running": running,
        "create_s": created - started,
        "total_s": finished - started,
        "creates_per_s": pods / (created - started),
        "cycles_per_s": running / (finished - started),
    }


def _not_running(v1: client.CoreV1Api) -> int:
    """How many pods are not Running yet, from a one-item page (the server counts the rest)."""
    page = v1.list_namespaced_pod(NAMESPACE, field_selector="status.phase!=Running", limit=1)
    return len(page.items) + (page.metadata.remaining_item_count or 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scheduling.benchmarks.simcluster", description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    result = run(args.nodes, args.pods, args.threads)
    print(
        f"{result['running']:.0f}/{result['pods']:.0f} pods running on {args.nodes} nodes in "
        f"{result['total_s']:.1f} s: {result['cycles_per_s']:.0f} create+schedule+run cycles/s "
        f"(creates alone: {result['creates_per_s']:.0f}/s)"
    )


if __name__ == "__main__":
    main()
