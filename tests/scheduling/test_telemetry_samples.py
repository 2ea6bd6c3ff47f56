"""One workspace's figures from its pods' GPU activity and its notebook's: missing data stays missing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduling.telemetry.dcgm import PodActivity
from scheduling.telemetry.jupyter import NotebookActivity
from scheduling.telemetry.samples import Figures, workspace_figures

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T1 = datetime(2026, 12, 1, 9, 0, 30, tzinfo=UTC)


def pod(name: str, active: float | None, devices: int = 1, at: datetime = T1) -> PodActivity:
    return PodActivity("team-a", name, devices, active, 1000.0 * devices, 80_000.0 * devices, at)


JOB = [("team-a", "job-0"), ("team-a", "job-1")]
NOTEBOOK = NotebookActivity(kernels=1, busy_kernels=0, connections=1, last_activity=T0)


def test_a_jobs_activity_is_weighted_by_its_pods_devices() -> None:
    gpu = {JOB[0]: pod("job-0", 0.9, devices=3, at=T0), JOB[1]: pod("job-1", 0.1, devices=1)}
    figures = workspace_figures(JOB, gpu, None)
    assert figures.gpu_active == pytest.approx((0.9 * 3 + 0.1) / 4)
    assert (figures.fb_used_mib, figures.fb_total_mib) == (4000, 320_000)
    assert figures.gpu_observed_at == T0  # the oldest reading: how fresh the figure is
    assert figures.kernels is None


def test_one_silent_pod_leaves_the_whole_workspace_without_a_gpu_figure() -> None:
    assert workspace_figures(JOB, {JOB[0]: pod("job-0", 0.0)}, None) == Figures()
    assert workspace_figures(JOB, {JOB[0]: pod("job-0", 0.0), JOB[1]: pod("job-1", None)}, None).gpu_active is None


def test_no_source_or_no_pods_gives_only_the_notebooks_figures() -> None:
    for pods, gpu in [(JOB[:1], None), ([], {JOB[0]: pod("job-0", 0.5)})]:
        figures = workspace_figures(pods, gpu, NOTEBOOK)
        assert figures.gpu_active is None and figures.gpu_observed_at is None
        assert (figures.kernels, figures.busy_kernels, figures.connections, figures.last_activity) == (1, 0, 1, T0)
