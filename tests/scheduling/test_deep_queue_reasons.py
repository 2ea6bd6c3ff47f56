"""A deep queue is not rewritten every cycle: the first few waiting requests of each team carry the live
reason (figures that change with each admission), the rest say they are in line, in words that stay the
same, so later cycles neither rewrite their rows nor add to their timelines until they near the front."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from scheduling.benchmarks.measuring import SentTask
from scheduling.kube.client import kube
from scheduling.loops import tasknames
from scheduling.loops.cycle import in_line_message, run_cycle
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

H100 = "H100-80GB-HBM3"
EXPLAINED = 2


@pytest.fixture
def h100(org: Org) -> GpuOffering:
    set_quota(org.alpha, H100, 4)
    return install_offerings()["h100-80gb-hbm3"]


def reasons(workspaces: list[Workspace]) -> list[str]:
    return [Workspace.objects.get(pk=w.pk).reason for w in workspaces]


@override_settings(QUEUE_EXPLAINED_PER_TEAM=EXPLAINED)
def test_only_the_front_of_a_teams_queue_gets_live_figures(org: Org, cluster_client: None, h100: GpuOffering) -> None:
    running = make_workspace(org, h100, 3, name="running", state="admitted")
    queued = [make_workspace(org, h100, 2, name=f"q{i}") for i in range(6)]

    assert run_cycle(kube()) == 0

    live = "Waiting for team quota: Alpha uses 3 of its 4 guaranteed H100-80GB-HBM3 GPU-equivalents and this needs 2."
    in_line = in_line_message("Alpha", EXPLAINED)
    assert in_line.startswith("Waiting in line: at least 2 of Alpha's requests are ahead of it")
    assert reasons(queued) == [live, live] + [in_line] * 4
    events = WorkspaceEvent.objects.filter(workspace__in=queued).count()

    # The team's use changes (3 -> 1 GPU held): the first request starts, 1 + 2 = 3 of 4 are held again.
    Workspace.objects.filter(pk=running.pk).update(gpu_count=1, gpu_equivalents=1)
    assert run_cycle(kube()) == 1
    assert Workspace.objects.get(pk=queued[0].pk).state == Workspace.State.ADMITTED
    # The third moved to the front: it gets the live reason (and one note on its timeline); the rest not.
    assert reasons(queued[1:]) == [live, live] + [in_line] * 3
    assert WorkspaceEvent.objects.filter(workspace__in=queued).count() == events + 2  # the admission, the move up

    # Nothing changed: a cycle writes nothing at all.
    assert run_cycle(kube()) == 0
    assert WorkspaceEvent.objects.filter(workspace__in=queued).count() == events + 2
    assert reasons(queued[1:]) == [live, live] + [in_line] * 3


@override_settings(QUEUE_CONSIDERED_PER_SHAPE=2)
def test_a_cycle_reads_the_oldest_few_of_each_shape_and_asks_again_when_it_admits_them_all(
    org: Org,
    cluster_client: None,
    h100: GpuOffering,
    sent_tasks: list[SentTask],
    django_capture_on_commit_callbacks: Any,
) -> None:
    queued = [make_workspace(org, h100, 1, name=f"q{i}") for i in range(4)]  # one shape; all four fit
    Workspace.objects.filter(pk__in=[w.pk for w in queued]).update(reason=Workspace.FIRST_REASON)

    def cycle() -> int:
        with django_capture_on_commit_callbacks(execute=True):  # what is enqueued after commit goes out
            return run_cycle(kube())

    assert cycle() == 2  # the two oldest: the rest were not read
    assert [w.state for w in fresh(queued)] == ["admitted"] * 2 + ["queued"] * 2
    # The ones behind say they are in line; a further cycle is asked for, since those behind may fit too.
    assert reasons(queued[2:]) == [in_line_message("Alpha", 2)] * 2
    cycles = [task for task in sent_tasks if task.name == tasknames.RUN_CYCLE]
    assert len(cycles) == 1

    assert cycle() == 2  # the rest: all read now, so no further cycle is asked for
    assert [w.state for w in fresh(queued)] == ["admitted"] * 4
    assert [task for task in sent_tasks if task.name == tasknames.RUN_CYCLE] == cycles


@override_settings(QUEUE_CONSIDERED_PER_SHAPE=2)
def test_requests_behind_the_heads_never_start_before_them(org: Org, cluster_client: None, h100: GpuOffering) -> None:
    set_quota(org.alpha, H100, 2)
    queued = [make_workspace(org, h100, 1, name=f"q{i}") for i in range(4)]
    Workspace.objects.filter(pk__in=[w.pk for w in queued]).update(reason=Workspace.FIRST_REASON)
    assert run_cycle(kube()) == 2
    Workspace.objects.filter(pk=queued[1].pk).update(state="succeeded")  # one finishes: room for one more
    assert run_cycle(kube()) == 1
    assert [w.state for w in fresh(queued)] == ["admitted", "succeeded", "admitted", "queued"]


def fresh(workspaces: list[Workspace]) -> list[Workspace]:
    return [Workspace.objects.get(pk=w.pk) for w in workspaces]
