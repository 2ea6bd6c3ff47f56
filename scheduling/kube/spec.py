"""What the portal asks the cluster for: plain frozen values filled from database rows.

The manifest builders (:mod:`scheduling.kube.manifests`) take these and nothing else, so they never
touch the ORM and can be tested as pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SIM_PROFILE_ANNOTATION = "sim.gpuportal.io/workload-profile"
SIM_DURATION_ANNOTATION = "sim.gpuportal.io/duration-seconds"

# Variables that steer which GPUs a container sees: users never set them (GPU-ON-KUBERNETES.md 5, 9.6).
GPU_ENV_PREFIXES = ("NVIDIA_",)
GPU_ENV_NAMES = frozenset({"CUDA_VISIBLE_DEVICES"})
# Variables the builders set themselves; a user value would silently shadow (or be shadowed by) ours.
RESERVED_ENV_NAMES = frozenset({"JUPYTER_TOKEN", "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"})


def env_name_problem(name: str) -> str | None:
    """Why a user may not set this environment variable, or None when it is allowed.

    The portal's form and API validation can call this too, so both layers refuse the same names.
    """
    if name in GPU_ENV_NAMES or name.startswith(GPU_ENV_PREFIXES):
        return f"{name} steers GPU visibility and is set by the cluster, not by users."
    if name in RESERVED_ENV_NAMES:
        return f"{name} is set by the portal."
    return None


@dataclass(frozen=True)
class GpuRequest:
    resource_name: str  # "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"
    count: int  # per pod (per worker for jobs)
    node_selector: Mapping[str, str]  # e.g. {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    sharing: Literal["exclusive", "mig", "time-sliced"]


@dataclass(frozen=True)
class WorkspaceSpec:
    workspace_id: int
    name: str  # user-given (<= 63 chars, DNS-ish); the builders slug it anyway
    kind: Literal["notebook", "job"]
    team_slug: str
    owner: str  # username; may contain . @ + - _
    image: str
    command: tuple[str, ...]  # jobs only; notebooks run the image's start-notebook.py
    env: Mapping[str, str]
    gpu: GpuRequest | None
    cpu_millis: int
    memory_mib: int
    workers: int  # jobs: indexed Job parallelism == completions == workers
    max_runtime_seconds: int
    home_volume_gib: int
    priority_class: str | None = None
    pin_node: str | None = None  # placement engine's choice -> required node affinity on the hostname
    workload_profile: str | None = None  # simulated cluster only
    simulated_duration_seconds: int | None = None  # simulated cluster only (jobs)
    storage_class: str | None = None
