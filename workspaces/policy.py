"""Limits on what a request may ask for, read from settings so operators can tune them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# Variables that steer which GPUs a process sees, or that the portal sets itself. Users never set these:
# the device plugin decides GPU visibility (GPU-ON-KUBERNETES.md section 5 and 9.6).
FORBIDDEN_ENV_PREFIXES = ("NVIDIA_", "CUDA_", "GPU_", "HIP_", "ROCR_", "KUBERNETES_")
FORBIDDEN_ENV_NAMES = frozenset({"JUPYTER_TOKEN", "LD_PRELOAD", "LD_LIBRARY_PATH", "HOME", "PATH"})
IMAGE_REFERENCE = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[\w][\w.-]{0,127}|@sha256:[a-f0-9]{64})$"
)


@dataclass(frozen=True)
class RequestLimits:
    default_runtime_hours: int
    max_runtime_hours: int
    max_extend_hours: int
    max_home_volume_gib: int
    max_workers: int
    max_env_vars: int


def limits() -> RequestLimits:
    return RequestLimits(
        default_runtime_hours=settings.WORKSPACE_DEFAULT_RUNTIME_HOURS,
        max_runtime_hours=settings.WORKSPACE_MAX_RUNTIME_HOURS,
        max_extend_hours=settings.WORKSPACE_MAX_EXTEND_HOURS,
        max_home_volume_gib=settings.WORKSPACE_MAX_HOME_GIB,
        max_workers=settings.WORKSPACE_MAX_WORKERS,
        max_env_vars=50,
    )


def env_problem(name: str) -> str | None:
    """Why an environment variable name is refused, or None when it is fine."""
    if not ENV_NAME.match(name):
        return f"{name!r} is not a valid variable name (letters, digits and _; not starting with a digit)."
    upper = name.upper()
    if upper in FORBIDDEN_ENV_NAMES or upper.startswith(FORBIDDEN_ENV_PREFIXES):
        return f"{name} is set by the portal or the GPU runtime and cannot be chosen."
    return None
