"""Limits on what a request may ask for, read from settings so operators can tune them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from scheduling.services import env_name_problem

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
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
    return env_name_problem(name)  # the same list the manifest builders enforce
