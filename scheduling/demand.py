"""Turn a workspace row into the plain spec the manifest builders take."""

from __future__ import annotations

from django.conf import settings

from scheduling import priorities
from scheduling.kube.spec import GpuRequest, WorkspaceSpec
from workspaces.models import GpuOffering, Workspace

SHARING = {
    GpuOffering.Kind.WHOLE: "exclusive",
    GpuOffering.Kind.MIG: "mig",
    GpuOffering.Kind.SHARED: "time-sliced",
}
# Simulated cluster only: a job's own simulated runtime in whole seconds, overriding SIMCLUSTER_JOB_SECONDS
# (the full-stack queue benchmark gives each workload class its own). Off where that setting is 0.
SIM_DURATION_ENV = "GPUPORTAL_SIM_DURATION_SECONDS"
# Workload profiles the simulated cluster uses to make up GPU activity (ignored by a real cluster).
_PROFILES = {Workspace.Kind.NOTEBOOK: "bursty-notebook", Workspace.Kind.JOB: "steady-training"}


def gpu_request(offering: GpuOffering, count: int) -> GpuRequest | None:
    if offering.kind == GpuOffering.Kind.CPU or count == 0:
        return None
    return GpuRequest(
        resource_name=offering.resource_name,
        count=count,
        node_selector=dict(offering.node_selector),
        sharing=SHARING[GpuOffering.Kind(offering.kind)],  # type: ignore[arg-type] # values match the Literal
    )


def spec_for(workspace: Workspace) -> WorkspaceSpec:
    simulated_seconds = settings.SIMCLUSTER_JOB_SECONDS
    if simulated_seconds and str(workspace.env.get(SIM_DURATION_ENV, "")).isdigit():
        simulated_seconds = int(workspace.env[SIM_DURATION_ENV])
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
        workload_profile=_PROFILES[Workspace.Kind(workspace.kind)],
        simulated_duration_seconds=(
            simulated_seconds if simulated_seconds and workspace.kind == Workspace.Kind.JOB else None
        ),
    )
