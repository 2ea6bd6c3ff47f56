"""Tests of scheduling.kube, plus a spec factory the kube tests share."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduling.kube.spec import GpuRequest, WorkspaceSpec

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

_NOTEBOOK = WorkspaceSpec(
    workspace_id=42,
    name="nb",
    kind="notebook",
    team_slug="alpha",
    owner="alice",
    image="quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20",
    command=(),
    env={},
    gpu=GpuRequest(resource_name="nvidia.com/gpu", count=1, node_selector=H100, sharing="exclusive"),
    cpu_millis=4000,
    memory_mib=32768,
    workers=1,
    max_runtime_seconds=28800,
    home_volume_gib=20,
)


def make_spec(**changes: Any) -> WorkspaceSpec:
    """A notebook on one whole H100 unless told otherwise; jobs get a command."""
    if changes.get("kind") == "job":
        changes.setdefault("command", ("python", "train.py"))
        changes.setdefault("image", "nvcr.io/nvidia/pytorch:25.09-py3")
    return replace(_NOTEBOOK, **changes)
