"""Simulated jupyter_server answers for ``/api/status`` and ``/api/kernels`` (facts doc 8,
``shared/design/GPU-ON-KUBERNETES.md``).

Pure and deterministic, driven by the same workload model as the GPU telemetry
(:mod:`scheduling.simcluster.telemetry`), so an idle kernel goes with an idle GPU:

- ``idle-notebook``: one kernel, ``idle`` once the first minutes of work are over, no browser connected,
  ``last_activity`` frozen at the end of that work.
- ``bursty-notebook``: one kernel with a browser connected, ``busy`` during bursts; ``last_activity`` is
  the end of the latest burst.
- ``steady-training`` and ``cpu-preprocessing``: one ``busy`` kernel; ``last_activity`` is now.
- ``gpu-background``: one ``idle`` kernel, no browser connected, ``last_activity`` frozen at its start.
- ``none``: the server runs without kernels; ``last_activity`` is the server start.

The kernel starts ``KERNEL_START_DELAY`` after the server; before that the list is empty.
Timestamps are ISO-8601 UTC with a ``Z`` suffix, as jupyter_server's ``isoformat`` writes them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from scheduling.simcluster.telemetry import WorkloadProfile, activity, last_busy_at

KERNEL_START_DELAY = timedelta(seconds=20)


def isoformat(dt: datetime) -> str:
    """jupyter_server's timestamp form: ``datetime.isoformat`` in UTC with ``+00:00`` written ``Z``."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def kernel_id(seed: int, pod_uid: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(f"{seed}/{pod_uid}/kernel".encode()).digest()[:16], version=4))


def _kernel(
    profile: WorkloadProfile, started_at: datetime, now: datetime, seed: int, pod_uid: str, busy: float | None
) -> tuple[dict[str, Any], datetime] | None:
    kernel_start = started_at + KERNEL_START_DELAY
    if profile == "none" or now < kernel_start:
        return None
    act = activity(profile, seed=seed, pod_uid=pod_uid, started_at=started_at, at=now, busy_seconds=busy)
    busy_at = last_busy_at(profile, seed=seed, pod_uid=pod_uid, started_at=started_at, now=now, busy_seconds=busy)
    last = max(kernel_start, busy_at or kernel_start)
    model = {
        "id": kernel_id(seed, pod_uid),
        "name": "python3",
        "last_activity": isoformat(last),
        "execution_state": "busy" if act.busy else "idle",
        "connections": 0 if profile in ("idle-notebook", "gpu-background") else 1,
    }
    return model, last


def jupyter_kernels(
    profile: WorkloadProfile,
    started_at: datetime,
    now: datetime,
    seed: int,
    pod_uid: str,
    busy_seconds: float | None = None,
) -> list[dict[str, Any]]:
    """``GET /api/kernels``: ``[{id, name, last_activity, execution_state, connections}]``."""
    k = _kernel(profile, started_at, now, seed, pod_uid, busy_seconds)
    return [] if k is None else [k[0]]


def jupyter_status(
    profile: WorkloadProfile,
    started_at: datetime,
    now: datetime,
    seed: int,
    pod_uid: str,
    busy_seconds: float | None = None,
) -> dict[str, Any]:
    """``GET /api/status``: ``{started, last_activity, kernels, connections}``.

    ``last_activity`` is the latest of server start and kernel activity (facts doc 8); polling
    ``/api/status`` itself does not count as activity.
    """
    k = _kernel(profile, started_at, now, seed, pod_uid, busy_seconds)
    return {
        "started": isoformat(started_at),
        "last_activity": isoformat(started_at if k is None else max(started_at, k[1])),
        "kernels": 0 if k is None else 1,
        "connections": 0 if k is None else k[0]["connections"],
    }


# -- the token check (jupyter_server's IdentityProvider) ---------------------------------------------

TOKEN_ARGS = ("--IdentityProvider.token=", "--ServerApp.token=", "--NotebookApp.token=")
_AUTH_HEADER = re.compile(r"^(token|bearer)\s+(.+)$", re.IGNORECASE)


def configured_token(args: list[str], env_token: str | None) -> str | None:
    """The token the server was started with: a `--*.token=` argument, else `JUPYTER_TOKEN`; None when
    neither is set (the server made up a random one that nobody was told). `""` disables the check."""
    for arg in reversed(args):
        for prefix in TOKEN_ARGS:
            if arg.startswith(prefix):
                return arg[len(prefix) :]
    return env_token


def presented_token(query: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """`?token=` first, then `Authorization: token ...` (or `bearer ...`), as jupyter_server reads them."""
    if query.get("token"):
        return query["token"]
    match = _AUTH_HEADER.match(headers.get("authorization", ""))
    return match.group(2).strip() if match else ""


def authorised(expected: str | None, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
    if expected == "":
        return True
    presented = presented_token(query, headers)
    return expected is not None and bool(presented) and hmac.compare_digest(presented.encode(), expected.encode())


def refusal(path: str, prefix: str) -> tuple[int, str, bytes, dict[str, str]]:
    """What jupyter_server answers a request without a valid token: 403 with its JSON error for the REST
    API, a redirect to the login page for pages. `prefix` is where the server is reached (its base URL)."""
    if "/api/" in path + "/":
        body = json.dumps({"message": "Forbidden", "reason": None}).encode()
        return 403, "application/json", body, {}
    location = f"{prefix.rstrip('/')}/login?next={quote(prefix.rstrip('/') + path, safe='')}"
    return 302, "text/html; charset=utf-8", b"", {"Location": location}
