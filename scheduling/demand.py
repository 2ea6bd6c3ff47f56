"""A workspace row in the terms of the parts that act on it, turned once here: the admission engine's
workload, the placement engine's demand and the cluster's spec (what the manifest builders take).

Pure functions of the row (and settings): no queries, no cluster calls.
"""

from __future__ import annotations

import re

from django.conf import settings

from scheduling import priorities
from scheduling.engine.quota import Kind, Workload, to_units
from scheduling.inventory import Demand
from scheduling.kube.spec import SHARING_OF_KIND, DeviceClaim, GpuRequest, WorkspaceSpec
from scheduling.quota.rules import may_borrow
from workspaces.models import GpuOffering, Workspace

# Simulated cluster only: a job's own simulated runtime in whole seconds, overriding SIMCLUSTER_JOB_SECONDS
# (the full-stack queue benchmark gives each workload class its own). Off where that setting is 0.
SIM_DURATION_ENV = "GPUPORTAL_SIM_DURATION_SECONDS"
# Workload profiles the simulated cluster uses to make up GPU activity (ignored by a real cluster).
_PROFILES = {Workspace.Kind.NOTEBOOK: "bursty-notebook", Workspace.Kind.JOB: "steady-training"}
# Simulated cluster only: a workspace's own profile, ``NAME`` or ``NAME:SECONDS`` (how long an
# ``idle-notebook`` works before it sits idle), e.g. ``idle-notebook:60`` to watch idle reclaim in the demo.
SIM_PROFILE_ENV = "GPUPORTAL_SIM_PROFILE"
_PROFILE_VALUE = re.compile(r"\A([a-z][a-z-]{0,40})(?::(\d{1,6}))?\Z")
# Simulated cluster only: GPU memory (MiB) the workload allocates, e.g. to watch an MPS share's cap fail a pod.
SIM_GPU_MEMORY_ENV = "GPUPORTAL_SIM_GPU_MEMORY_MIB"
_MIB_VALUE = re.compile(r"\A[0-9]{1,7}\Z")


def sim_workload(workspace: Workspace) -> tuple[str, int | None]:
    """(profile, busy seconds) the simulated cluster is told to play; the kind's default unless the
    workspace's environment names one well-formed (the simulated cluster ignores profiles it lacks)."""
    match = _PROFILE_VALUE.match(str(workspace.env.get(SIM_PROFILE_ENV, "")))
    if match is None:
        return _PROFILES[Workspace.Kind(workspace.kind)], None
    return match.group(1), int(match.group(2)) if match.group(2) else None


def is_gpu(workspace: Workspace) -> bool:
    """Counts against GPU quota (CPU-only workspaces never do)."""
    return workspace.offering.kind != GpuOffering.Kind.CPU


def gpu_request(offering: GpuOffering, count: int) -> GpuRequest | None:
    """The device-plugin resource a pod asks for (or the DRA claim, for a DRA offering); None for CPU-only pods."""
    if offering.kind == GpuOffering.Kind.CPU or count == 0:
        return None
    claim = DeviceClaim(offering.device_class, offering.device_selector, count) if offering.uses_dra else None
    return GpuRequest(
        resource_name=offering.resource_name,
        count=count,
        node_selector=dict(offering.node_selector),
        sharing=SHARING_OF_KIND[offering.kind],
        claim=claim,
    )


def workload_of(workspace: Workspace) -> Workload:
    """The admission engine's view: units of one flavour, priority, and whether it may borrow."""
    return Workload(
        id=str(workspace.pk),
        team=workspace.team.slug,
        flavour=workspace.offering.flavour,
        units=to_units(float(workspace.gpu_equivalents)),
        priority=priorities.value(workspace.priority),
        kind=Kind.BATCH if may_borrow(workspace.kind) else Kind.INTERACTIVE,
        created_at=workspace.created_at.timestamp(),
        admitted_at=workspace.admitted_at.timestamp() if workspace.admitted_at else None,
        borrowing=workspace.borrowing,
        preempting=workspace.preempt_at is not None,
    )


def _demand(offering: GpuOffering, count: int, *, cpu_millis: int, memory_mib: int, pods: int = 1) -> Demand:
    gpu = gpu_request(offering, count)
    return Demand(
        resource_name=gpu.resource_name if gpu else "",
        count=gpu.count if gpu else 0,
        cpu_millis=cpu_millis,
        memory_mib=memory_mib,
        node_selector=dict(offering.node_selector),
        pods=pods,
        sharing=gpu.sharing if gpu else "",
        gpu_model=offering.gpu_model,
        mig_profile=offering.mig_profile,
        replicas=offering.replicas,
        claim=bool(gpu and gpu.claim),
    )


def demand_of(workspace: Workspace) -> Demand:
    """The placement engine's view: what each of the workspace's pods needs."""
    return _demand(
        workspace.offering,
        workspace.gpu_count,
        cpu_millis=workspace.cpu_millis,
        memory_mib=workspace.memory_mib,
        pods=workspace.workers,
    )


def offering_demand(offering: GpuOffering) -> Demand:
    """One pod of one unit of ``offering`` with its default CPU and memory (how many would start now?)."""
    units = 0 if offering.kind == GpuOffering.Kind.CPU else 1
    return _demand(offering, units, cpu_millis=offering.cpu_millis_default, memory_mib=offering.memory_mib_default)


def spec_for(workspace: Workspace) -> WorkspaceSpec:
    """The cluster's view: everything the manifest builders need, as plain values."""
    simulated_seconds = settings.SIMCLUSTER_JOB_SECONDS
    if simulated_seconds and str(workspace.env.get(SIM_DURATION_ENV, "")).isdigit():
        simulated_seconds = int(workspace.env[SIM_DURATION_ENV])
    profile, busy_seconds = sim_workload(workspace)
    gpu_memory = _MIB_VALUE.match(str(workspace.env.get(SIM_GPU_MEMORY_ENV, "")))
    return WorkspaceSpec(
        workspace_id=workspace.pk,
        name=workspace.name,
        kind=workspace.kind,  # type: ignore[arg-type] # TextChoices values are the Literal's
        team_slug=workspace.team.slug,
        owner=workspace.owner.get_username(),
        image=workspace.image,
        command=tuple(workspace.command),
        env=dict(workspace.env),
        gpu=gpu_request(workspace.offering, workspace.gpu_count),
        cpu_millis=workspace.cpu_millis,
        memory_mib=workspace.memory_mib,
        workers=workspace.workers,
        # The pod carries the policy maximum; the portal enforces the (extendable) chosen runtime itself.
        max_runtime_seconds=settings.WORKSPACE_MAX_RUNTIME_HOURS * 3600,
        home_volume_gib=workspace.home_volume_gib,
        priority_class=priorities.class_name(workspace.priority),
        pin_node=workspace.pinned_node or None,
        workload_profile=profile,
        simulated_busy_seconds=busy_seconds,
        simulated_duration_seconds=(
            simulated_seconds if simulated_seconds and workspace.kind == Workspace.Kind.JOB else None
        ),
        simulated_gpu_memory_mib=int(gpu_memory.group()) if gpu_memory else None,
        elastic=(workspace.min_workers, workspace.max_workers)
        if workspace.min_workers is not None and workspace.max_workers is not None
        else None,
    )
