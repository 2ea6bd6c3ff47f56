"""Telemetry collection: every ``TELEMETRY_INTERVAL_SECONDS``, one ``ActivitySample`` per running workspace.

One pass reads the portal's running pods (one list call: pod -> workspace by label), the GPU source once
for every pod (``scheduling/telemetry/sources.py``), and each running notebook's Jupyter through the API
server's service proxy, a bounded number at a time. Rows go in with one bulk insert. A source that cannot
be read leaves the GPU figures NULL for that pass; the pass itself still records the notebooks.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections, transaction

from portal.billing import ledger
from scheduling.demand import spec_for
from scheduling.kube import names
from scheduling.kube.calls import Kube, KubeError
from scheduling.kube.keys import MANAGED_BY, MANAGER, NOTEBOOK_PORT, workspace_id_of
from scheduling.loops.provisioning import notebook_base_url
from scheduling.models import ActivitySample
from scheduling.telemetry.dcgm import PodActivity, PodKey, pod_activity
from scheduling.telemetry.jupyter import KERNELS_PATH, KERNELS_QUERY, STATUS_PATH, NotebookActivity, NotJupyter
from scheduling.telemetry.jupyter import notebook_activity as read_activity
from scheduling.telemetry.samples import IDLE_ACTIVITY, workspace_figures
from scheduling.telemetry.sources import GpuTelemetry, TelemetryUnavailable, configured_source
from workspaces.models import Workspace
from workspaces.tokens import jupyter_token

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Collected:
    samples: int
    gpu_source: str  # what the GPU figures came from this pass ("none": off or unavailable)


def _running_pods(kube: Kube) -> dict[int, list[PodKey]]:
    pods: dict[int, list[PodKey]] = defaultdict(list)
    for pod in kube.list("Pod", None, f"{MANAGED_BY}={MANAGER}"):
        meta = pod["metadata"]
        workspace_id = workspace_id_of(pod)
        if workspace_id is not None and (pod.get("status") or {}).get("phase") == "Running":
            pods[workspace_id].append((meta["namespace"], meta["name"]))
    return pods


def _gpu(source: GpuTelemetry | None) -> tuple[dict[PodKey, PodActivity] | None, str]:
    if source is None:
        return None, ActivitySample.Source.NONE
    try:
        return pod_activity(source.readings()), source.kind
    except TelemetryUnavailable as exc:
        log.warning("GPU telemetry unavailable this pass, nothing is judged on it: %s", exc)
        return None, ActivitySample.Source.NONE


def notebook_activity(kube: Kube, workspace: Workspace) -> NotebookActivity | None:
    """What the notebook's Jupyter says, or None when it cannot be read (never "idle")."""
    spec = spec_for(workspace)
    namespace, service = names.namespace_for(workspace.team.slug), names.base_name(spec)
    base = notebook_base_url(namespace, service)
    token = {"token": jupyter_token(workspace)}  # the Authorization header carries the API server's token
    try:
        status = kube.service_proxy_get(namespace, service, NOTEBOOK_PORT, base + STATUS_PATH, token)
        kernels = kube.service_proxy_get(namespace, service, NOTEBOOK_PORT, base + KERNELS_PATH, KERNELS_QUERY | token)
        return read_activity(status, kernels)
    except (KubeError, NotJupyter) as exc:
        log.info("workspace %s: notebook activity unreadable: %s", workspace.pk, exc)
        return None


def _notebooks(kube: Kube, workspaces: list[Workspace]) -> dict[int, NotebookActivity | None]:
    notebooks = [w for w in workspaces if w.kind == Workspace.Kind.NOTEBOOK]
    if not notebooks:
        return {}

    def read(workspace: Workspace) -> NotebookActivity | None:
        try:
            return notebook_activity(kube, workspace)
        finally:
            close_old_connections()  # a pool thread's own connection, if it opened one

    with ThreadPoolExecutor(max_workers=settings.TELEMETRY_NOTEBOOK_CONCURRENCY) as pool:
        return dict(zip((w.pk for w in notebooks), pool.map(read, notebooks), strict=True))


def collect(kube: Kube, now: datetime, source: GpuTelemetry | None = None) -> Collected:
    """One pass. ``source`` defaults to the configured one."""
    workspaces = list(
        Workspace.objects.filter(state=Workspace.State.RUNNING).select_related("team", "owner", "offering")
    )
    if not workspaces:
        return Collected(0, ActivitySample.Source.NONE)
    pods = _running_pods(kube)
    gpu, kind = _gpu(source if source is not None else configured_source())
    notebooks = _notebooks(kube, workspaces)
    seconds = round(settings.TELEMETRY_INTERVAL_SECONDS)
    rows = []
    seen: dict[int, ledger.Seen] = {}
    for w in workspaces:
        figures = workspace_figures(pods.get(w.pk, []), gpu, notebooks.get(w.pk))
        gpu_seconds = seconds if figures.gpu_active is not None else 0
        idle = gpu_seconds if figures.gpu_active is not None and figures.gpu_active < IDLE_ACTIVITY else 0
        seen[w.pk] = ledger.Seen(gpu_seconds, gpu_seconds * (figures.gpu_active or 0.0), idle)
        rows.append(
            ActivitySample(
                workspace_id=w.pk,
                at=now,
                seconds=seconds,
                gpu_seconds=gpu_seconds,
                idle_gpu_seconds=idle,
                source=kind,
                **vars(figures),
            )
        )
    with transaction.atomic():
        ActivitySample.objects.bulk_create(rows, batch_size=1000)
        ledger.add_activity(seen)
    return Collected(len(rows), kind)
