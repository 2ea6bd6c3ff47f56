"""A notebook server's own account of its use (facts: ``shared/design/GPU-ON-KUBERNETES.md`` §8).

``GET /api/status`` gives ``{started, last_activity, kernels, connections}``; ``GET /api/kernels`` each
kernel's ``execution_state`` and ``last_activity``. Poll the kernels with ``?no_track_activity=1``: any
other authenticated API request counts as activity and would keep every notebook "active" for ever.

Pure: the answers in, one :class:`NotebookActivity` out. A kernel in any state but ``idle`` (``busy``,
``starting``, ``restarting``, or what a kernel reports) counts as working, as Kubeflow's culler reads it:
a state the portal does not know must never make a notebook look idle. ``dead`` kernels do no work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Relative to the server's base URL; the token goes with the query, beside these.
STATUS_PATH = "api/status"
KERNELS_PATH = "api/kernels"
KERNELS_QUERY = {"no_track_activity": "1"}
_RESTING = frozenset({"idle", "dead"})


class NotJupyter(ValueError):
    """The answer is not what a Jupyter server says."""


@dataclass(frozen=True)
class NotebookActivity:
    kernels: int
    busy_kernels: int  # kernels doing (or about to do) work
    connections: int  # browser connections across kernels
    last_activity: datetime  # the latest user or kernel activity the server saw


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise NotJupyter(f"expected an ISO-8601 time, got {value!r}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise NotJupyter(f"expected an ISO-8601 time, got {value!r}") from exc
    if moment.tzinfo is None:
        raise NotJupyter(f"time without a zone: {value!r}")
    return moment


def _json(body: bytes | str) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NotJupyter(f"not JSON: {str(body)[:80]!r}") from exc


def notebook_activity(status_body: bytes | str, kernels_body: bytes | str) -> NotebookActivity:
    """The server's status and kernel list read as one activity record; raises NotJupyter."""
    status, kernels = _json(status_body), _json(kernels_body)
    if not isinstance(status, Mapping) or not isinstance(kernels, Sequence) or isinstance(kernels, str):
        raise NotJupyter("expected an object from /api/status and a list from /api/kernels")
    latest = _time(status.get("last_activity"))
    busy = connections = 0
    for kernel in kernels:
        if not isinstance(kernel, Mapping):
            raise NotJupyter(f"a kernel is {kernel!r}")
        state = str(kernel.get("execution_state") or "unknown")
        busy += state not in _RESTING
        connections += int(kernel.get("connections") or 0)
        if kernel.get("last_activity"):
            latest = max(latest, _time(kernel["last_activity"]))
    return NotebookActivity(kernels=len(kernels), busy_kernels=busy, connections=connections, last_activity=latest)
