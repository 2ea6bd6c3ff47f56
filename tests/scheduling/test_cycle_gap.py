"""What is asked for while a scheduling cycle runs adds up to one further cycle: the requests' pending mark
stands, so a burst of requests and releases sends one task that finds the lock taken, not one each, and the
running cycle asks for the next one ``SCHEDULING_MIN_GAP_SECONDS`` after it ends, so that releases arriving
one by one are taken up together."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import override_settings

from portal.queue import enqueue_coalesced, queue_for
from scheduling import tasks
from scheduling.benchmarks.measuring import SentTask
from scheduling.kube.client import kube
from scheduling.loops import cycle, tasknames
from tests.conftest import Org
from tests.locks_elsewhere import held_elsewhere


@pytest.fixture
def cycle_running_elsewhere() -> Iterator[None]:
    """The cycle's advisory lock, held by another session (another worker's cycle under way)."""
    with held_elsewhere("scheduling-cycle"):
        yield


@pytest.mark.django_db(transaction=True)
def test_requests_during_a_cycle_add_up_to_one_task(
    org: Org, cluster_client: None, sent_tasks: list[SentTask], cycle_running_elsewhere: None
) -> None:
    enqueue_coalesced(tasknames.RUN_CYCLE)  # a request: one task goes out
    assert [task.name for task in sent_tasks] == [tasknames.RUN_CYCLE]
    assert tasks.run_cycle() == 0  # that task finds the lock taken
    assert cache.get(cycle.AGAIN)
    for _ in range(5):  # more requests and releases meanwhile: the pending mark still stands
        enqueue_coalesced(tasknames.RUN_CYCLE)
    assert len(sent_tasks) == 1


@override_settings(SCHEDULING_MIN_GAP_SECONDS=0.25)
@pytest.mark.django_db(transaction=True)
def test_a_cycle_asked_for_meanwhile_follows_after_the_gap(
    org: Org, cluster_client: None, sent_tasks: list[SentTask], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = cycle._cycle

    def asked_for_meanwhile(kube: Any) -> int:  # another task found the lock taken while this cycle ran
        cache.set(cycle.AGAIN, True)
        return real(kube)

    monkeypatch.setattr(cycle, "_cycle", asked_for_meanwhile)
    cycle.run_cycle(kube())
    monkeypatch.setattr(cycle, "_cycle", real)
    assert [(task.name, task.options["queue"], task.options["countdown"]) for task in sent_tasks] == [
        (tasknames.RUN_CYCLE, queue_for(tasknames.RUN_CYCLE), 0.25)
    ]
    assert not cache.get(cycle.AGAIN)
    sent_tasks.clear()
    cycle.run_cycle(kube())  # nothing asked for meanwhile: no further cycle
    assert sent_tasks == []
