"""The portal's own request history and the live cluster, in the what-if replay's terms
(:mod:`scheduling.planning.whatif`), for capacity planning from real demand.

Each started workspace becomes one pod row per worker (a MIG request of ``n`` slices: ``n`` single-slice
rows), arriving when it was requested, placed no earlier than it started, and living until it finished
(or until now, if it still runs). Workspaces still queued live for their chosen runtime. Requests that
never started and no longer wait (cancelled, rejected) are left out: they are no demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from scheduling.engine import gpus
from scheduling.engine.shapes import MILLI, PodShape
from scheduling.engine.state import MIG
from scheduling.inventory import Capacity
from scheduling.kube.keys import MIG_CONFIG
from scheduling.planning import trace
from workspaces.models import GpuOffering, Workspace


def shape_of(workspace: Workspace) -> tuple[PodShape, int]:
    """One pod of ``workspace`` as the replay sees it, and how many such pods it asks for."""
    offering = workspace.offering
    cpu, mem, count = workspace.cpu_millis, workspace.memory_mib, workspace.gpu_count
    models = frozenset({offering.gpu_model}) if offering.gpu_model else None
    if offering.kind == GpuOffering.Kind.CPU or count == 0:
        return PodShape(cpu, mem), workspace.workers
    if offering.kind == GpuOffering.Kind.WHOLE:
        return PodShape(cpu, mem, count, MILLI, models), workspace.workers
    if offering.kind in (GpuOffering.Kind.SHARED, GpuOffering.Kind.MPS):  # replicas alike
        milli = MILLI // max(offering.replicas, 1)
    else:  # a MIG slice: its compute share, rounded down so that the same slice in the replay covers it
        profile = gpus.get_model(offering.gpu_model).profile(offering.mig_profile)
        milli = min(MILLI - 1, max(1, profile.compute_slices * MILLI // gpus.COMPUTE_SLICES))
    return PodShape(cpu, mem, 1, milli, models), workspace.workers * count


def pod_rows(workspaces: Iterable[Workspace], now: datetime) -> list[trace.PodRow]:
    """Rows with times in seconds since the earliest request."""
    kept = [w for w in workspaces if w.started_at is not None or w.state == Workspace.State.QUEUED]
    if not kept:
        return []
    origin = min(w.created_at for w in kept)

    def seconds(moment: datetime) -> int:
        return int((moment - origin).total_seconds())

    rows: list[trace.PodRow] = []
    for w in kept:
        shape, pods = shape_of(w)
        created = seconds(w.created_at)
        if w.started_at is not None:
            scheduled, deleted = seconds(w.started_at), seconds(w.finished_at or now)
        else:
            scheduled, deleted = 0, created + w.max_runtime_seconds
        rows.extend(trace.PodRow(f"ws-{w.pk}-{i}", shape, created, deleted, scheduled) for i in range(pods))
    return rows


def node_rows(nodes: Iterable[Mapping[str, Any]]) -> tuple[list[trace.NodeRow], dict[str, str]]:
    """The cluster's schedulable nodes at full capacity, and the MIG layout of each MIG node by name.
    Time-sliced GPUs count as whole GPUs (the replay has no replicas)."""
    nodes = list(nodes)
    capacity = Capacity.from_objects(nodes, [])
    state = capacity.state
    layouts = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(MIG_CONFIG, "") for n in nodes}
    rows: list[trace.NodeRow] = []
    mig: dict[str, str] = {}
    for i, info in enumerate(capacity.nodes):
        model = state.models[int(state.model_idx[i])]
        rows.append(
            trace.NodeRow(info.name, int(state.cpu_cap[i]), int(state.mem_cap[i]), int(state.gpu_count[i]), model)
        )
        if state.mode[i] == MIG and layouts.get(info.name):
            mig[info.name] = layouts[info.name]
    return rows, mig
