"""One workspace's figures for one collection, from its pods' GPU activity and its notebook's (pure).

Missing data stays missing: a workspace whose pods are not all in the GPU readings gets no GPU figure at
all (one silent worker of a job must not pull its mean towards idle), and a notebook that did not answer
gets no kernel figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from scheduling.telemetry.dcgm import PodActivity, PodKey
from scheduling.telemetry.jupyter import NotebookActivity

IDLE_ACTIVITY = 0.05  # below this the GPU counts as idle (facts doc 6's idle test), whatever a team's rule says


@dataclass(frozen=True)
class Figures:
    gpu_active: float | None = None
    gpu_observed_at: datetime | None = None
    fb_used_mib: float | None = None
    fb_total_mib: float | None = None
    kernels: int | None = None
    busy_kernels: int | None = None
    connections: int | None = None
    last_activity: datetime | None = None


def workspace_figures(
    pods: Sequence[PodKey], gpu: Mapping[PodKey, PodActivity] | None, notebook: NotebookActivity | None
) -> Figures:
    """``gpu`` None: no GPU telemetry this time (off, or the source could not be read)."""
    figures = Figures()
    if notebook is not None:
        figures = Figures(
            kernels=notebook.kernels,
            busy_kernels=notebook.busy_kernels,
            connections=notebook.connections,
            last_activity=notebook.last_activity,
        )
    readings = [gpu[pod] for pod in pods if gpu is not None and pod in gpu]
    if not pods or len(readings) < len(pods):
        return figures
    active = [(r.gr_engine_active, r.devices) for r in readings if r.gr_engine_active is not None]
    weight = sum(devices for _, devices in active)
    used = [r.fb_used_mib for r in readings if r.fb_used_mib is not None]
    total = [r.fb_total_mib for r in readings if r.fb_total_mib is not None]
    return replace(
        figures,
        gpu_active=sum(a * d for a, d in active) / weight if len(active) == len(readings) and weight else None,
        gpu_observed_at=min(r.observed_at for r in readings),
        fb_used_mib=sum(used) if len(used) == len(readings) else None,
        fb_total_mib=sum(total) if len(total) == len(readings) else None,
    )
