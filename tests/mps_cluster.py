"""A small cluster whose A100 40GB node shares its GPUs through MPS, 4 clients per GPU (device plugin
``sharing.mps``): each client is capped at 40960 / 4 = 10240 MiB, the 10 GiB share of issue 18."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduling.simcluster.node_objects import build_cluster_nodes
from scheduling.simcluster.nodes import parse_cluster

MPS_NODE = "gpu-a100-mps-0"
CAP_MIB = 10240
NODES: list[dict[str, Any]] = [
    {
        "name": MPS_NODE,
        "cpu": 64,
        "memory": "512Gi",
        "gpu": {"model": "A100-SXM4-40GB", "count": 2},
        "pluginConfig": "mps-4",
    },
    {"name": "cpu-0", "cpu": 16, "memory": "64Gi"},
]
CLUSTER: dict[str, Any] = {
    "seed": 11,
    "devicePlugin": {
        "default": "default",
        "configs": {
            "default": {"version": "v1", "flags": {"migStrategy": "mixed"}},
            "mps-4": {
                "version": "v1",
                "flags": {"migStrategy": "mixed"},
                "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
            },
            "mps-4-renamed": {
                "version": "v1",
                "sharing": {"mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
            },
        },
    },
    "nodes": NODES,
}


def write_cluster_file(directory: Path) -> Path:
    path = directory / "mps-cluster.yaml"
    path.write_text(yaml.safe_dump(CLUSTER), encoding="utf-8")
    return path


def mps_nodes(plugin_config: str = "mps-4") -> list[dict[str, Any]]:
    """The cluster's node objects as the API would serve them, without a server."""
    doc = CLUSTER | {"nodes": [{**NODES[0], "pluginConfig": plugin_config}, *NODES[1:]]}
    return build_cluster_nodes(parse_cluster(doc), created="2026-01-01T00:00:00Z")
