"""Which queue each task goes to, and which queues a worker started by ``portal.workers`` consumes."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from portal.queue import control_queue, portal_queues, queue_for, scheduler_queue
from portal.workers import worker_argv
from scheduling.loops import tasknames

TASKS = [value for name, value in vars(tasknames).items() if name.isupper() and isinstance(value, str)]


def _consumed(argv: list[str]) -> list[str]:
    return argv[argv.index("-Q") + 1].split(",")


def test_the_cycle_goes_to_the_scheduler_queue_reconcile_to_the_control_queue_the_rest_to_the_default() -> None:
    default = settings.CELERY_TASK_DEFAULT_QUEUE
    assert queue_for(tasknames.RUN_CYCLE) == scheduler_queue(default) == default + ".scheduler"
    assert queue_for(tasknames.RECONCILE) == control_queue(default) == default + ".control"
    others = set(TASKS) - {tasknames.RUN_CYCLE, tasknames.RECONCILE}
    assert tasknames.PROVISION_MANY in others
    assert {queue_for(name) for name in others} == {default}


def test_beat_routes_each_task_where_the_web_side_sends_it() -> None:
    # Beat sends by the routes in settings, requests and loops by queue_for: a mismatch would leave a
    # periodic cycle on a queue the scheduler does not consume.
    routes = settings.CELERY_TASK_ROUTES
    for name in TASKS:
        assert routes.get(name, {"queue": settings.CELERY_TASK_DEFAULT_QUEUE})["queue"] == queue_for(name)


def test_a_worker_consumes_every_queue_unless_told_which(tmp_path: Path) -> None:
    everything = worker_argv(schedule=tmp_path / "beat", name="all", queue="q")
    assert _consumed(everything) == portal_queues("q") == ["q", "q.control", "q.scheduler"]
    assert everything[everything.index("--schedule") + 1] == str(tmp_path / "beat") and "--beat" in everything
    scheduler = worker_argv(schedule=None, name="s", consume=[scheduler_queue("q")], concurrency=1)
    assert _consumed(scheduler) == ["q.scheduler"]
    assert "--beat" not in scheduler and "--schedule" not in scheduler
    assert scheduler[scheduler.index("--concurrency") + 1] == "1"
