"""Simulated jupyter_server answers for ``/api/status`` and ``/api/kernels`` (facts doc 8,
``shared/design/GPU-ON-KUBERNETES.md``).

Pure and deterministic, driven by the same workload model as the GPU telemetry
(:mod:`scheduling.simcluster.telemetry`), so an idle kernel goes with an idle GPU:

- ``idle-notebook``: one kernel, ``idle`` once the first minutes of work are over, no browser connected,
  ``last_activity`` frozen at the end of that work.
- ``bursty-notebook``: one kernel with a browser connected, ``busy`` during bursts; ``last_activity`` is
  the end of the latest burst.
- ``steady-training``: one ``busy`` kernel; ``last_activity`` is now.
- ``none``: the server runs without kernels; ``last_activity`` is the server start.

The kernel starts ``KERNEL_START_DELAY`` after the server; before that the list is empty.
Timestamps are ISO-8601 UTC with a ``Z`` suffix, as jupyter_server's ``isoformat`` writes them.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduling.simcluster.telemetry import WorkloadProfile, activity, last_busy_at

KERNEL_START_DELAY = timedelta(seconds=20)


def isoformat(dt: datetime) -> str:
    """jupyter_server's timestamp form: ``datetime.isoformat`` in UTC with ``+00:00`` written ``Z``."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def kernel_id(seed: int, pod_uid: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(f"{seed}/{pod_uid}/kernel".encode()).digest()[:16], version=4))


def _kernel(
    profile: WorkloadProfile, started_at: datetime, now: datetime, seed: int, pod_uid: str
) -> tuple[dict[str, Any], datetime] | None:
    kernel_start = started_at + KERNEL_START_DELAY
    if profile == "none" or now < kernel_start:
        return None
    act = activity(profile, seed=seed, pod_uid=pod_uid, started_at=started_at, at=now)
    last = max(
        kernel_start,
        last_busy_at(profile, seed=seed, pod_uid=pod_uid, started_at=started_at, now=now) or kernel_start,
    )
    model = {
        "id": kernel_id(seed, pod_uid),
        "name": "python3",
        "last_activity": isoformat(last),
        "execution_state": "busy" if act.busy else "idle",
        "connections": 0 if profile == "idle-notebook" else 1,
    }
    return model, last


def jupyter_kernels(
    profile: WorkloadProfile, started_at: datetime, now: datetime, seed: int, pod_uid: str
) -> list[dict[str, Any]]:
    """``GET /api/kernels``: ``[{id, name, last_activity, execution_state, connections}]``."""
    k = _kernel(profile, started_at, now, seed, pod_uid)
    return [] if k is None else [k[0]]


def jupyter_status(
    profile: WorkloadProfile, started_at: datetime, now: datetime, seed: int, pod_uid: str
) -> dict[str, Any]:
    """``GET /api/status``: ``{started, last_activity, kernels, connections}``.

    ``last_activity`` is the latest of server start and kernel activity (facts doc 8); polling
    ``/api/status`` itself does not count as activity.
    """
    k = _kernel(profile, started_at, now, seed, pod_uid)
    return {
        "started": isoformat(started_at),
        "last_activity": isoformat(started_at if k is None else max(started_at, k[1])),
        "kernels": 0 if k is None else 1,
        "connections": 0 if k is None else k[0]["connections"],
    }
