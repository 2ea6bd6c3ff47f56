"""Container logs of simulated pods: plausible, deterministic output of each container's current run
(Jupyter server start-up for notebook images, training progress otherwise), as ``kubectl logs`` shows it."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from scheduling.simcluster.defaults import parse_time
from scheduling.simcluster.kubelet import DURATION_ANNOTATION

Obj = dict[str, Any]

_MAX_LOG_LINES = 1000


def pod_log_lines(pod: Mapping[str, Any], now: datetime, container: str | None = None) -> list[str]:
    """Plausible, deterministic output of the container's current run up to now (or its exit):
    Jupyter server start-up for notebook images, training progress otherwise. Empty while the
    container has not started."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    found = next((s for s in statuses if container in (None, s["name"])), None)
    if found is None:
        return []
    state = found["state"]
    run = state.get("running") or state.get("terminated") or (found.get("lastState") or {}).get("terminated")
    if not run:
        return []
    started = parse_time(run["startedAt"])
    ended = parse_time(run["finishedAt"]) if run.get("finishedAt") else now
    spec_containers: list[Obj] = (pod.get("spec") or {}).get("containers") or []
    spec_container: Obj = next((c for c in spec_containers if c["name"] == found["name"]), {})
    image = spec_container.get("image", "")
    seed = f"{(pod.get('metadata') or {}).get('uid')}/{found['name']}/{found.get('restartCount', 0)}"
    if run.get("message"):  # the workload died of what the kubelet recorded (e.g. an MPS out-of-memory error)
        return [f"{_log_stamp(ended)} ERROR {run['message']}"]
    if "jupyter" in image or "notebook" in image:
        lines = _jupyter_lines(pod, started, min(ended, now), seed)
    else:
        lines = _training_lines(pod, spec_container, started, min(ended, now), run.get("exitCode"), seed)
    return lines[-_MAX_LOG_LINES:]


def _jupyter_stamp(moment: datetime, app: str = "ServerApp") -> str:
    return f"[I {moment.strftime('%Y-%m-%d %H:%M:%S')}.{moment.microsecond // 1000:03d} {app}]"


def _jupyter_lines(pod: Mapping[str, Any], started: datetime, until: datetime, seed: str) -> list[str]:
    name = (pod.get("metadata") or {}).get("name", "notebook")
    startup = [
        "jupyter_lsp | extension was successfully linked.",
        "jupyter_server_terminals | extension was successfully linked.",
        "jupyterlab | extension was successfully linked.",
        "Writing Jupyter server cookie secret to /home/jovyan/.local/share/jupyter/runtime/jupyter_cookie_secret",
        "jupyter_lsp | extension was successfully loaded.",
        "jupyter_server_terminals | extension was successfully loaded.",
        "jupyterlab | extension was successfully loaded.",
        "Serving notebooks from local directory: /home/jovyan",
        "Jupyter Server 2.14.2 is running at:",
        f"http://{name}:8888/lab?token=...",
        "    http://127.0.0.1:8888/lab?token=...",
        "Use Control-C to stop this server and shut down all kernels (twice to skip confirmation).",
    ]
    lines = []
    for i, text in enumerate(startup):
        moment = started + timedelta(milliseconds=400 + 37 * i)
        if moment <= until:
            lines.append(f"{_jupyter_stamp(moment)} {text}")
    rng = random.Random(seed)  # noqa: S311 - reproducible fake output, not a secret
    kernel = "-".join(f"{rng.getrandbits(4 * width):0{width}x}" for width in (8, 4, 4, 4, 12))
    activity = [
        (95, f"Kernel started: {kernel}"),
        (97, "Connecting to kernel " + kernel + "."),
        (160, "Saving file at /Untitled.ipynb"),
    ]
    for offset, text in activity:
        moment = started + timedelta(seconds=offset)
        if moment <= until:
            lines.append(f"{_jupyter_stamp(moment)} {text}")
    return lines


def _log_stamp(moment: datetime) -> str:
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S')},{moment.microsecond // 1000:03d}"


def _training_lines(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    started: datetime,
    until: datetime,
    exit_code: int | None,
    seed: str,
) -> list[str]:
    limits = (container.get("resources") or {}).get("limits") or {}
    gpus = sum(int(v) for k, v in limits.items() if k.startswith("nvidia.com/") and str(v).isdigit()) or 0
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    duration = float(annotations.get(DURATION_ANNOTATION, 0)) or None
    interval = 30.0
    steps = int((until - started).total_seconds() // interval)
    epochs = max(1, int(duration // 300)) if duration else None
    header = [
        f"{_log_stamp(started)} INFO Using device cuda:0 ({gpus} GPU(s) visible)",
        f"{_log_stamp(started + timedelta(seconds=2))} INFO Loaded dataset: 1281167 samples",
        f"{_log_stamp(started + timedelta(seconds=3))} INFO Starting training"
        + (f": epochs={epochs}" if epochs else "")
        + ", batch_size=64",
    ]
    lines = [
        line for line, offset in zip(header, (0, 2, 3), strict=True) if started + timedelta(seconds=offset) <= until
    ]
    first = max(1, steps - _MAX_LOG_LINES)
    for step in range(first, steps + 1):
        rng = random.Random(f"{seed}:{step}")  # noqa: S311 - reproducible fake output
        elapsed = step * interval
        loss = 2.3 * math.exp(-elapsed / 1800) + 0.15 + rng.uniform(-0.03, 0.03)
        epoch = int(elapsed // 300) + 1
        epoch_text = f"{min(epoch, epochs)}/{epochs}" if epochs else str(epoch)
        throughput = 850 * max(gpus, 1) * rng.uniform(0.95, 1.05)
        moment = started + timedelta(seconds=elapsed)
        lines.append(
            f"{_log_stamp(moment)} INFO epoch {epoch_text} step {step * 50} loss={loss:.4f} "
            f"lr={3e-4 * 0.5 ** (elapsed // 1800):.2e} samples/s={throughput:.1f}"
        )
    if exit_code is not None:
        stamp = _log_stamp(until)
        if exit_code == 0:
            lines.append(f"{stamp} INFO Training complete; checkpoint saved to /outputs/model.pt")
        else:
            lines.append(f"{stamp} ERROR RuntimeError: CUDA error: an illegal memory access was encountered")
            lines.append(f"{stamp} ERROR Training failed with exit code {exit_code}")
    return lines
