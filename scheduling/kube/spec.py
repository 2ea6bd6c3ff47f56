"""What the portal asks the cluster for: plain frozen values filled from database rows.

The manifest builders (:mod:`scheduling.kube.manifests`) take these and nothing else, so they never
touch the ORM and can be tested as pure functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# The one list of environment variables users may not set, read by request validation
# (workspaces/policy.py) and again by the manifest builders. Compared upper-cased.
# Steer which GPUs a process sees or how the GPU runtime loads: the device plugin decides (facts doc 5, 9.6).
GPU_ENV_PREFIXES = ("NVIDIA_", "CUDA_", "GPU_", "HIP_", "ROCR_")
# Set by Kubernetes, the portal's builders (token, distributed-training rendezvous) or the image itself;
# a user value would silently shadow, or be shadowed by, the real one.
RESERVED_ENV_PREFIXES = ("KUBERNETES_",)
RESERVED_ENV_NAMES = frozenset(
    {"JUPYTER_TOKEN", "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}
    | {"LD_PRELOAD", "LD_LIBRARY_PATH", "HOME", "PATH"}
)


def env_name_problem(name: str) -> str | None:
    """Why a user may not set this environment variable, or None when it is allowed."""
    upper = name.upper()
    if upper in RESERVED_ENV_NAMES or upper.startswith(GPU_ENV_PREFIXES + RESERVED_ENV_PREFIXES):
        return f"{name} is set by the portal or the GPU runtime and cannot be chosen."
    return None


Sharing = Literal["exclusive", "mig", "time-sliced", "mps"]
# The catalogue's offering kinds (GpuOffering.Kind, discovery's proposals) -> how the device plugin shares.
SHARING_OF_KIND: dict[str, Sharing] = {"whole": "exclusive", "mig": "mig", "shared": "time-sliced", "mps": "mps"}
# One replica of a shared GPU per pod: more fails kubelet admission under failRequestsGreaterThanOne (GPU doc 1.3).
REPLICA_SHARING: tuple[Sharing, ...] = ("time-sliced", "mps")


@dataclass(frozen=True)
class DeviceClaim:
    """What a DRA offering's pods ask for: ``count`` devices of ``device_class`` that ``selector`` accepts."""

    device_class: str
    selector: str  # CEL, e.g. device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"
    count: int

    @property
    def template_name(self) -> str:
        """One template per distinct claim in a team's namespace; its content is in its name, so an
        operator's change to the offering makes a new template rather than editing one in use."""
        digest = hashlib.sha256(f"{self.device_class}\n{self.selector}\n{self.count}".encode()).hexdigest()[:10]
        return f"gpu-claim-{digest}"


@dataclass(frozen=True)
class GpuRequest:
    resource_name: str  # "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"
    count: int  # per pod (per worker for jobs)
    node_selector: Mapping[str, str]  # e.g. {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    sharing: Sharing
    # Set: the pod asks through a ResourceClaim (DRA, scheduling/dra.py) and resource_name is the shape it
    # stands for in quota and placement; unset: it asks the device plugin for resource_name.
    claim: DeviceClaim | None = None


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
    workers: int  # jobs: indexed Job parallelism == completions == workers (an elastic job's size now)
    max_runtime_seconds: int
    home_volume_gib: int
    priority_class: str | None = None
    pin_node: str | None = None  # placement engine's choice -> required node affinity on the hostname
    workload_profile: str | None = None  # simulated cluster only
    simulated_duration_seconds: int | None = None  # simulated cluster only (jobs)
    simulated_busy_seconds: int | None = None  # simulated cluster only (the idle-notebook profile)
    simulated_gpu_memory_mib: int | None = None  # simulated cluster only: GPU memory the workload allocates
    storage_class: str | None = None
    elastic: tuple[int, int] | None = None  # an elastic job's (fewest, most) workers: torchrun --nnodes=MIN:MAX
